// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// preflightHCL is the data source for the calicoEnv cluster's migration: Services out of the
// default 100.64.0.0/13 to 172.24.0.0/15, pods out of the installer's pool to newPod.
func preflightHCL(e *calicoEnv, newPod string) string {
	return e.provider() + fmt.Sprintf(`
data "k8scidr_preflight" "this" {
  old_service_cidrs = ["100.64.0.0/13"]
  new_service_cidrs = ["172.24.0.0/15"]
  old_pod_cidrs     = [%q]
  new_pod_cidrs     = [%q]
}
`, oldPoolCIDR, newPod)
}

// want is one expected finding: severity, check and object as kind/namespace/name.
type want struct{ severity, check, object string }

// wantShownBy is the resource that warns of each check at its own stage (TestAccPreflight_stageWarnings
// sees them do it); a check not named is shown by none.
var wantShownBy = map[string]string{
	"cluster_ip_pinned": "k8scidr_service_moves", "dns_pinned": "k8scidr_service_recreation",
	"webhook_fail_closed": "k8scidr_service_recreation", "admission_policy": "k8scidr_service_recreation",
	"pool_placement": "k8scidr_calico_ippool", "kube_proxy_cluster_cidr": "k8scidr_calico_ippool",
	"pods_pinned_to_old_pool": "k8scidr_calico_ippool", "cni_ipam": "k8scidr_calico_ippool",
	"disruption_budget": "k8scidr_workload_roll", "rollout_stuck": "k8scidr_workload_roll",
}

// findingsInclude checks that findings holds each wanted finding, and that blockers counts
// exactly the wanted blockers (no blocker besides them).
type findingsInclude struct {
	addr string
	want []want
	logf func(string, ...any)
}

func (c findingsInclude) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	var got []want
	var blockers int64
	for _, r := range req.State.Values.RootModule.Resources {
		if r.Address != c.addr {
			continue
		}
		for _, f := range r.AttributeValues["findings"].([]any) {
			m := f.(map[string]any)
			o := m["object"].(map[string]any)
			got = append(got, want{m["severity"].(string), m["check"].(string), fmt.Sprintf("%s/%s/%s", o["kind"], o["namespace"], o["name"])})
			if by, _ := m["shown_by"].(string); by != wantShownBy[m["check"].(string)] {
				resp.Error = errors.Join(resp.Error, fmt.Errorf("%s: shown_by %q, want %q", m["summary"], by, wantShownBy[m["check"].(string)]))
			}
		}
		switch n := r.AttributeValues["blockers"].(type) {
		case json.Number:
			blockers, _ = n.Int64()
		case float64:
			blockers = int64(n)
		}
	}
	var missing []string
	nBlockers := 0
	for _, w := range c.want {
		if !slices.Contains(got, w) {
			missing = append(missing, fmt.Sprint(w))
		}
		if w.severity == preflight.SeverityBlocker {
			nBlockers++
		}
	}
	for _, g := range got {
		c.logf("finding: %s %s %s", g.severity, g.check, g.object)
	}
	if len(missing) > 0 || blockers != int64(nBlockers) {
		resp.Error = errors.Join(resp.Error, fmt.Errorf("missing findings:\n%s\nblockers %v, want %d; all findings:\n%v", strings.Join(missing, "\n"), blockers, nBlockers, got))
	}
}

// TestAccPreflightDataSource_hazards: on a clean cluster the preflight finds nothing; with every
// hazard built on it (each check's), it finds each one, on its object, at its severity.
func TestAccPreflightDataSource_hazards(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	const addr = "data.k8scidr_preflight.this"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// A static mistake: reported before the cluster is read.
				Config:      preflightHCL(e, "172.24.0.0/16"),
				ExpectError: diagRE("New Range Overlaps", `new_pod_cidrs[0]`, "172.24.0.0/16 overlaps the new Service range 172.24.0.0/15"),
			},
			{
				// The node podCIDRs (100.96.x.0/24) lie inside this new pod range: nothing to report.
				Config: preflightHCL(e, "100.96.0.0/12"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("findings"), knownvalue.ListExact([]knownvalue.Check{})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("blockers"), knownvalue.Int64Exact(0)),
				},
			},
			{
				PreConfig: func() { buildHazards(t, e) },
				Config:    preflightHCL(e, "10.20.0.0/16"),
				ConfigStateChecks: []statecheck.StateCheck{findingsInclude{addr, []want{
					{"blocker", preflight.CheckClusterIPPinned, "Service/default/pinned"},
					{"warning", preflight.CheckDNSPinned, "Service/kube-system/kube-dns"},
					{"warning", preflight.CheckDNSPinned, "ConfigMap/kube-system/kubelet-config"},
					{"warning", preflight.CheckDNSPinned, "DaemonSet/kube-system/node-local-dns"},
					{"blocker", preflight.CheckPodsPinnedToOldPool, "Deployment/default/pinned"},
					{"blocker", preflight.CheckPodsPinnedToOldPool, "Namespace//pinned-ns"},
					{"warning", preflight.CheckPoolPlacement, "Pod/kube-system/kube-controller-manager-kwok-node-0"},
					{"warning", preflight.CheckPoolPlacement, "IPPool//new"},
					{"warning", preflight.CheckPoolPlacement, "Node//kwok-node-0"},
					{"warning", preflight.CheckKubeProxyCIDR, "ConfigMap/kube-system/kube-proxy"},
					{"warning", preflight.CheckPolicyOldRange, "NetworkPolicy/default/from-old-pods"},
					{"warning", preflight.CheckPolicyOldRange, "GlobalNetworkPolicy//to-old-services"},
					{"warning", preflight.CheckPolicyOldRange, "BGPConfiguration//default"},
					{"warning", preflight.CheckWebhookFailClosed, "ValidatingWebhookConfiguration//pod-guard"},
					{"blocker", preflight.CheckWebhookFailClosed, "ValidatingWebhookConfiguration//service-guard"},
					{"warning", preflight.CheckAdmissionPolicy, "ValidatingAdmissionPolicy//servicecidr-rules"},
					{"blocker", preflight.CheckDisruptionBudget, "PodDisruptionBudget/default/solo"},
					{"warning", preflight.CheckRolloutStuck, "Deployment/default/held"},
					{"blocker", preflight.CheckRangeOverlap, "ServiceCIDR//stray"},
					{"blocker", preflight.CheckCNIIPAM, "ConfigMap/kube-system/calico-config"},
					{"warning", preflight.CheckKubeadmConfig, "ConfigMap/kube-system/kubeadm-config"},
				}, t.Logf}},
			},
		},
	})
}

// buildHazards builds one hazard per check on the cluster. Webhooks match only namespaces
// labelled k8scidr-preflight=never (none), so they never run.
func buildHazards(t *testing.T, e *calicoEnv) {
	t.Helper()
	ctx := context.Background()
	kube := e.c.Kube
	must := mustOK(t)
	// cluster_ip_pinned: a GitOps tool applied the clusterIP (server-side apply).
	pinnedService(t, kube, "pinned")
	// dns_pinned: kOps' CoreDNS addon, kubeadm's kubelet-config, NodeLocal DNSCache.
	dns := ipService("kube-dns", "ClusterIP", "100.64.0.10")
	dns.Labels = map[string]string{"addon.kops.k8s.io/name": "coredns.addons.k8s.io", "k8s-app": "kube-dns"}
	must(kube.CoreV1().Services("kube-system").Create(ctx, dns, metav1.CreateOptions{}))
	must(kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: recreation.KubeletConfigMap},
		Data: map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- 100.64.0.10\n"}}, metav1.CreateOptions{}))
	nodeCache := podTemplate("node-local-dns")
	nodeCache.Spec.HostNetwork = true
	nodeCache.Spec.Containers[0].Args = []string{"-localip", "169.254.20.10,100.64.0.10", "-upstreamsvc", "kube-dns-upstream"}
	must(kube.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-local-dns"},
		Spec: appsv1.DaemonSetSpec{Selector: appSelector("node-local-dns"), Template: nodeCache}}, metav1.CreateOptions{}))
	// pods_pinned_to_old_pool: a template and a namespace naming the old pool.
	pinned := podTemplate("pinned")
	pinned.Annotations = map[string]string{"cni.projectcalico.org/ipv4pools": `["` + oldPoolName + `"]`}
	must(kube.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: appSelector("pinned"), Template: pinned}}, metav1.CreateOptions{}))
	must(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pinned-ns",
		Annotations: map[string]string{"cni.projectcalico.org/ipv4pools": `["` + oldPoolCIDR + `"]`}}}, metav1.CreateOptions{}))
	// pool_placement: kube-controller-manager's mirror pod on the old cluster CIDR, a new pool
	// with other encapsulation; the nodes' podCIDRs lie outside the new range.
	kcm := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager-kwok-node-0", Labels: map[string]string{"component": "kube-controller-manager"}},
		Spec: corev1.PodSpec{NodeName: "kwok-node-0", HostNetwork: true, Containers: []corev1.Container{{Name: "kube-controller-manager", Image: "kcm:1",
			Command: []string{"kube-controller-manager", "--cluster-cidr=" + oldPoolCIDR, "--allocate-node-cidrs=true"}}}}}
	must(kube.CoreV1().Pods("kube-system").Create(ctx, kcm, metav1.CreateOptions{}))
	if err := e.c.CreateCalicoPool(ctx, e.group, "new", map[string]any{"cidr": "10.20.0.0/16", "blockSize": int64(26),
		"ipipMode": "Never", "vxlanMode": "Always", "natOutgoing": true, "nodeSelector": "!all()"}); err != nil {
		t.Fatal(err)
	}
	// kube_proxy_cluster_cidr: kubeadm's kube-proxy configuration on the old pod range.
	must(kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy"},
		Data: map[string]string{"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: " + oldPoolCIDR + "\n"}}, metav1.CreateOptions{}))
	// policy_names_old_range: a NetworkPolicy, a Calico policy and BGP advertisements.
	must(kube.NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "from-old-pods"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: oldPoolCIDR}}}}}}}, metav1.CreateOptions{}))
	calico := func(resource, name string, spec map[string]any) {
		gvr := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: resource}
		kind := map[string]string{"globalnetworkpolicies": "GlobalNetworkPolicy", "bgpconfigurations": "BGPConfiguration"}[resource]
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": kind,
			"metadata": map[string]any{"name": name}, "spec": spec}}
		dyn, err := dynamic.NewForConfig(e.c.RESTConfig)
		if err != nil {
			t.Fatal(err)
		}
		must(dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}))
	}
	calico("globalnetworkpolicies", "to-old-services", map[string]any{"egress": []any{
		map[string]any{"action": "Allow", "destination": map[string]any{"nets": []any{"100.64.0.0/13"}}}}})
	calico("bgpconfigurations", "default", map[string]any{"serviceClusterIPs": []any{map[string]any{"cidr": "100.64.0.0/13"}}})
	// webhook_fail_closed: fail-closed on pod creates; on Service creates with its backend among
	// the Services to move (blocker). admission_policy: one on ServiceCIDRs.
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"k8scidr-preflight": "never"}}
	hook := func(name, resource string, client admissionv1.WebhookClientConfig) {
		must(kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: []admissionv1.ValidatingWebhook{{Name: name + ".example.com",
				ClientConfig: client, NamespaceSelector: never, SideEffects: ptr.To(admissionv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
				Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}}}}, metav1.CreateOptions{}))
	}
	hook("pod-guard", "pods", admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9/validate")})
	must(kube.CoreV1().Services("default").Create(ctx, ipService("guard", "ClusterIP", "100.64.9.9"), metav1.CreateOptions{}))
	hook("service-guard", "services", admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "default", Name: "guard", Port: ptr.To[int32](80)}})
	must(kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "servicecidr-rules"}, Spec: admissionv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{"networking.k8s.io"},
					APIVersions: []string{"*"}, Resources: []string{"servicecidrs"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "true"}}}}, metav1.CreateOptions{}))
	// disruption_budget: a bare pod in the old pool under a budget allowing no disruption.
	solo := podTemplate("solo")
	must(kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo", Labels: solo.Labels}, Spec: solo.Spec}, metav1.CreateOptions{}))
	e.waitPods("solo", 1)
	must(kube.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "solo"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: appSelector("solo")}}, metav1.CreateOptions{}))
	// rollout_stuck: a paused Deployment.
	must(kube.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "held"},
		Spec: appsv1.DeploymentSpec{Paused: true, Replicas: ptr.To[int32](0), Selector: appSelector("held"), Template: podTemplate("held")}}, metav1.CreateOptions{}))
	// cni_ipam: Calico's CNI plugin on host-local IPAM (each node's podCIDR): the pools move nothing.
	must(kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "calico-config"},
		Data: map[string]string{"cni_network_config": `{"name": "k8s-pod-network", "cniVersion": "0.3.1", "plugins": [{"type": "calico", ` +
			`"mtu": __CNI_MTU__, "ipam": {"type": "host-local", "subnet": "usePodCidr"}}]}`}}, metav1.CreateOptions{}))
	// kubeadm_config: kubeadm's ClusterConfiguration still on the old Service range.
	must(kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: preflight.KubeadmConfigMap},
		Data: map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n" +
			"  serviceSubnet: 100.64.0.0/13\n  podSubnet: " + oldPoolCIDR + "\n"}}, metav1.CreateOptions{}))
	// range_overlap: a ServiceCIDR inside the new pod range.
	if err := createRange(kube, "stray", "10.20.5.0/24"); err != nil {
		t.Fatal(err)
	}
}

func appSelector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

// planWarnings runs terraform plan -json and returns each warning as "summary\ndetail".
func planWarnings(t *testing.T, w *cliWorkspace) []string {
	t.Helper()
	var warnings []string
	for _, d := range w.planDiagnostics() {
		if d.Severity == "warning" {
			warnings = append(warnings, d.Summary+"\n"+d.Detail)
		}
	}
	return warnings
}

// TestAccPreflight_stageWarnings: each resource's plan shows its stage's hazards as warnings,
// one per object (the CLI folds equal summaries): the recreation a Service whose clusterIP a
// GitOps tool applies, the new pool kube-proxy's clusterCIDR, disabling the old pool and the
// roll a workload pinned to it, the roll a paused Deployment it includes. Before the
// hazards exist, none of those warnings shows.
func TestAccPreflight_stageWarnings(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	kube := e.c.Kube
	e.deployment("web", 1)
	w := newCLIWorkspace(t, e.provider()+fmt.Sprintf(`
data "k8scidr_service_moves" "this" {
  target_cidrs = ["172.24.0.0/15"]
}

resource "k8scidr_service_cidr" "new" {
  name  = "new"
  cidrs = ["172.24.0.0/15"]
}

resource "k8scidr_service_recreation" "this" {
  plan       = data.k8scidr_service_moves.this
  depends_on = [k8scidr_service_cidr.new]
}

resource "k8scidr_calico_ippool" "new" {
  name = "new"
  cidr = "10.20.0.0/16"
}

import {
  to = k8scidr_calico_ippool.old
  id = %[1]q
}

resource "k8scidr_calico_ippool" "old" {
  name         = %[1]q
  cidr         = %[2]q
  ipip_mode    = "Always"
  nat_outgoing = true
  disabled     = true
}

data "k8scidr_workload_restarts" "pods" {
  pod_cidrs = [%[2]q]
}

resource "k8scidr_workload_roll" "pods" {
  plan    = data.k8scidr_workload_restarts.pods
  include = ["default/deployment/held"]
}
`, oldPoolName, oldPoolCIDR))
	hazards := []string{
		"Cluster IPs Pinned by a Tool That Applies Them Again\n1 Service(s) stay in their old range",
		"Migration Hazard: kube_proxy_cluster_cidr on ConfigMap kube-system/kube-proxy\n",
		"Migration Hazard: pods_pinned_to_old_pool on Deployment default/pinned\n",
		"Migration Hazard: rollout_stuck on Deployment default/held\n",
	}
	for _, warning := range planWarnings(t, w) {
		for _, h := range hazards {
			if strings.HasPrefix(warning, h) {
				t.Errorf("before the hazards exist, the plan warns:\n%s", warning)
			}
		}
	}
	must := mustOK(t)
	pinnedService(t, kube, "web")
	must(kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy"},
		Data: map[string]string{"config.conf": "clusterCIDR: " + oldPoolCIDR + "\n"}}, metav1.CreateOptions{}))
	for name, paused := range map[string]bool{"pinned": false, "held": true} {
		tmpl := podTemplate(name)
		if !paused {
			tmpl.Annotations = map[string]string{"cni.projectcalico.org/ipv4pools": `["` + oldPoolName + `"]`}
		}
		must(kube.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: appSelector(name), Template: tmpl}}, metav1.CreateOptions{}))
		e.waitPods(name, 1)
	}
	// Paused once its pod runs (the data source lists paused Deployments as unmanaged; this one is
	// included by hand), so a restart would not move it.
	must(kube.AppsV1().Deployments("default").Patch(ctx, "held", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}))
	warnings := planWarnings(t, w)
	count := func(h string) int {
		n := 0
		for _, warning := range warnings {
			if strings.HasPrefix(warning, h) {
				n++
			}
		}
		return n
	}
	// The pinned template: from disabling the old pool and from the roll.
	for h, want := range map[string]int{hazards[0]: 1, hazards[1]: 1, hazards[2]: 2, hazards[3]: 1} {
		if got := count(h); got != want {
			t.Errorf("%q: %d warnings, want %d; all warnings:\n%s", h, got, want, strings.Join(warnings, "\n---\n"))
		}
	}
}

// mustOK fails the test on a create's error.
func mustOK(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// pinnedService is default/pinned at 100.64.7.7, its clusterIP applied by Argo CD (server-side
// apply), selecting app.
func pinnedService(t *testing.T, kube kubernetes.Interface, app string) {
	t.Helper()
	port := corev1ac.ServicePort().WithName("p").WithPort(80)
	mustOK(t)(kube.CoreV1().Services("default").Apply(context.Background(), corev1ac.Service("pinned", "default").WithSpec(corev1ac.ServiceSpec().
		WithClusterIP("100.64.7.7").WithSelector(map[string]string{"app": app}).WithPorts(port)),
		metav1.ApplyOptions{FieldManager: "argocd-controller"}))
}
