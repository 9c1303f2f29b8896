package k8sops

import (
	"strings"
	"testing"
)

func TestValidateIPPool(t *testing.T) {
	others := []IPPoolSpec{{Name: "default-ipv4-ippool", CIDR: "10.233.64.0/18"}, {Name: "v6", CIDR: "fd00:20::/64"}}
	for _, tc := range []struct {
		name string
		pool IPPoolSpec
		want string // "attribute: summary" of each finding, joined by "; "
	}{
		{"valid v4 default block", IPPoolSpec{Name: "new", CIDR: "10.20.0.0/16"}, ""},
		{"valid v6 with vxlan", IPPoolSpec{Name: "new6", CIDR: "fd00:30::/64", BlockSize: 122, VXLANMode: EncapAlways}, ""},
		{"the pool itself is no overlap", IPPoolSpec{Name: "default-ipv4-ippool", CIDR: "10.233.64.0/18", IPIPMode: EncapAlways}, ""},
		{"not a CIDR", IPPoolSpec{CIDR: "10.20.0.0"}, "cidr: Invalid CIDR"},
		{"host bits", IPPoolSpec{CIDR: "10.20.0.1/16"}, "cidr: CIDR Has Host Bits Set"},
		{"overlap names the pool", IPPoolSpec{Name: "new", CIDR: "10.233.0.0/16"}, "cidr: CIDR Overlaps Another Pool"},
		{"link-local", IPPoolSpec{CIDR: "169.254.0.0/20"}, "cidr: CIDR Overlaps Link-Local Addresses"},
		{"block too small a prefix", IPPoolSpec{CIDR: "10.20.0.0/16", BlockSize: 19}, "block_size: Block Size Out of Range"},
		{"v6 block range", IPPoolSpec{CIDR: "fd00:30::/64", BlockSize: 64}, "block_size: Block Size Out of Range"},
		{"block larger than pool", IPPoolSpec{CIDR: "10.20.0.0/28", BlockSize: 26}, "block_size: Block Larger Than the Pool"},
		{"both encapsulations", IPPoolSpec{CIDR: "10.20.0.0/16", IPIPMode: EncapAlways, VXLANMode: EncapCrossSubnet}, "vxlan_mode: Both Encapsulations Enabled"},
		{"unknown mode", IPPoolSpec{CIDR: "10.20.0.0/16", IPIPMode: "always"}, "ipip_mode: Unknown Encapsulation Mode"},
		{"ipip on v6", IPPoolSpec{CIDR: "fd00:30::/64", IPIPMode: EncapAlways}, "ipip_mode: IPIP Is IPv4 Only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range ValidateIPPool(tc.pool, others) {
				got = append(got, f.Path.String()+": "+f.Summary)
			}
			if strings.Join(got, "; ") != tc.want {
				t.Errorf("findings = %q, want %q", got, tc.want)
			}
		})
	}
	f := ValidateIPPool(IPPoolSpec{Name: "new", CIDR: "10.233.0.0/16"}, others)
	if len(f) != 1 || !strings.Contains(f[0].Detail, "default-ipv4-ippool (10.233.64.0/18)") {
		t.Errorf("overlap detail does not name the pool: %v", f)
	}
}
