// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

const clusterInfoAddr = "data.k8scidr_cluster_info.this"

func TestAccClusterInfoDataSource_basic(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	nodes, err := testAccCluster.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeSystem, err := testAccCluster.Kube.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccProviderConfig() + clusterInfoConfig,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("cluster_id"), knownvalue.StringExact(string(kubeSystem.UID))),
				statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("server"), knownvalue.StringExact(testAccCluster.RESTConfig.Host)),
				statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("server_version"), knownvalue.StringRegexp(regexp.MustCompile(`^v`+regexp.QuoteMeta(testcluster.NewestRelease)+`\.\d+$`))),
				statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("service_cidr_api_version"), knownvalue.StringExact("networking.k8s.io/v1")),
				statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("calico_api_group"), knownvalue.Null()),
				statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("node_count"), knownvalue.Int64Exact(int64(len(nodes.Items)))),
				statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("default_service_cidrs"),
					knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(testAccCluster.ServiceCIDRs[0])})),
			},
		}},
	})
}

// TestAccClusterInfoDataSource_calicoAndDualStack runs on a cluster of its own: dual-stack
// Service ranges, three nodes, and Calico's API groups appearing one after the other.
func TestAccClusterInfoDataSource_calicoAndDualStack(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{Nodes: 3, ServiceCIDRs: []string{"100.64.0.0/13", "fd00:10:96::/108"}})
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	provider := func(group string) string {
		return fmt.Sprintf("provider \"k8scidr\" {\n  config_path = %q\n  calico_api_group = %q\n}\n", c.Kubeconfig, group) + clusterInfoConfig
	}
	calico := func(want knownvalue.Check) []statecheck.StateCheck {
		return []statecheck.StateCheck{statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("calico_api_group"), want)}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: provider("auto"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("node_count"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("default_service_cidrs"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("100.64.0.0/13"), knownvalue.StringExact("fd00:10:96::/108"),
					})),
					statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("calico_api_group"), knownvalue.Null()),
				},
			},
			{
				// kOps and manifest installs: only the crd.projectcalico.org/v1 CRDs.
				PreConfig:         func() { installIPPoolCRD(t, dyn, "crd.projectcalico.org", "v1") },
				Config:            provider("auto"),
				ConfigStateChecks: calico(knownvalue.StringExact("crd.projectcalico.org/v1")),
			},
			{
				// Asking for v3 where it is not served: a warning, no group, and the other facts
				// read, the pools named among the unread.
				Config: provider("projectcalico.org/v3"),
				ConfigStateChecks: append(calico(knownvalue.Null()),
					statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("unread"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("ippools.projectcalico.org/v3")})),
					statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New("kubernetes_minor"), knownvalue.Int64Exact(newestMinor(t)))),
			},
			{
				// The Calico API server (or 3.32's native v3 CRDs) serves projectcalico.org/v3: auto prefers it.
				PreConfig:         func() { installIPPoolCRD(t, dyn, "projectcalico.org", "v3") },
				Config:            provider("auto"),
				ConfigStateChecks: calico(knownvalue.StringExact("projectcalico.org/v3")),
			},
			{
				Config:            provider("crd.projectcalico.org/v1"),
				ConfigStateChecks: calico(knownvalue.StringExact("crd.projectcalico.org/v1")),
			},
		},
	})
}

// installIPPoolCRD serves a minimal IPPool CRD in group/version and waits until it is Established.
func installIPPoolCRD(t *testing.T, dyn dynamic.Interface, group, version string) {
	t.Helper()
	installCRD(t, dyn, group, version, "IPPool", "ippools")
}

// installCRD serves a minimal cluster-scoped CRD that keeps any field, and waits until it is Established.
func installCRD(t *testing.T, dyn dynamic.Interface, group, version, kind, plural string) {
	t.Helper()
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Cluster",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{
				"name": version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	ctx := context.Background()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, plural+"."+group, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return k8sops.ConditionTrue(got, "Established"), nil
	})
	if err != nil {
		t.Fatalf("CRD %s.%s not established: %v", plural, group, err)
	}
}

// TestAccProvider_clusterID: with cluster_id naming another cluster every operation fails with a
// diagnostic on cluster_id, and nothing is created; with this cluster's identity it proceeds.
func TestAccProvider_clusterID(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	kube := testAccCluster.Kube
	kubeSystem, err := kube.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	config := func(id string) string {
		return fmt.Sprintf("provider \"k8scidr\" {\n  config_path = %q\n  cluster_id  = %q\n}\n", testAccCluster.Kubeconfig, id) + `
resource "k8scidr_service_cidr" "guarded" {
  name  = "cluster-id-guarded"
  cidrs = ["172.31.240.0/24"]
}
`
	}
	other := "2f1c9a3e-0000-4000-8000-000000000000"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config(other),
				ExpectError: diagRE("Wrong Cluster", "cluster_id", "whose cluster_id (the kube-system namespace's UID) is "+string(kubeSystem.UID),
					"not the configured "+other, "reads and writes nothing there"),
			},
			{
				PreConfig: func() {
					_, err := kube.NetworkingV1().ServiceCIDRs().Get(context.Background(), "cluster-id-guarded", metav1.GetOptions{})
					assertGone(t, err, "ServiceCIDR cluster-id-guarded after the refused run (the wrong-cluster guard must touch nothing)")
				},
				Config: config(string(kubeSystem.UID)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("k8scidr_service_cidr.guarded", tfjsonpath.New("cidrs"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("172.31.240.0/24")})),
				},
			},
		},
	})
}

// TestAccProvider_inClusterWarning runs terraform as a pod would run it: in a private mount
// namespace holding the service-account files at their fixed path, KUBERNETES_SERVICE_HOST and
// _PORT set, and an empty provider block. client-go then falls back to the in-cluster
// configuration: the plan works and warns which cluster it reached; with cluster_id naming that
// cluster the warning goes.
func TestAccProvider_inClusterWarning(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1) to give terraform a private mount namespace with the service-account files")
	}
	c := testAccCluster
	kubeSystem, err := c.Kube.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := t.TempDir()
	for name, data := range map[string][]byte{"token": []byte(c.Token), "ca.crt": c.CACert} {
		if err := os.WriteFile(filepath.Join(sa, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	host, err := url.Parse(c.Host)
	if err != nil {
		t.Fatal(err)
	}
	// /var/run is the pod's: a tmpfs of this namespace only, holding the service-account files.
	const script = `mount -t tmpfs k8scidr-sa /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && ` +
		`cp "$SA_DIR"/token "$SA_DIR"/ca.crt /run/secrets/kubernetes.io/serviceaccount/ && exec "$@"`
	plan := func(provider string) string {
		t.Helper()
		w := newCLIWorkspace(t, provider+clusterInfoConfig)
		cmd := w.command([]string{"SA_DIR=" + sa, "KUBERNETES_SERVICE_HOST=" + host.Hostname(), "KUBERNETES_SERVICE_PORT=" + host.Port()},
			"plan", "-no-color")
		cmd.Args = append([]string{unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh"}, cmd.Args...)
		cmd.Path = unshare
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("plan in the pod-like namespace: %v\n%s", err, out)
		}
		return string(out)
	}
	out := plan("provider \"k8scidr\" {}\n")
	if !diagRE("Warning: In-Cluster Credentials Used", "service account of the pod", "reached the cluster at "+c.Host,
		"cluster_id "+string(kubeSystem.UID)).MatchString(out) {
		t.Errorf("an empty provider block in a pod: no warning naming the cluster reached:\n%s", out)
	}
	if out := plan(fmt.Sprintf("provider \"k8scidr\" {\n  cluster_id = %q\n}\n", kubeSystem.UID)); strings.Contains(out, "In-Cluster Credentials Used") {
		t.Errorf("with cluster_id naming the cluster, the plan still warns:\n%s", out)
	}
}

// TestAccClusterInfoDataSource_facts: on a cluster laid out as kOps lays it out (the control
// plane's mirror pods with their flags in one shell line, Calico's node agent and CNI
// configuration, kube-proxy's ConfigMap, kOps' Corefile, NodeLocal DNSCache), the data source
// reports the facts a migration's variables must agree with, each read from its own object;
// and on the same cluster without them it guesses none.
func TestAccClusterInfoDataSource_facts(t *testing.T) {
	testAccPreCheck(t)
	c := startCluster(t, testcluster.Options{})
	ctx := context.Background()
	str := knownvalue.StringExact
	strs := func(v ...string) knownvalue.Check {
		checks := make([]knownvalue.Check, len(v))
		for i, s := range v {
			checks[i] = str(s)
		}
		return knownvalue.ListExact(checks)
	}
	check := func(path string, want knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(clusterInfoAddr, tfjsonpath.New(path), want)
	}
	var seeded bool
	seed := func() {
		if err := c.InstallCalicoCRDs(ctx, testcluster.Calico331); err != nil {
			t.Fatal(err)
		}
		// kOps' layout: Calico's default pool 100.96.0.0/11, kube-dns at 100.64.0.10.
		if _, err := c.Seed(ctx, 0); err != nil {
			t.Fatal(err)
		}
		notScheduled(t, c, "calico-node")
		notScheduled(t, c, "node-local-dns")
		for name, data := range map[string]map[string]string{
			"calico-config":  {"cni_network_config": `{"name": "k8s-pod-network", "plugins": [{"type": "calico", "ipam": {"type": "calico-ipam"}, "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}}]}`},
			"kube-proxy":     {"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: 100.96.0.0/11\nmode: nftables\n"},
			"coredns":        {"Corefile": testcluster.CorefileKOps.Block},
			"node-local-dns": {"Corefile": "cluster.local:53 {\n    cache {\n        success 9984 30\n        denial 9984 5\n    }\n    forward . __PILLAR__CLUSTER__DNS__\n}\n"},
		} {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Data: data}
			if _, err := c.Kube.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for component, line := range map[string]string{
			"kube-apiserver":          "/usr/local/bin/kube-apiserver --allow-privileged=true --service-cluster-ip-range=100.64.0.0/13",
			"kube-controller-manager": "/usr/local/bin/kube-controller-manager --allocate-node-cidrs=true --cluster-cidr=100.96.0.0/11",
		} {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: component + "-cp-a", Namespace: "kube-system",
				Labels: map[string]string{"k8s-app": component}, Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}},
				Spec: corev1.PodSpec{HostNetwork: true, NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: component, Image: component,
					Command: []string{"/bin/sh", "-c", line + " 2>&1 | /bin/tee -a /var/log/" + component + ".log"}}}}}
			if _, err := c.Kube.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		seeded = true
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// Nothing of the CNI, kube-proxy or CoreDNS here: nulls, not guesses.
				Config: providerBlock(c.Kubeconfig) + clusterInfoConfig,
				ConfigStateChecks: []statecheck.StateCheck{
					check("kubernetes_minor", knownvalue.Int64Exact(newestMinor(t))),
					check("service_cidrs", knownvalue.MapExact(map[string]knownvalue.Check{"kubernetes": strs(c.ServiceCIDRs...)})),
					check("apiserver_service_ranges", knownvalue.ListSizeExact(0)),
					check("cluster_cidrs", knownvalue.ListSizeExact(0)),
					check("calico_pools", knownvalue.ListSizeExact(0)),
					check("cni", knownvalue.Null()),
					check("ipam", knownvalue.Null()),
					// No network plugin known and no Calico: kubenet's way, from the nodes.
					check("pod_range_steps", knownvalue.StringRegexp(regexp.MustCompile(`^No network plugin this provider knows runs here.*With kubenet or host-local IPAM: pods take addresses from their node's podCIDR`))),
					check("kube_proxy_mode", knownvalue.Null()),
					check("dns_service", knownvalue.Null()),
					check("dns_service_ips", knownvalue.ListSizeExact(0)),
					check("coredns_ttl", knownvalue.Null()),
					check("node_local_dns", knownvalue.Bool(false)),
					check("service_cidr_gate", knownvalue.Bool(true)),
					check("unread", knownvalue.ListSizeExact(0)),
				},
			},
			{
				PreConfig: seed,
				Config:    providerBlock(c.Kubeconfig) + clusterInfoConfig,
				ConfigStateChecks: []statecheck.StateCheck{
					check("apiserver_service_ranges", strs("100.64.0.0/13")),
					check("cluster_cidrs", strs("100.96.0.0/11")),
					check("calico_pools", knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectExact(map[string]knownvalue.Check{
						"name": str("default-ipv4-ippool"), "cidr": str("100.96.0.0/11"), "disabled": knownvalue.Bool(false)})})),
					check("dns_service", str("kube-system/kube-dns")),
					check("dns_service_ips", strs("100.64.0.10")),
					check("cni", str("Calico")),
					check("cni_daemonset", str("kube-system/calico-node")),
					check("ipam", str("calico-ipam")),
					check("pod_range_steps", knownvalue.Null()),
					check("kube_proxy_mode", str("nftables")),
					check("kube_proxy_cluster_cidr", str("100.96.0.0/11")),
					check("coredns_ttl", knownvalue.Int64Exact(30)),
					check("coredns_cache_ttl", knownvalue.Int64Exact(30)),
					check("node_local_dns", knownvalue.Bool(true)),
					check("node_local_dns_cache_ttl", knownvalue.Int64Exact(30)),
				},
			},
		},
	})
	if !seeded {
		t.Error("the kOps-like objects were never made")
	}
}

// newestMinor is the suite's own control plane's minor version, e.g. 37.
func newestMinor(t *testing.T) int64 {
	t.Helper()
	minor, err := strconv.ParseInt(strings.TrimPrefix(testcluster.NewestRelease, "1."), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return minor
}
