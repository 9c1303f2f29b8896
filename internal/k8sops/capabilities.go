// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Discovery of what the cluster serves: server version, ServiceCIDR API version, Calico API group.
package k8sops

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Calico API groups, and the provider's "detect it" setting.
const (
	CalicoAuto       = "auto"
	CalicoV3Group    = "projectcalico.org/v3"
	CalicoCRDV1Group = "crd.projectcalico.org/v1"
)

// CalicoAPIGroups lists the values calico_api_group accepts.
var CalicoAPIGroups = []string{CalicoAuto, CalicoV3Group, CalicoCRDV1Group}

// serviceCIDRVersions are the ServiceCIDR API versions, most preferred first.
var serviceCIDRVersions = []string{"networking.k8s.io/v1", "networking.k8s.io/v1beta1", "networking.k8s.io/v1alpha1"}

// Capabilities is what the cluster serves that the provider cares about.
type Capabilities struct {
	ServerVersion string // e.g. v1.34.4
	ServerMinor   int    // e.g. 34
	// ServiceCIDRVersion is the group/version serving servicecidrs, or "" when none does.
	ServiceCIDRVersion string
	// CalicoServed lists the Calico group/versions that serve ippools, in CalicoAPIGroups order.
	CalicoServed []string
	// CalicoIPAMServed lists the Calico group/versions that serve ipamblocks. The Calico API
	// server serves IPPools in projectcalico.org/v3 while IPAM blocks stay in the v1 CRDs.
	CalicoIPAMServed []string
	// AdmissionPolicyV1 is whether admissionregistration.k8s.io/v1 serves
	// ValidatingAdmissionPolicies (GA in Kubernetes 1.30).
	AdmissionPolicyV1 bool
	// AdmissionPolicyV1beta1 is whether admissionregistration.k8s.io/v1beta1 serves them (1.28
	// and 1.29 with the ValidatingAdmissionPolicy gate and its runtime-config).
	AdmissionPolicyV1beta1 bool
}

// Probe asks the discovery API what the cluster serves.
func Probe(disc discovery.DiscoveryInterface) (Capabilities, error) {
	var caps Capabilities
	info, err := disc.ServerVersion()
	if err != nil {
		return caps, fmt.Errorf("reading the server version: %w", err)
	}
	caps.ServerVersion = info.GitVersion
	if _, err := fmt.Sscanf(info.Minor, "%d", &caps.ServerMinor); err != nil {
		return caps, fmt.Errorf("parsing the server's minor version %q: %w", info.Minor, err)
	}
	groups, err := disc.ServerGroups()
	if err != nil {
		return caps, fmt.Errorf("listing the server's API groups: %w", err)
	}
	served := servedGroupVersions(groups)
	for _, gv := range serviceCIDRVersions {
		ok, err := servesResource(disc, served, gv, "servicecidrs")
		if err != nil {
			return caps, err
		}
		if ok {
			caps.ServiceCIDRVersion = gv
			break
		}
	}
	if caps.AdmissionPolicyV1, err = servesResource(disc, served, "admissionregistration.k8s.io/v1", "validatingadmissionpolicies"); err != nil {
		return caps, err
	}
	if caps.AdmissionPolicyV1beta1, err = servesResource(disc, served, "admissionregistration.k8s.io/v1beta1", "validatingadmissionpolicies"); err != nil {
		return caps, err
	}
	for _, gv := range []string{CalicoV3Group, CalicoCRDV1Group} {
		ok, err := servesResource(disc, served, gv, "ippools")
		if err != nil {
			return caps, err
		}
		if ok {
			caps.CalicoServed = append(caps.CalicoServed, gv)
		}
		ok, err = servesResource(disc, served, gv, "ipamblocks")
		if err != nil {
			return caps, err
		}
		if ok {
			caps.CalicoIPAMServed = append(caps.CalicoIPAMServed, gv)
		}
	}
	return caps, nil
}

// CalicoAPIGroup applies the calico_api_group preference to what is served. With "auto" it
// follows Calico's own rule: projectcalico.org/v3 when served (the Calico API server, or native
// v3 CRDs from Calico 3.32), else the crd.projectcalico.org/v1 CRDs; "" when neither is served.
func (c Capabilities) CalicoAPIGroup(preference string) (string, error) {
	if preference == "" || preference == CalicoAuto {
		if len(c.CalicoServed) == 0 {
			return "", nil
		}
		return c.CalicoServed[0], nil
	}
	if slices.Contains(c.CalicoServed, preference) {
		return preference, nil
	}
	return "", CalicoGroupError{Group: preference, Served: c.CalicoServed}
}

// CalicoGroupError: the configured calico_api_group serves no ippools here.
type CalicoGroupError struct {
	Group  string
	Served []string
}

func (e CalicoGroupError) Error() string {
	return fmt.Sprintf("calico_api_group is %q but the cluster does not serve ippools in it (served: %s); "+
		"install Calico's CRDs or API server, or set calico_api_group = \"auto\"", e.Group, listOrNone(e.Served))
}

func servedGroupVersions(groups *metav1.APIGroupList) map[string]bool {
	served := map[string]bool{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			served[v.GroupVersion] = true
		}
	}
	return served
}

func servesResource(disc discovery.DiscoveryInterface, served map[string]bool, gv, resource string) (bool, error) {
	if !served[gv] {
		return false, nil
	}
	list, err := disc.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering the resources of %s: %w", gv, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}

// ServiceCIDRVersions is the one table of where the ServiceCIDR API is served, which every
// message that finds it missing gives (KEP-1880; the MultiCIDRServiceAllocator gate).
const ServiceCIDRVersions = "networking.k8s.io/v1 is served from Kubernetes 1.33 (GA, on by default); v1beta1 on 1.31 and " +
	"1.32, off by default (the MultiCIDRServiceAllocator feature gate on kube-apiserver and kube-controller-manager, and " +
	"--runtime-config=networking.k8s.io/v1beta1=true); v1alpha1 on 1.29 and 1.30 the same way (the gate and " +
	"--runtime-config=networking.k8s.io/v1alpha1=true)"

// ServiceCIDRResource is the GroupVersionResource of ServiceCIDRs in the served version.
func (c Capabilities) ServiceCIDRResource() (schema.GroupVersionResource, error) {
	if c.ServiceCIDRVersion == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("the cluster (%s) serves no ServiceCIDR API: %s", c.ServerVersion, ServiceCIDRVersions)
	}
	gv, err := schema.ParseGroupVersion(c.ServiceCIDRVersion)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return gv.WithResource("servicecidrs"), nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return fmt.Sprint(s)
}

func MustGV(s string) schema.GroupVersion {
	gv, err := schema.ParseGroupVersion(s)
	if err != nil {
		panic(err)
	}
	return gv
}
