// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package calico

import (
	"errors"
	"strings"
	"testing"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
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
		{"LoadBalancer alone", IPPoolSpec{CIDR: "10.20.0.0/16", AllowedUses: []string{"LoadBalancer"}}, ""},
		// calicoctl: "LoadBalancer cannot be used at the same time as: Workload" (found by the calicoctl corpus).
		{"LoadBalancer with Workload", IPPoolSpec{CIDR: "10.20.0.0/16", AllowedUses: []string{"LoadBalancer", "Workload"}},
			"allowed_uses: LoadBalancer Pool Shared With Other Uses"},
		{"LoadBalancer with Tunnel", IPPoolSpec{CIDR: "10.20.0.0/16", AllowedUses: []string{"Tunnel", "LoadBalancer"}},
			"allowed_uses: LoadBalancer Pool Shared With Other Uses"},
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

func TestUnsupportedPoolFields(t *testing.T) {
	old := &CalicoAPI{Group: "crd.projectcalico.org/v1", PoolFields: map[string]bool{"cidr": true, FieldAllowedUses: true}}
	got := old.UnsupportedPoolFields([]string{FieldAllowedUses, FieldAssignmentMode})
	if len(got) != 1 || got[0].Path.String() != "assignment_mode" || !strings.Contains(got[0].Detail, "has no spec.assignmentMode") {
		t.Errorf("a CRD without assignmentMode: got %+v, want one finding on assignment_mode", got)
	}
	if got := (&CalicoAPI{Group: "projectcalico.org/v3"}).UnsupportedPoolFields([]string{FieldAssignmentMode}); len(got) != 0 {
		t.Errorf("the Calico API server (no CRD schema): got %+v, want every field supported", got)
	}
}

func TestCheckPoolAmongOthers(t *testing.T) {
	pools := []IPPool{
		{Name: "old", Spec: apiv3.IPPoolSpec{CIDR: "10.10.0.0/16"}, Settings: PoolSettings{IPIPMode: EncapAlways, VXLANMode: EncapNever}},
		{Name: "new", Spec: apiv3.IPPoolSpec{CIDR: "10.20.0.0/16"}}, // the pool itself, as listed: not an overlap
	}
	s := PoolSettings{CIDR: "10.20.0.0/16", BlockSize: 26, IPIPMode: EncapNever, VXLANMode: EncapNever}
	errs, warnings := CheckPoolAmongOthers("new", s, pools)
	if len(errs) != 0 || len(warnings) != 1 || warnings[0].Path.String() != "ipip_mode" ||
		!strings.Contains(warnings[0].Detail, "IPPool old (10.10.0.0/16) has ipip_mode Always (this pool: Never)") {
		t.Errorf("an enabled pool with Never beside an IPIP pool: errs %+v, warnings %+v, want one ipip_mode warning", errs, warnings)
	}
	s.Disabled = true
	if _, warnings := CheckPoolAmongOthers("new", s, pools); len(warnings) != 0 {
		t.Errorf("a disabled pool takes no pods: got warnings %+v", warnings)
	}
	s.CIDR = "10.10.128.0/17"
	if errs, _ := CheckPoolAmongOthers("new", s, pools); len(errs) != 1 || errs[0].Summary != "CIDR Overlaps Another Pool" {
		t.Errorf("a pool inside another: got %+v, want CIDR Overlaps Another Pool", errs)
	}
}

func TestCheckPoolsLeft(t *testing.T) {
	pool := func(name, cidr string, disabled bool, sel string, uses ...string) IPPool {
		return IPPool{Name: name, Spec: apiv3.IPPoolSpec{CIDR: cidr},
			Settings: PoolSettings{CIDR: cidr, Disabled: disabled, NodeSelector: sel, AllowedUses: uses}}
	}
	old := pool("default-ipv4-ippool", "100.96.0.0/11", false, "all()")
	// Calico assigns from a Manual pool only to pods that name it (calicoctl ipam, or the
	// cni.projectcalico.org/ipv4pools annotation): new pods get nothing from it.
	manual := pool("manual", "172.16.0.0/13", false, "all()")
	manual.Settings.AssignmentMode = string(apiv3.Manual)
	for _, c := range []struct {
		name         string
		others       []IPPool
		errs, warned bool
	}{
		{"the only pool", []IPPool{old}, true, false},
		{"another, disabled", []IPPool{old, pool("b", "172.16.0.0/13", true, "all()")}, true, false},
		{"another of the other family", []IPPool{old, pool("v6", "fd00:16::/64", false, "all()")}, true, false},
		{"another for load balancers only", []IPPool{old, pool("lb", "172.30.0.0/24", false, "all()", "LoadBalancer")}, true, false},
		{"a new pool for all nodes", []IPPool{old, pool("new", "172.16.0.0/13", false, "all()")}, false, false},
		{"a new pool with the default selector", []IPPool{old, pool("new", "172.16.0.0/13", false, "")}, false, false},
		{"a new pool for some nodes", []IPPool{old, pool("new", "172.16.0.0/13", false, "zone == 'a'", "Workload")}, false, true},
		{"another, Manual", []IPPool{old, manual}, true, false},
		{"a new pool beside a Manual one", []IPPool{old, manual, pool("new", "172.16.0.0/13", false, "all()")}, false, false},
	} {
		errs, warnings := CheckPoolsLeft(old.Name, old.Spec.CIDR, "all()", c.others, unreadableNodes)
		if (len(errs) > 0) != c.errs || (len(warnings) > 0) != c.warned {
			t.Errorf("%s: errors %v, warnings %v", c.name, errs, warnings)
		}
		for _, f := range append(errs, warnings...) {
			if f.Path.String() != "disabled" || !strings.Contains(f.Detail, old.Name) {
				t.Errorf("%s: finding %+v should be at disabled and name the pool", c.name, f)
			}
		}
	}
}

// TestCheckPoolsLeftNodes: with the nodes' labels known, a pool is refused out of service when a
// node it selects is selected by no enabled pool left, and allowed when each is.
func TestCheckPoolsLeftNodes(t *testing.T) {
	pool := func(name, sel string) IPPool {
		return IPPool{Name: name, Spec: apiv3.IPPoolSpec{CIDR: "172.16.0.0/13"}, Settings: PoolSettings{CIDR: "172.16.0.0/13", NodeSelector: sel}}
	}
	nodes := map[string]map[string]string{"n-a": {"zone": "a"}, "n-b": {"zone": "b"}, "n-none": {}}
	for _, c := range []struct {
		name, old string
		left      []IPPool
		uncovered string // "" when allowed
	}{
		{"one zone left", "all()", []IPPool{pool("new", "zone == 'a'")}, "2 of the 3 nodes (n-b, n-none)"},
		{"two selectors that cover all", "all()", []IPPool{pool("new", "zone == 'a'"), pool("new2", "zone != 'a'")}, ""},
		{"a zone pool replaced by the same zone", "zone == 'b'", []IPPool{pool("new", "zone in {'b', 'c'}")}, ""},
		{"a zone pool replaced by another zone", "zone == 'b'", []IPPool{pool("new", "zone == 'a'")}, "1 of the 3 nodes (n-b)"},
		{"a selector Calico cannot parse selects nothing", "all()", []IPPool{pool("new", "zone = 'a'")}, "3 of the 3 nodes"},
		{"the old pool's selector unparsable: it served nothing", "zone = 'b'", []IPPool{pool("new", "zone == 'a'")}, ""},
	} {
		errs, warnings := CheckPoolsLeft("old", "10.0.0.0/16", c.old, c.left, func() (map[string]map[string]string, error) { return nodes, nil })
		switch {
		case len(warnings) > 0:
			t.Errorf("%s: warnings %v with the nodes known", c.name, warnings)
		case c.uncovered == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", c.name, errs)
		case c.uncovered != "" && (len(errs) != 1 || errs[0].Summary != "Nodes No Other Pool Selects" || !strings.Contains(errs[0].Detail, c.uncovered)):
			t.Errorf("%s: errors %v, want one naming %s", c.name, errs, c.uncovered)
		}
	}
	if errs, warnings := CheckPoolsLeft("old", "10.0.0.0/16", "all()", []IPPool{pool("new", "zone == 'a'")}, unreadableNodes); len(errs) > 0 || len(warnings) != 1 {
		t.Errorf("with the nodes unknown: errors %v, warnings %v; want one warning", errs, warnings)
	}
}

// unreadableNodes stands for a node list the caller could not read.
func unreadableNodes() (map[string]map[string]string, error) {
	return nil, errors.New("nodes: forbidden")
}
