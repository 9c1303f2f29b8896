package k8sops

import (
	"strings"
	"testing"
)

func TestCIDRFunctions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
		err  string
	}{
		{"100.64.0.0/13", "100.64.0.0/10", true, ""},
		{"172.24.0.0/15", "100.64.0.0/10", false, ""},
		{"fd00:10::/108", "fd00::/8", true, ""},
		{"10.0.0.0/8", "fd00::/8", false, ""},
		{"0.0.0.0/0", "255.255.255.255/32", true, ""},
		{"10.0.0.1/8", "10.0.0.0/8", false, "host bits set: use 10.0.0.0/8"},
		{"10.0.0.0/33", "10.0.0.0/8", false, "not a CIDR"},
	} {
		got, err := CIDROverlaps(c.a, c.b)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("CIDROverlaps(%s, %s) = %t, %v; want %t, %q", c.a, c.b, got, err, c.want, c.err)
		}
	}
	for _, c := range []struct {
		cidr, x string
		want    bool
		err     string
	}{
		{"100.64.0.0/10", "100.64.0.10", true, ""},
		{"100.64.0.0/10", "100.128.0.0", false, ""},
		{"100.64.0.0/10", "100.64.0.0/13", true, ""},
		{"100.64.0.0/13", "100.64.0.0/10", false, ""},
		{"fd00::/8", "fd00::1", true, ""},
		{"fd00::/8", "10.0.0.1", false, ""},
		{"10.0.0.0/8", "ten", false, "neither an IP address nor a CIDR"},
	} {
		got, err := CIDRContains(c.cidr, c.x)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("CIDRContains(%s, %s) = %t, %v; want %t, %q", c.cidr, c.x, got, err, c.want, c.err)
		}
	}
	for _, c := range []struct {
		ip, from, to, want, err string
	}{
		{"100.64.0.10", "100.64.0.0/13", "172.24.0.0/15", "172.24.0.10", ""},
		{"100.69.0.5", "100.64.0.0/13", "172.24.0.0/15", "172.25.0.5", ""}, // wraps modulo the /15
		{"100.66.0.1", "100.64.0.0/13", "172.24.0.0/15", "172.24.0.2", ""}, // .1 is default/kubernetes's
		{"100.64.0.255", "100.64.0.0/13", "10.0.0.0/24", "10.0.0.2", ""},   // the /24's broadcast: wraps past .0 and .1
		{"fd00:10::a", "fd00:10::/108", "fd00:24::/108", "fd00:24::a", ""},
		{"100.64.0.10", "100.64.0.0/13", "fd00:24::/108", "", "different IP families"},
		{"10.0.0.1", "100.64.0.0/13", "172.24.0.0/15", "", "not inside"},
		{"x", "100.64.0.0/13", "172.24.0.0/15", "", "not an IP address"},
	} {
		got, err := MapOffset(c.ip, c.from, c.to)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("MapOffset(%s, %s, %s) = %q, %v; want %q, %q", c.ip, c.from, c.to, got, err, c.want, c.err)
		}
	}
}
