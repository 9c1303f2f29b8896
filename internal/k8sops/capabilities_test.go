// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubetesting "k8s.io/client-go/testing"
)

func fakeDiscovery(minor string, resources map[string][]string) *fakediscovery.FakeDiscovery {
	d := &fakediscovery.FakeDiscovery{
		Fake:               &kubetesting.Fake{},
		FakedServerVersion: &version.Info{Major: "1", Minor: minor, GitVersion: "v1." + minor + ".2"},
	}
	for gv, names := range resources {
		list := &metav1.APIResourceList{GroupVersion: gv}
		for _, n := range names {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: n})
		}
		d.Resources = append(d.Resources, list)
	}
	return d
}

func TestProbe(t *testing.T) {
	tests := []struct {
		name        string
		minor       string
		resources   map[string][]string
		serviceCIDR string
		calico      []string
	}{
		{"1.34 without Calico", "34", map[string][]string{
			"v1": {"services"}, "networking.k8s.io/v1": {"servicecidrs", "ipaddresses", "ingresses"},
			"networking.k8s.io/v1beta1": {"servicecidrs", "ipaddresses"},
		}, "networking.k8s.io/v1", nil},
		{"1.32 beta, Calico CRDs", "32", map[string][]string{
			"networking.k8s.io/v1": {"ingresses"}, "networking.k8s.io/v1beta1": {"servicecidrs"},
			"crd.projectcalico.org/v1": {"ippools", "ipamblocks"},
		}, "networking.k8s.io/v1beta1", []string{CalicoCRDV1Group}},
		{"1.27 alpha, Calico API server and CRDs", "27", map[string][]string{
			"networking.k8s.io/v1alpha1": {"servicecidrs"}, "projectcalico.org/v3": {"ippools"},
			"crd.projectcalico.org/v1": {"ippools"},
		}, "networking.k8s.io/v1alpha1", []string{CalicoV3Group, CalicoCRDV1Group}},
		{"1.30 without ServiceCIDR, Calico group without pools", "30", map[string][]string{
			"networking.k8s.io/v1": {"ingresses"}, "projectcalico.org/v3": {"tiers"},
		}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caps, err := Probe(fakeDiscovery(tt.minor, tt.resources))
			if err != nil {
				t.Fatal(err)
			}
			if caps.ServiceCIDRVersion != tt.serviceCIDR {
				t.Errorf("ServiceCIDRVersion = %q, want %q", caps.ServiceCIDRVersion, tt.serviceCIDR)
			}
			if strings.Join(caps.CalicoServed, ",") != strings.Join(tt.calico, ",") {
				t.Errorf("CalicoServed = %v, want %v", caps.CalicoServed, tt.calico)
			}
			if caps.ServerMinor == 0 || caps.ServerVersion != "v1."+tt.minor+".2" {
				t.Errorf("server version %q minor %d", caps.ServerVersion, caps.ServerMinor)
			}
		})
	}
}

func TestCapabilities_CalicoAPIGroup(t *testing.T) {
	both := Capabilities{CalicoServed: []string{CalicoV3Group, CalicoCRDV1Group}}
	crdOnly := Capabilities{CalicoServed: []string{CalicoCRDV1Group}}
	tests := []struct {
		name    string
		caps    Capabilities
		pref    string
		want    string
		wantErr string
	}{
		{"auto prefers v3", both, CalicoAuto, CalicoV3Group, ""},
		{"empty means auto", crdOnly, "", CalicoCRDV1Group, ""},
		{"explicit v1 with both", both, CalicoCRDV1Group, CalicoCRDV1Group, ""},
		{"auto without Calico", Capabilities{}, CalicoAuto, "", ""},
		{"explicit v3 not served", crdOnly, CalicoV3Group, "", "does not serve ippools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.caps.CalicoAPIGroup(tt.pref)
			if got != tt.want || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %q, %v; want %q, error containing %q", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestServiceCIDRResource_noneServedSaysWhatIsNeeded(t *testing.T) {
	_, err := Capabilities{ServerVersion: "v1.29.3"}.ServiceCIDRResource()
	if err == nil || !strings.Contains(err.Error(), "v1.29.3") || !strings.Contains(err.Error(), "MultiCIDRServiceAllocator") {
		t.Errorf("got %v, want an error naming the server version and the feature gate", err)
	}
	gvr, err := Capabilities{ServiceCIDRVersion: "networking.k8s.io/v1beta1"}.ServiceCIDRResource()
	if err != nil || gvr.Group != "networking.k8s.io" || gvr.Version != "v1beta1" || gvr.Resource != "servicecidrs" {
		t.Errorf("got %v, %v", gvr, err)
	}
}
