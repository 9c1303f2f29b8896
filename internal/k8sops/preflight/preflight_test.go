// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package preflight

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

// The write-ups' migration: Services 100.64.0.0/13 → 172.24.0.0/15, pods 100.96.0.0/11 →
// 172.16.0.0/13, Tailscale's 100.64.0.0/10 reserved.
var preflightRanges = PreflightRanges{
	OldService: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/13")},
	NewService: []netip.Prefix{netip.MustParsePrefix("172.24.0.0/15")},
	OldPod:     []netip.Prefix{netip.MustParsePrefix("100.96.0.0/11")},
	NewPod:     []netip.Prefix{netip.MustParsePrefix("172.16.0.0/13")},
	Reserved:   []NamedRange{{RangeReserved, "tailscale", netip.MustParsePrefix("100.64.0.0/10")}},
}

func pfService(ns, name, ip string) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Selector: map[string]string{"app": name}}}
}

func managed(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

const clusterIPFields = `{"f:spec":{"f:clusterIP":{},"f:ports":{}}}`

func oldPool() calico.IPPool {
	return calico.IPPool{Name: "default-ipv4-ippool", Spec: ipPoolSpec("100.96.0.0/11"),
		Settings: calico.PoolSettings{CIDR: "100.96.0.0/11", IPIPMode: "Always", VXLANMode: "Never", NATOutgoing: true}}
}

func withPod(name, ip string, ann map[string]string, controller string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Annotations: ann, Labels: map[string]string{"app": name}},
		Status: corev1.PodStatus{PodIP: ip}}
	if controller != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: controller, Name: "x", Controller: ptr.To(true)}}
	}
	return p
}

func webhookConfig(failure admissionv1.FailurePolicyType, svc *admissionv1.ServiceReference, resources ...string) admissionv1.ValidatingWebhookConfiguration {
	return admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "guard"},
		Webhooks: []admissionv1.ValidatingWebhook{{Name: "guard.example.com", FailurePolicy: &failure,
			ClientConfig: admissionv1.WebhookClientConfig{Service: svc},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources}}}}}}
}

func calicoPolicy(kind, ns, name, net string) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"kind": kind, "metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"egress": []any{map[string]any{"action": "Allow", "destination": map[string]any{"nets": []any{net}}}}}}}
	return u
}

func kubeSystemConfigMap(name, key, value string) map[string]*corev1.ConfigMap {
	return map[string]*corev1.ConfigMap{name: {ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Data: map[string]string{key: value}}}
}

func staticPod(component, name string, args ...string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"component": component}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: component, Command: append([]string{component}, args...)}}}}
}

// TestCheckPreflight: per check, a snapshot holding the hazard gives the finding (severity,
// check, object), and the same snapshot with the hazard fixed gives no finding of that check.
func TestCheckPreflight(t *testing.T) {
	pinnedSvc := pfService("app", "api", "100.64.1.1")
	pinnedSvc.ManagedFields = []metav1.ManagedFieldsEntry{managed("helm", metav1.ManagedFieldsOperationUpdate, clusterIPFields)}
	onceSvc := pfService("app", "api", "100.64.1.1")
	onceSvc.ManagedFields = []metav1.ManagedFieldsEntry{managed("kubectl-create", metav1.ManagedFieldsOperationUpdate, clusterIPFields)}
	lastApplied := pfService("app", "web", "100.64.1.2")
	lastApplied.Annotations = map[string]string{lastAppliedAnnotation: `{"apiVersion":"v1","kind":"Service","spec":{"clusterIP":"100.64.1.2"}}`}
	ownSvc := pfService("app", "api", "172.24.0.5")
	ownSvc.ManagedFields = []metav1.ManagedFieldsEntry{managed("helm", metav1.ManagedFieldsOperationUpdate, clusterIPFields)}
	kopsDNS := pfService("kube-system", "kube-dns", "100.64.0.10")
	kopsDNS.Labels = map[string]string{kopsAddonLabel: "coredns.addons.k8s.io"}
	addonDNS := pfService("kube-system", "kube-dns", "100.64.0.10")
	addonDNS.Labels = map[string]string{addonModeLabel: addonReconciled}
	nodeLocal := appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-local-dns"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node-cache",
			Args: []string{"-localip", "169.254.20.10,100.64.0.10", "-upstreamsvc", "kube-dns-upstream"}}}}}}}
	ds := func(ns, name string) appsv1.DaemonSet {
		return appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	annotated := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "pinned"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{annIPv4Pools: `["default-ipv4-ippool"]`}}}}}
	newPoolIPIP := calico.IPPool{Name: "new", Spec: ipPoolSpec("172.16.0.0/13"),
		Settings: calico.PoolSettings{CIDR: "172.16.0.0/13", IPIPMode: "Never", VXLANMode: "Always", NATOutgoing: true}}
	newPoolSame := newPoolIPIP
	newPoolSame.Settings.IPIPMode, newPoolSame.Settings.VXLANMode = "Always", "Never"
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{PodCIDR: "100.96.1.0/24", PodCIDRs: []string{"100.96.1.0/24"}}}
	netpol := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "from-pods"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "100.96.0.0/11"}}}}}}}
	netpolBoth := *netpol.DeepCopy()
	netpolBoth.Spec.Ingress[0].From = append(netpolBoth.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "172.16.0.0/13"}})
	bgp := unstructured.Unstructured{Object: map[string]any{"kind": "BGPConfiguration", "metadata": map[string]any{"name": "default"},
		"spec": map[string]any{"serviceClusterIPs": []any{map[string]any{"cidr": "100.64.0.0/13"}}}}}
	vap := admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "svc-rules"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
			{RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.OperationAll},
				Rule: admissionv1.Rule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"servicecidrs"}}}}}}}}
	ownVAP := *vap.DeepCopy()
	ownVAP.Labels = map[string]string{"app.kubernetes.io/managed-by": "k8scidr"}
	pdb := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "solo"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}}}
	pdbRoom := *pdb.DeepCopy()
	pdbRoom.Status.DisruptionsAllowed = 1
	kubeDNS := map[string]string{"k8s-app": "kube-dns"}
	budget := func(ns, name string, sel map[string]string) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}}
	}
	dnsPDB, otherPDB, guardPDB := budget("kube-system", "kube-dns", kubeDNS), budget("kube-system", "other", map[string]string{"app": "other"}),
		budget("hooks", "guard", map[string]string{"app": "guard"})
	progressing := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "stuck"}, Status: appsv1.DeploymentStatus{
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded", Message: "timed out"}}}}
	svcRef := &admissionv1.ServiceReference{Namespace: "hooks", Name: "guard"}
	backendSvc := pfService("hooks", "guard", "172.24.3.3")
	backendSvc.Spec.Selector = map[string]string{"app": "guard"}

	cases := []struct {
		name                   string
		hazard, fixed          PreflightSnapshot
		check, severity, objID string
	}{
		{"helm owns clusterIP", PreflightSnapshot{Services: []corev1.Service{pinnedSvc}}, PreflightSnapshot{Services: []corev1.Service{onceSvc}},
			CheckClusterIPPinned, SeverityBlocker, "Service/app/api"},
		{"last-applied sets clusterIP", PreflightSnapshot{Services: []corev1.Service{lastApplied}}, PreflightSnapshot{Services: []corev1.Service{pfService("app", "web", "100.64.1.2")}},
			CheckClusterIPPinned, SeverityBlocker, "Service/app/web"},
		{"own writes and moved Services pin nothing", PreflightSnapshot{Services: []corev1.Service{pinnedSvc}},
			PreflightSnapshot{FieldManager: "helm", Services: []corev1.Service{pinnedSvc, ownSvc}}, CheckClusterIPPinned, SeverityBlocker, "Service/app/api"},
		{"kOps DNS addon", PreflightSnapshot{Services: []corev1.Service{kopsDNS}}, PreflightSnapshot{Services: []corev1.Service{pfService("kube-system", "kube-dns", "100.64.0.10")}},
			CheckDNSPinned, SeverityWarning, "Service/kube-system/kube-dns"},
		{"addon-manager DNS", PreflightSnapshot{Services: []corev1.Service{addonDNS}}, PreflightSnapshot{Services: []corev1.Service{pfService("kube-system", "kube-dns", "100.64.0.10")}},
			CheckDNSPinned, SeverityBlocker, "Service/kube-system/kube-dns"},
		{"kubelet clusterDNS", PreflightSnapshot{ConfigMaps: kubeSystemConfigMap(recreation.KubeletConfigMap, "kubelet", "clusterDNS:\n- 100.64.0.10\n")},
			PreflightSnapshot{ConfigMaps: kubeSystemConfigMap(recreation.KubeletConfigMap, "kubelet", "clusterDNS:\n- 172.24.0.10\n")},
			CheckDNSPinned, SeverityWarning, "ConfigMap/kube-system/kubelet-config"},
		{"NodeLocal DNSCache", PreflightSnapshot{DaemonSets: []appsv1.DaemonSet{nodeLocal}}, PreflightSnapshot{},
			CheckDNSPinned, SeverityWarning, "DaemonSet/kube-system/node-local-dns"},
		{"template pinned to the old pool", PreflightSnapshot{Pools: []calico.IPPool{oldPool()}, Deployments: []appsv1.Deployment{annotated}},
			PreflightSnapshot{Pools: []calico.IPPool{oldPool()}, Deployments: []appsv1.Deployment{{ObjectMeta: annotated.ObjectMeta}}},
			CheckPodsPinnedToOldPool, SeverityBlocker, "Deployment/app/pinned"},
		{"namespace pinned by CIDR", PreflightSnapshot{Namespaces: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "app",
			Annotations: map[string]string{annIPv4Pools: `["100.96.0.0/11"]`}}}}},
			PreflightSnapshot{Namespaces: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "app",
				Annotations: map[string]string{annIPv4Pools: `["172.16.0.0/13"]`}}}}},
			CheckPodsPinnedToOldPool, SeverityBlocker, "Namespace//app"},
		{"bare pod with a fixed address", PreflightSnapshot{Pods: []corev1.Pod{withPod("fixed", "100.96.0.9", map[string]string{annIPAddrs: `["100.96.0.9"]`}, "")}},
			PreflightSnapshot{Pods: []corev1.Pod{withPod("fixed", "100.96.0.9", map[string]string{annIPAddrs: `["100.96.0.9"]`}, "ReplicaSet")}},
			CheckPodsPinnedToOldPool, SeverityBlocker, "Pod/app/fixed"},
		{"CNI config pool list", PreflightSnapshot{Pools: []calico.IPPool{oldPool()}, ConfigMaps: kubeSystemConfigMap("calico-config", "cni_network_config",
			`{"ipam": {"type": "calico-ipam", "ipv4_pools": ["default-ipv4-ippool"]}, "mtu": __CNI_MTU__}`)},
			PreflightSnapshot{Pools: []calico.IPPool{oldPool()}, ConfigMaps: kubeSystemConfigMap("calico-config", "cni_network_config", `{"ipam": {"type": "calico-ipam"}}`)},
			CheckPodsPinnedToOldPool, SeverityBlocker, "ConfigMap/kube-system/calico-config"},
		{"host-local IPAM", PreflightSnapshot{ConfigMaps: kubeSystemConfigMap("calico-config", "cni_network_config",
			`{"plugins": [{"type": "calico", "mtu": __CNI_MTU__, "ipam": {"type": "host-local", "subnet": "usePodCidr"}}]}`)},
			PreflightSnapshot{ConfigMaps: kubeSystemConfigMap("calico-config", "cni_network_config", `{"plugins": [{"type": "calico", "ipam": {"type": "calico-ipam"}}]}`)},
			CheckCNIIPAM, SeverityBlocker, "ConfigMap/kube-system/calico-config"},
		{"calico-ipam on usePodCidr", PreflightSnapshot{ConfigMaps: kubeSystemConfigMap("calico-config", "cni_network_config",
			`{"ipam": {"type": "calico-ipam", "subnet": "usePodCidr"}}`)},
			PreflightSnapshot{ConfigMaps: kubeSystemConfigMap("calico-config", "cni_network_config", `{"ipam": {"type": "calico-ipam", "assign_ipv4": "true"}}`)},
			CheckCNIIPAM, SeverityBlocker, "ConfigMap/kube-system/calico-config"},
		{"operator on HostLocal IPAM", PreflightSnapshot{Installations: []unstructured.Unstructured{installation("Calico", "HostLocal")}},
			PreflightSnapshot{Installations: []unstructured.Unstructured{installation("Calico", "Calico")}},
			CheckCNIIPAM, SeverityBlocker, "Installation//default"},
		{"operator on another CNI", PreflightSnapshot{Installations: []unstructured.Unstructured{installation("AmazonVPC", "")}},
			PreflightSnapshot{Installations: []unstructured.Unstructured{installation("", "")}},
			CheckCNIIPAM, SeverityBlocker, "Installation//default"},
		{"Cilium instead of Calico", PreflightSnapshot{DaemonSets: []appsv1.DaemonSet{ds("kube-system", "cilium"), ds("kube-system", "kube-proxy")}},
			PreflightSnapshot{DaemonSets: []appsv1.DaemonSet{ds("kube-system", "calico-node"), ds("kube-system", "kube-proxy")}},
			CheckCNIIPAM, SeverityBlocker, "DaemonSet/kube-system/cilium"},
		{"the AWS VPC CNI with Calico's CRDs left over", PreflightSnapshot{CalicoServed: true, DaemonSets: []appsv1.DaemonSet{ds("kube-system", "aws-node")}},
			PreflightSnapshot{CalicoServed: true, DaemonSets: []appsv1.DaemonSet{ds("calico-system", "calico-node")}},
			CheckCNIIPAM, SeverityBlocker, "DaemonSet/kube-system/aws-node"},
		{"no CNI known (kubenet)", PreflightSnapshot{DaemonSets: []appsv1.DaemonSet{ds("kube-system", "ebs-csi-node")}},
			PreflightSnapshot{CalicoServed: true, DaemonSets: []appsv1.DaemonSet{ds("kube-system", "ebs-csi-node")}},
			CheckCNIIPAM, SeverityWarning, "CNI//unknown"},
		{"kcm without the ServiceCIDR gate on 1.32", PreflightSnapshot{ServerMinor: 32,
			Pods: []corev1.Pod{staticPod("kube-controller-manager", "kcm-a", "--feature-gates=SomethingElse=true")}},
			PreflightSnapshot{ServerMinor: 32, Pods: []corev1.Pod{staticPod("kube-controller-manager", "kcm-a",
				"--feature-gates=SomethingElse=true,MultiCIDRServiceAllocator=true")}},
			CheckServiceCIDRGate, SeverityBlocker, "Pod/kube-system/kcm-a"},
		{"kcm without the gate on 1.33 is fine, its flags unseen on 1.31 are a warning", PreflightSnapshot{ServerMinor: 31},
			PreflightSnapshot{ServerMinor: 33, Pods: []corev1.Pod{staticPod("kube-controller-manager", "kcm-a")}},
			CheckServiceCIDRGate, SeverityWarning, "kube-controller-manager//"},
		{"kubeadm-config on the old Service range", PreflightSnapshot{KubeadmConfig: kubeadmConfig("10.96.0.0/12", "172.16.0.0/12")},
			PreflightSnapshot{KubeadmConfig: kubeadmConfig("172.24.0.0/15", "172.16.0.0/12")},
			CheckKubeadmConfig, SeverityWarning, "ConfigMap/kube-system/kubeadm-config"},
		{"kubeadm-config on the old pod range", PreflightSnapshot{KubeadmConfig: kubeadmConfig("172.24.0.0/15", "100.96.0.0/11")},
			PreflightSnapshot{KubeadmConfig: kubeadmConfig("172.24.0.0/15", "172.16.0.0/13")},
			CheckKubeadmConfig, SeverityWarning, "ConfigMap/kube-system/kubeadm-config"},
		{"more nodes than node CIDRs in the new range", PreflightSnapshot{Nodes: make([]corev1.Node, 3), Pods: []corev1.Pod{staticPod("kube-controller-manager", "kcm-a",
			"--cluster-cidr=172.16.0.0/12", "--allocate-node-cidrs=true", "--node-cidr-mask-size=14")}},
			PreflightSnapshot{Nodes: make([]corev1.Node, 3), Pods: []corev1.Pod{staticPod("kube-controller-manager", "kcm-a",
				"--cluster-cidr=172.16.0.0/12", "--allocate-node-cidrs=true", "--node-cidr-mask-size=16")}},
			CheckPoolPlacement, SeverityWarning, "Pod/kube-system/kcm-a"},
		{"CoreDNS on one replica", PreflightSnapshot{Deployments: []appsv1.Deployment{deployment("kube-system", "coredns", 1, kubeDNS)}},
			PreflightSnapshot{Deployments: []appsv1.Deployment{deployment("kube-system", "coredns", 2, kubeDNS)}, PodDisruptionBudgets: []policyv1.PodDisruptionBudget{dnsPDB}},
			CheckRollAvailability, SeverityWarning, "Deployment/kube-system/coredns"},
		{"CoreDNS without a PodDisruptionBudget", PreflightSnapshot{Deployments: []appsv1.Deployment{deployment("kube-system", "coredns", 2, kubeDNS)},
			PodDisruptionBudgets: []policyv1.PodDisruptionBudget{otherPDB}},
			PreflightSnapshot{Deployments: []appsv1.Deployment{deployment("kube-system", "coredns", 2, kubeDNS)}, PodDisruptionBudgets: []policyv1.PodDisruptionBudget{dnsPDB}},
			CheckRollAvailability, SeverityWarning, "Deployment/kube-system/coredns"},
		{"a fail-closed webhook's single backend", PreflightSnapshot{Services: []corev1.Service{backendSvc},
			ValidatingWebhooks: []admissionv1.ValidatingWebhookConfiguration{webhookConfig(admissionv1.Fail, svcRef, "pods")},
			Deployments:        []appsv1.Deployment{deployment("hooks", "guard", 1, map[string]string{"app": "guard"})}},
			PreflightSnapshot{Services: []corev1.Service{backendSvc},
				ValidatingWebhooks:   []admissionv1.ValidatingWebhookConfiguration{webhookConfig(admissionv1.Fail, svcRef, "pods")},
				Deployments:          []appsv1.Deployment{deployment("hooks", "guard", 3, map[string]string{"app": "guard"})},
				PodDisruptionBudgets: []policyv1.PodDisruptionBudget{guardPDB}},
			CheckRollAvailability, SeverityWarning, "Deployment/hooks/guard"},
		{"a fail-closed webhook's backends without a PodDisruptionBudget", PreflightSnapshot{Services: []corev1.Service{backendSvc},
			ValidatingWebhooks: []admissionv1.ValidatingWebhookConfiguration{webhookConfig(admissionv1.Fail, svcRef, "pods")},
			Deployments:        []appsv1.Deployment{deployment("hooks", "guard", 3, map[string]string{"app": "guard"})}},
			PreflightSnapshot{Services: []corev1.Service{backendSvc},
				ValidatingWebhooks: []admissionv1.ValidatingWebhookConfiguration{webhookConfig(admissionv1.Ignore, svcRef, "pods")},
				Deployments:        []appsv1.Deployment{deployment("hooks", "guard", 3, map[string]string{"app": "guard"})}},
			CheckRollAvailability, SeverityWarning, "Deployment/hooks/guard"},
		{"a move's range inside the recreated default range", PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{
			{Name: "kubernetes", CIDRs: []string{"172.24.0.0/15"}, Ready: true}, {Name: "services-172-24", CIDRs: []string{"172.24.0.0/15"}, Ready: true}}},
			PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{
				{Name: "kubernetes", CIDRs: []string{"100.64.0.0/13"}, Ready: true}, {Name: "services-172-24", CIDRs: []string{"172.24.0.0/15"}, Ready: true}}},
			CheckServiceCIDRLeftover, SeverityInfo, "ServiceCIDR//services-172-24"},
		{"a keep-range inside the old default range is still needed", PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{
			{Name: "kubernetes", CIDRs: []string{"172.24.0.0/15"}, Ready: true}, {Name: "keep-172-24-0-8-30", CIDRs: []string{"172.24.0.8/30"}, Ready: true}}},
			PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{
				{Name: "kubernetes", CIDRs: []string{"100.64.0.0/13"}, Ready: true}, {Name: "keep-100-64-0-8-30", CIDRs: []string{"100.64.0.8/30"}, Ready: true}}},
			CheckServiceCIDRLeftover, SeverityInfo, "ServiceCIDR//keep-172-24-0-8-30"},
		{"a keep-range in the old range whose bridges are gone", PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{
			{Name: "kubernetes", CIDRs: []string{"172.24.0.0/15"}, Ready: true}, {Name: "keep-100-64-0-8-30", CIDRs: []string{"100.64.0.8/30"}, Ready: true}},
			Services: []corev1.Service{pfService("kube-system", "kube-dns", "172.24.0.10")}},
			PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{
				{Name: "kubernetes", CIDRs: []string{"172.24.0.0/15"}, Ready: true}, {Name: "keep-100-64-0-8-30", CIDRs: []string{"100.64.0.8/30"}, Ready: true}},
				Services: []corev1.Service{pfService("kube-system", "kube-dns", "172.24.0.10"), pfService("kube-system", "kube-dns-old-100-64-0-10", "100.64.0.10")}},
			CheckServiceCIDRLeftover, SeverityInfo, "ServiceCIDR//keep-100-64-0-8-30"},
		{"kcm cluster-cidr", PreflightSnapshot{Pods: []corev1.Pod{staticPod("kube-controller-manager", "kcm-a", "--cluster-cidr=100.96.0.0/11", "--allocate-node-cidrs=false")}},
			PreflightSnapshot{Pods: []corev1.Pod{staticPod("kube-controller-manager", "kcm-a", "--cluster-cidr=172.16.0.0/12", "--allocate-node-cidrs=false")}},
			CheckPoolPlacement, SeverityWarning, "Pod/kube-system/kcm-a"},
		{"encapsulation differs", PreflightSnapshot{Pools: []calico.IPPool{oldPool(), newPoolIPIP}}, PreflightSnapshot{Pools: []calico.IPPool{oldPool(), newPoolSame}},
			CheckPoolPlacement, SeverityWarning, "IPPool//new"},
		{"node podCIDR outside", PreflightSnapshot{Nodes: []corev1.Node{node}},
			PreflightSnapshot{Nodes: []corev1.Node{node}, Pods: []corev1.Pod{staticPod("kube-controller-manager", "kcm-a", "--cluster-cidr", "172.16.0.0/12", "--allocate-node-cidrs=false")}},
			CheckPoolPlacement, SeverityWarning, "Node//node-a"},
		{"kube-proxy clusterCIDR", PreflightSnapshot{ConfigMaps: kubeSystemConfigMap("kube-proxy", "config.conf", "clusterCIDR: 100.96.0.0/11\n")},
			PreflightSnapshot{ConfigMaps: kubeSystemConfigMap("kube-proxy", "config.conf", "clusterCIDR: 100.64.0.0/10,172.16.0.0/12\n")},
			CheckKubeProxyCIDR, SeverityWarning, "ConfigMap/kube-system/kube-proxy"},
		{"kube-proxy flag", PreflightSnapshot{Pods: []corev1.Pod{staticPod("kube-proxy", "kube-proxy-a", "--cluster-cidr=100.96.0.0/11")}},
			PreflightSnapshot{Pods: []corev1.Pod{staticPod("kube-proxy", "kube-proxy-a", "--cluster-cidr=172.16.0.0/12")}},
			CheckKubeProxyCIDR, SeverityWarning, "Pod/kube-system/kube-proxy-a"},
		{"NetworkPolicy ipBlock", PreflightSnapshot{NetworkPolicies: []networkingv1.NetworkPolicy{netpol}},
			PreflightSnapshot{NetworkPolicies: []networkingv1.NetworkPolicy{netpolBoth}}, CheckPolicyOldRange, SeverityWarning, "NetworkPolicy/app/from-pods"},
		{"Calico policy nets", PreflightSnapshot{CalicoPolicies: []unstructured.Unstructured{calicoPolicy("GlobalNetworkPolicy", "", "egress", "100.64.0.0/13")}},
			PreflightSnapshot{CalicoPolicies: []unstructured.Unstructured{calicoPolicy("GlobalNetworkPolicy", "", "egress", "10.0.0.0/8")}},
			CheckPolicyOldRange, SeverityWarning, "GlobalNetworkPolicy//egress"},
		{"BGP serviceClusterIPs", PreflightSnapshot{BGPConfigurations: []unstructured.Unstructured{bgp}}, PreflightSnapshot{},
			CheckPolicyOldRange, SeverityWarning, "BGPConfiguration//default"},
		{"fail-closed webhook on pods", PreflightSnapshot{ValidatingWebhooks: []admissionv1.ValidatingWebhookConfiguration{webhookConfig(admissionv1.Fail, nil, "pods")}},
			PreflightSnapshot{ValidatingWebhooks: []admissionv1.ValidatingWebhookConfiguration{webhookConfig(admissionv1.Ignore, nil, "pods")}},
			CheckWebhookFailClosed, SeverityWarning, "ValidatingWebhookConfiguration//guard"},
		{"webhook whose backend moves", PreflightSnapshot{Services: []corev1.Service{pfService("hooks", "guard", "100.64.3.3")},
			ValidatingWebhooks: []admissionv1.ValidatingWebhookConfiguration{webhookConfig(admissionv1.Fail, svcRef, "services")}},
			PreflightSnapshot{Services: []corev1.Service{pfService("hooks", "guard", "100.64.3.3")},
				ValidatingWebhooks: []admissionv1.ValidatingWebhookConfiguration{webhookConfig(admissionv1.Fail, svcRef, "configmaps")}},
			CheckWebhookFailClosed, SeverityBlocker, "ValidatingWebhookConfiguration//guard"},
		{"admission policy on ServiceCIDRs", PreflightSnapshot{AdmissionPolicies: []admissionv1.ValidatingAdmissionPolicy{vap}},
			PreflightSnapshot{AdmissionPolicies: []admissionv1.ValidatingAdmissionPolicy{ownVAP}}, CheckAdmissionPolicy, SeverityWarning, "ValidatingAdmissionPolicy//svc-rules"},
		{"budget over a bare pod", PreflightSnapshot{PodDisruptionBudgets: []policyv1.PodDisruptionBudget{pdb}, Pods: []corev1.Pod{withPod("solo", "100.96.0.7", nil, "")}},
			PreflightSnapshot{PodDisruptionBudgets: []policyv1.PodDisruptionBudget{pdbRoom}, Pods: []corev1.Pod{withPod("solo", "100.96.0.7", nil, "")}},
			CheckDisruptionBudget, SeverityBlocker, "PodDisruptionBudget/app/solo"},
		{"paused Deployment", PreflightSnapshot{Deployments: []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "held"}, Spec: appsv1.DeploymentSpec{Paused: true}}}},
			PreflightSnapshot{Deployments: []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "held"}}}},
			CheckRolloutStuck, SeverityWarning, "Deployment/app/held"},
		{"Deployment past its deadline", PreflightSnapshot{Deployments: []appsv1.Deployment{progressing}},
			PreflightSnapshot{Deployments: []appsv1.Deployment{{ObjectMeta: progressing.ObjectMeta}}}, CheckRolloutStuck, SeverityWarning, "Deployment/app/stuck"},
		{"new range on a node address", PreflightSnapshot{Nodes: []corev1.Node{nodeAt("node-a", "172.20.1.5")}},
			PreflightSnapshot{Nodes: []corev1.Node{nodeAt("node-a", "10.0.1.5")}},
			CheckRangeOverlap, SeverityBlocker, "Node//node-a"},
		{"the new pool already made is no collision", PreflightSnapshot{Pools: []calico.IPPool{{Name: "vpn", Spec: ipPoolSpec("172.16.0.0/12")}}},
			PreflightSnapshot{Pools: []calico.IPPool{{Name: "new", Spec: ipPoolSpec("172.16.0.0/13")}}},
			CheckRangeOverlap, SeverityBlocker, "IPPool//vpn"},
		{"a ServiceCIDR in the new pod range is one", PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{{Name: "stray", CIDRs: []string{"172.16.5.0/24"}}}},
			PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{{Name: "new", CIDRs: []string{"172.24.0.0/15"}}}},
			CheckRangeOverlap, SeverityBlocker, "ServiceCIDR//stray"},
	}
	id := func(f PreflightFinding) string { return f.Object.Kind + "/" + f.Object.Namespace + "/" + f.Object.Name }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := onlyChecks(CheckPreflight(c.hazard, preflightRanges), []string{c.check})
			if !slices.ContainsFunc(got, func(f PreflightFinding) bool { return f.Severity == c.severity && id(f) == c.objID }) {
				t.Fatalf("hazard: findings %v, want a %s %s on %s", got, c.severity, c.check, c.objID)
			}
			// The read keeps only podForPreflight's part of the plan's pod list (k8sops.PlanPod):
			// the findings must not change.
			read := c.hazard
			read.Pods = nil
			for i := range c.hazard.Pods {
				listed := k8sops.PlanPod(&c.hazard.Pods[i])
				read.Pods = append(read.Pods, podForPreflight(&listed))
			}
			if fromRead := onlyChecks(CheckPreflight(read, preflightRanges), []string{c.check}); !reflect.DeepEqual(fromRead, got) {
				t.Fatalf("pods as the read keeps them: findings %v, want %v", fromRead, got)
			}
			for _, f := range got {
				if f.Detail == "" || f.Fix == "" || !strings.HasSuffix(strings.TrimSpace(f.Detail), ".") {
					t.Errorf("finding %+v: detail and fix must be sentences", f)
				}
			}
			if clean := onlyChecks(CheckPreflight(c.fixed, preflightRanges), []string{c.check}); slices.ContainsFunc(clean,
				func(f PreflightFinding) bool { return id(f) == c.objID }) {
				t.Fatalf("fixed: findings %v, want none on %s", clean, c.objID)
			}
		})
	}
}

// TestCheckPreflight_overlapSeverities: a collision the migration moves off is info, one it
// leaves is a warning, and nothing at all when no range overlaps.
func TestCheckPreflight_overlapSeverities(t *testing.T) {
	s := PreflightSnapshot{ServiceCIDRs: []k8sops.ServiceCIDR{{Name: "kubernetes", CIDRs: []string{"100.64.0.0/13"}}},
		Nodes: []corev1.Node{nodeAt("node-a", "10.1.0.5")}}
	r := preflightRanges
	r.Reserved = append(slices.Clone(r.Reserved), NamedRange{RangeReserved, "vpn", netip.MustParsePrefix("10.0.0.0/8")})
	got := CheckPreflight(s, r)
	var sev []string
	for _, f := range got {
		sev = append(sev, fmt.Sprintf("%s %s/%s", f.Severity, f.Object.Kind, f.Object.Name))
	}
	want := []string{"warning Node/node-a", "info ServiceCIDR/kubernetes"}
	if !slices.Equal(sev, want) {
		t.Fatalf("findings %v, want %v", sev, want)
	}
	if CountSeverity(got, SeverityBlocker) != 0 || CountSeverity(got, SeverityInfo) != 1 {
		t.Fatalf("counts wrong: %v", got)
	}
	if got := CheckPreflight(PreflightSnapshot{}, preflightRanges); len(got) != 0 {
		t.Fatalf("empty cluster: %v", got)
	}
}

func ipPoolSpec(cidr string) apiv3.IPPoolSpec { return apiv3.IPPoolSpec{CIDR: cidr} }

// TestPreflightRangesValidate: a new range overlapping a range being left, the other kind's or
// a reserved one is a static mistake at its list index; apart ranges are none.
func TestPreflightRangesValidate(t *testing.T) {
	if got := preflightRanges.Validate(); len(got) != 0 {
		t.Fatalf("the write-up's ranges: %v", got)
	}
	r := preflightRanges
	r.NewService = []netip.Prefix{netip.MustParsePrefix("172.24.0.0/15"), netip.MustParsePrefix("100.64.128.0/17")}
	r.NewPod = []netip.Prefix{netip.MustParsePrefix("172.24.0.0/16")}
	got := r.Validate()
	var paths []string
	for _, f := range got {
		paths = append(paths, f.Path.String()+": "+f.Detail)
	}
	if len(got) != 3 || got[0].Path.String() != "new_service_cidrs[0]" || got[1].Path.String() != "new_service_cidrs[1]" ||
		got[2].Path.String() != "new_pod_cidrs[0]" || !strings.Contains(got[1].Detail, "the reserved range tailscale") ||
		!strings.Contains(got[1].Detail, "the old Service range 100.64.0.0/13") {
		t.Fatalf("findings:\n%s", strings.Join(paths, "\n"))
	}
}

// onlyChecks keeps the findings of the given checks.
func onlyChecks(f []PreflightFinding, checks []string) []PreflightFinding {
	return slices.DeleteFunc(slices.Clone(f), func(x PreflightFinding) bool { return !slices.Contains(checks, x.Check) })
}

// nodeAt is a node with one internal address.
func nodeAt(name, ip string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// installation is a Tigera operator Installation named default with spec.cni's type and IPAM.
func installation(cni, ipam string) unstructured.Unstructured {
	spec := map[string]any{}
	if cni != "" {
		spec["type"] = cni
	}
	if ipam != "" {
		spec["ipam"] = map[string]any{"type": ipam}
	}
	return unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.tigera.io/v1", "kind": "Installation",
		"metadata": map[string]any{"name": "default"}, "spec": map[string]any{"cni": spec}}}
}

// kubeadmConfig is kube-system/kubeadm-config with these networking subnets.
func kubeadmConfig(serviceSubnet, podSubnet string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: KubeadmConfigMap}, Data: map[string]string{
		"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n  dnsDomain: cluster.local\n" +
			"  serviceSubnet: " + serviceSubnet + "\n  podSubnet: " + podSubnet + "\n"}}
}

// deployment is a Deployment with replicas and pod template labels.
func deployment(ns, name string, replicas int32, labels map[string]string) appsv1.Deployment {
	return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}}}
}

// TestInOldService: the index answers as the prefixes do, for a recreation's host prefixes (its
// moved Services' old IPs), ranges, and both mixed, IPv4 and IPv6.
func TestInOldService(t *testing.T) {
	ranges := PreflightRanges{OldService: []netip.Prefix{netip.MustParsePrefix("100.64.0.10/32"), netip.MustParsePrefix("100.64.1.0/24"),
		netip.MustParsePrefix("fd00::a/128"), netip.MustParsePrefix("fd01::/64")}}
	indexed := ranges.indexed()
	if len(indexed.oldServiceHosts) != 2 || len(indexed.oldServiceNets) != 2 {
		t.Fatalf("index: %d hosts, %d nets, want 2 and 2", len(indexed.oldServiceHosts), len(indexed.oldServiceNets))
	}
	for ip, want := range map[string]bool{"100.64.0.10": true, "100.64.0.11": false, "100.64.1.200": true, "100.64.2.1": false,
		"fd00::a": true, "fd00::b": false, "fd01::1:2": true, "fd02::1": false} {
		a := netip.MustParseAddr(ip)
		if got := indexed.inOldService(a); got != want {
			t.Errorf("indexed: %s in old range = %v, want %v", ip, got, want)
		}
		if got := ranges.inOldService(a); got != want {
			t.Errorf("not indexed: %s in old range = %v, want %v", ip, got, want)
		}
	}
}
