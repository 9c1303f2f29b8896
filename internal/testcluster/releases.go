// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The Kubernetes releases the tests run on besides the newest, and what each needs to serve ServiceCIDR.
package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// NewestRelease is the minor version of the suite's own control plane (tools/testbin/kube/go.mod).
const NewestRelease = "1.37"

// Release is a Kubernetes control plane whose binaries tools/testbin.sh builds into
// bin/k8s-<Name>/ (make testbin-matrix; the newest is the suite's own, in bin/), with the flags
// that make it serve ServiceCIDR.
type Release struct {
	Name string // minor version, e.g. "1.29"
	// ServiceCIDRVersion is the group/version its ServiceCIDRs are served as.
	ServiceCIDRVersion string
	// DualWrite: the 1.33 allocator writes the flag range first, and fails every dynamic
	// allocation while that range is Terminating (DisableAllocatorDualWrite off by default).
	DualWrite                              bool
	apiServerFlags, controllerManagerFlags []string
}

const multiCIDRGate = "--feature-gates=MultiCIDRServiceAllocator=true"

// Releases are the releases, oldest first, the newest last. A newer apiserver cannot stand in for them:
// with networking.k8s.io/v1 servicecidrs disabled it never becomes ready, because it runs on
// that API itself.
var Releases = []Release{
	// The write-ups' own cluster: alpha, behind the gate and runtime-config.
	{Name: "1.29", ServiceCIDRVersion: "networking.k8s.io/v1alpha1",
		apiServerFlags:         []string{multiCIDRGate, "--runtime-config=networking.k8s.io/v1alpha1=true"},
		controllerManagerFlags: []string{multiCIDRGate}},
	// Beta, still off by default.
	{Name: "1.32", ServiceCIDRVersion: "networking.k8s.io/v1beta1",
		apiServerFlags:         []string{multiCIDRGate, "--runtime-config=networking.k8s.io/v1beta1=true"},
		controllerManagerFlags: []string{multiCIDRGate}},
	// GA, with the allocator's dual-write on by default.
	{Name: "1.33", ServiceCIDRVersion: "networking.k8s.io/v1", DualWrite: true},
	{Name: "1.35", ServiceCIDRVersion: "networking.k8s.io/v1"},
	{Name: "1.36", ServiceCIDRVersion: "networking.k8s.io/v1"},
	// The suite's own control plane (bin/), so that the matrix tests run on the newest too.
	{Name: NewestRelease, ServiceCIDRVersion: "networking.k8s.io/v1"},
}

// ReleaseNamed is the release of that name.
func ReleaseNamed(name string) (Release, error) {
	i := slices.IndexFunc(Releases, func(r Release) bool { return r.Name == name })
	if i < 0 {
		names := make([]string, len(Releases))
		for j, r := range Releases {
			names[j] = r.Name
		}
		return Release{}, fmt.Errorf("no test release %q (known: %s)", name, strings.Join(names, ", "))
	}
	return Releases[i], nil
}

// BinDir is where tools/testbin.sh puts the release's binaries: bin/k8s-<Name>/, and bin/ itself
// for the newest.
func (r Release) BinDir() string {
	if r.Name == NewestRelease {
		return DefaultBinDir()
	}
	return filepath.Join(DefaultBinDir(), "k8s-"+r.Name)
}

// Built says whether the release's binaries are there, and if not what to run.
func (r Release) Built() error {
	if _, err := os.Stat(filepath.Join(r.BinDir(), "kube-apiserver")); err != nil {
		return fmt.Errorf("release %s is not built (make testbin-matrix MATRIX=%s): %w", r.Name, r.Name, err)
	}
	return nil
}

// Options start this release's control plane.
func (r Release) Options() Options {
	return Options{BinDir: r.BinDir(), APIServerFlags: slices.Clone(r.apiServerFlags),
		ControllerManagerFlags: slices.Clone(r.controllerManagerFlags)}
}
