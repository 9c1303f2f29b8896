// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"errors"
	"strings"
	"testing"
)

// argOf is the argument an error names, or -1.
func argOf(err error) int {
	var f Finding
	if !errors.As(err, &f) {
		return -1
	}
	if arg, ok := f.Path.Argument(); ok {
		return arg
	}
	return -1
}

func TestCIDRFunctions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
		err  string
		arg  int
	}{
		{"100.64.0.0/13", "100.64.0.0/10", true, "", -1},
		{"172.24.0.0/15", "100.64.0.0/10", false, "", -1},
		{"fd00:10::/108", "fd00::/8", true, "", -1},
		{"10.0.0.0/8", "fd00::/8", false, "", -1},
		{"0.0.0.0/0", "255.255.255.255/32", true, "", -1},
		{"10.0.0.1/8", "10.0.0.0/8", false, "host bits set: use 10.0.0.0/8", 0},
		{"10.0.0.0/33", "10.0.0.0/8", false, "not a CIDR", 0},
		{"10.0.0.0/8", "fd00::1/8", false, "host bits set: use fd00::/8", 1},
	} {
		got, err := CIDROverlaps(c.a, c.b)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) || argOf(err) != c.arg {
			t.Errorf("CIDROverlaps(%s, %s) = %t, %v (argument %d); want %t, %q (argument %d)", c.a, c.b, got, err, argOf(err), c.want, c.err, c.arg)
		}
	}
	for _, c := range []struct {
		cidr, x string
		want    bool
		err     string
		arg     int
	}{
		{"100.64.0.0/10", "100.64.0.10", true, "", -1},
		{"100.64.0.0/10", "100.128.0.0", false, "", -1},
		{"100.64.0.0/10", "100.64.0.0/13", true, "", -1},
		{"100.64.0.0/13", "100.64.0.0/10", false, "", -1},
		{"fd00::/8", "fd00::1", true, "", -1},
		{"fd00::/8", "10.0.0.1", false, "", -1},
		{"10.0.0.0/8", "ten", false, "neither an IP address nor a CIDR", 1},
		{"10.0.0.0/8", "10.0.0.0/40", false, "not a CIDR", 1},
		{"10.0.0.0/x", "10.0.0.1", false, "not a CIDR", 0},
	} {
		got, err := CIDRContains(c.cidr, c.x)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) || argOf(err) != c.arg {
			t.Errorf("CIDRContains(%s, %s) = %t, %v (argument %d); want %t, %q (argument %d)", c.cidr, c.x, got, err, argOf(err), c.want, c.err, c.arg)
		}
	}
	for _, c := range []struct {
		ip, from, to, want, err string
		arg                     int
	}{
		{"100.64.0.10", "100.64.0.0/13", "172.24.0.0/15", "172.24.0.10", "", -1},
		{"100.69.0.5", "100.64.0.0/13", "172.24.0.0/15", "172.25.0.5", "", -1}, // wraps modulo the /15
		{"100.66.0.1", "100.64.0.0/13", "172.24.0.0/15", "172.24.0.2", "", -1}, // .1 is default/kubernetes's
		{"100.64.0.255", "100.64.0.0/13", "10.0.0.0/24", "10.0.0.2", "", -1},   // the /24's broadcast: wraps past .0 and .1
		{"fd00:10::a", "fd00:10::/108", "fd00:24::/108", "fd00:24::a", "", -1},
		{"100.64.0.10", "100.64.0.0/13", "fd00:24::/108", "", "different IP families", 2},
		{"10.0.0.1", "100.64.0.0/13", "172.24.0.0/15", "", "not inside", 0},
		{"x", "100.64.0.0/13", "172.24.0.0/15", "", "not an IP address", 0},
		{"100.64.0.10", "100.64.0.0/33", "172.24.0.0/15", "", "not a CIDR", 1},
		{"100.64.0.10", "100.64.0.0/13", "172.24.0.1/15", "", "host bits set", 2},
	} {
		got, err := MapOffset(c.ip, c.from, c.to)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) || argOf(err) != c.arg {
			t.Errorf("MapOffset(%s, %s, %s) = %q, %v (argument %d); want %q, %q (argument %d)", c.ip, c.from, c.to, got, err, argOf(err), c.want, c.err, c.arg)
		}
	}
}
