// The kOps cluster-spec values that follow a range move (write-ups 000/001): what a user sets
// with `kops edit cluster` once the Services and pods have moved.
package k8sops

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"
)

// KopsNetworking is the cluster spec's networking for a Service range, a pod range and the
// nonMasqueradeCIDR that holds both.
type KopsNetworking struct {
	ServiceClusterIPRange string
	PodCIDR               string
	NonMasqueradeCIDR     string
	// KubeDNSServerIP is the Service range's tenth address: kOps' kubeDNS.serverIP default, and
	// what kubelet clusterDNS must point at.
	KubeDNSServerIP string
	// AllocateNodeCIDRs is false when Calico does IPAM: kube-controller-manager must then not
	// hand out node podCIDRs (with them outside its new cluster CIDR it crash-loops, write-up 003).
	AllocateNodeCIDRs bool
	// YAML is the fragment for `kops edit cluster` (kops.k8s.io/v1alpha2 field names).
	YAML string
}

// kOps/apiserver limits on the Service range: the apiserver refuses IPv4 ranges wider than /12,
// and the range must hold the .10 address.
const (
	maxServiceBitsV4 = 28
	minServiceBitsV4 = 12
	minServiceBitsV6 = 64
	maxServiceBitsV6 = 124
	maxPodBitsV4     = 24
	maxPodBitsV6     = 112
)

// NewKopsNetworking checks that the ranges fit together as kOps requires (one IP family, the
// Service and pod ranges inside nonMasqueradeCIDR and apart, each large enough) and returns the
// spec values. Errors are Findings naming the argument (0 service, 1 pod, 2 nonMasquerade).
func NewKopsNetworking(serviceCIDR, podCIDR, nonMasqueradeCIDR string, calicoIPAM bool) (KopsNetworking, error) {
	var prefixes [3]netip.Prefix
	for i, s := range []string{serviceCIDR, podCIDR, nonMasqueradeCIDR} {
		p, err := ParseCIDR(s)
		if err != nil {
			return KopsNetworking{}, argError(i, err)
		}
		prefixes[i] = p
	}
	svc, pod, nm := prefixes[0], prefixes[1], prefixes[2]
	v4 := svc.Addr().Is4()
	for i, p := range prefixes[1:] {
		if p.Addr().Is4() != v4 {
			return KopsNetworking{}, argError(i+1, fmt.Errorf("%s is of another IP family than the Service range %s", p, svc))
		}
	}
	minSvc, maxSvc, maxPod := minServiceBitsV4, maxServiceBitsV4, maxPodBitsV4
	if !v4 {
		minSvc, maxSvc, maxPod = minServiceBitsV6, maxServiceBitsV6, maxPodBitsV6
	}
	switch {
	case svc.Bits() < minSvc:
		return KopsNetworking{}, argError(0, fmt.Errorf("%s is too large: kube-apiserver takes Service ranges up to /%d", svc, minSvc))
	case svc.Bits() > maxSvc:
		return KopsNetworking{}, argError(0, fmt.Errorf("%s is too small: the Service range must hold kube-dns's .10 address (/%d at most)", svc, maxSvc))
	case pod.Bits() > maxPod:
		return KopsNetworking{}, argError(1, fmt.Errorf("%s is too small for a pod range (/%d at most)", pod, maxPod))
	case svc.Overlaps(pod):
		return KopsNetworking{}, argError(1, fmt.Errorf("the pod range %s overlaps the Service range %s", pod, svc))
	case !Within(nm, svc):
		return KopsNetworking{}, argError(2, fmt.Errorf("%s does not contain the Service range %s: kOps requires serviceClusterIPRange inside nonMasqueradeCIDR", nm, svc))
	case !Within(nm, pod):
		return KopsNetworking{}, argError(2, fmt.Errorf("%s does not contain the pod range %s: kOps requires podCIDR inside nonMasqueradeCIDR", nm, pod))
	}
	k := KopsNetworking{ServiceClusterIPRange: svc.String(), PodCIDR: pod.String(), NonMasqueradeCIDR: nm.String(),
		KubeDNSServerIP: intAddr(new(big.Int).Add(addrInt(svc.Addr()), big.NewInt(10)), v4).String(), AllocateNodeCIDRs: !calicoIPAM}
	k.YAML = strings.Join([]string{
		"spec:",
		"  serviceClusterIPRange: " + k.ServiceClusterIPRange,
		"  nonMasqueradeCIDR: " + k.NonMasqueradeCIDR,
		"  podCIDR: " + k.PodCIDR,
		"  kubeDNS:",
		"    serverIP: " + k.KubeDNSServerIP,
		"  kubelet:",
		"    clusterDNS: " + k.KubeDNSServerIP,
		"  kubeControllerManager:",
		fmt.Sprintf("    allocateNodeCIDRs: %t", k.AllocateNodeCIDRs),
		"",
	}, "\n")
	return k, nil
}
