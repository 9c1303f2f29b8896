// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package rehearse

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInspectConfig: what the override cannot redirect is refused before anything starts, each
// named with its file and line; examples/migration itself is accepted.
func TestInspectConfig(t *testing.T) {
	info, err := InspectConfig("../../examples/migration")
	if err != nil {
		t.Fatalf("examples/migration refused: %v", err)
	}
	if !slices.Contains(info.Variables, "stage") {
		t.Errorf("variables %v lack stage", info.Variables)
	}
	for _, tc := range []struct{ config, want string }{
		{`provider "kubernetes" {}`, `main.tf:1: provider "kubernetes"`},
		{"provider \"k8scidr\" {\n  alias = \"b\"\n}", "main.tf:1: an aliased k8scidr provider"},
		{"\n\nresource \"kubernetes_namespace\" \"x\" {}", `main.tf:3: resource "kubernetes_namespace" belongs to another provider`},
		{`data "aws_eks_cluster" "x" {}`, `data "aws_eks_cluster" belongs to another provider`},
		{`module "m" { source = "./m" }`, `module "m"`},
		{"terraform {\n  required_providers {\n    helm = { source = \"hashicorp/helm\" }\n  }\n}", `required provider "helm"`},
	} {
		_, err := InspectConfig(writeConfig(t, tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.config, err, tc.want)
		}
	}
	if _, err := InspectConfig(writeConfig(t, `resource "terraform_data" "x" {}`+"\n"+`provider "k8scidr" {}`)); err != nil {
		t.Errorf("terraform_data and the default k8scidr provider refused: %v", err)
	}
	if _, err := InspectConfig(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no .tf file") {
		t.Errorf("an empty directory: %v", err)
	}
}

// TestKeep: the snapshot drops server-set metadata and status (but a LoadBalancer's), copies only
// the hand-made endpoints of selector-less Services and bare pods, and reads the control plane's
// flags from its mirror pods, kOps' shell-wrapped command line included.
func TestKeep(t *testing.T) {
	e := exporter{selectorless: map[string]bool{}}
	kind := func(r string) Kind {
		i := slices.IndexFunc(Kinds, func(k Kind) bool { return k.GVR.Resource == r })
		return Kinds[i]
	}
	obj := func(o map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: o} }
	svc := e.keep(kind("services"), obj(map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "legacy", "namespace": "a", "uid": "u", "resourceVersion": "1", "managedFields": []any{},
			"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		"spec":   map[string]any{"clusterIP": "100.64.0.5"},
		"status": map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "203.0.113.1"}}}}}))
	md := svc["metadata"].(map[string]any)
	if md["uid"] != nil || md["resourceVersion"] != nil || md["managedFields"] != nil || md["annotations"] != nil {
		t.Errorf("server-set metadata kept: %v", md)
	}
	if svc["status"] == nil {
		t.Error("a Service's status (LoadBalancer ingress) dropped")
	}
	if !e.selectorless["a/legacy"] {
		t.Error("a Service without a selector not noted")
	}
	ep := func(ns, name string) *unstructured.Unstructured {
		return obj(map[string]any{"metadata": map[string]any{"name": name, "namespace": ns}})
	}
	if e.keep(kind("endpoints"), ep("a", "legacy")) == nil || e.keep(kind("endpoints"), ep("a", "web")) != nil {
		t.Error("endpoints: want only the selector-less Service's")
	}
	slice := func(managedBy string) *unstructured.Unstructured {
		return obj(map[string]any{"metadata": map[string]any{"name": "legacy-x", "namespace": "a",
			"labels": map[string]any{"kubernetes.io/service-name": "legacy", "endpointslice.kubernetes.io/managed-by": managedBy}}})
	}
	if e.keep(kind("endpointslices"), slice("me")) == nil || e.keep(kind("endpointslices"), slice("endpointslicemirroring-controller.k8s.io")) != nil {
		t.Error("endpointslices: want only hand-made ones")
	}
	pod := func(name string, owned bool, annotations map[string]any, labels map[string]any, command []any) *unstructured.Unstructured {
		md := map[string]any{"name": name, "namespace": "kube-system", "annotations": annotations, "labels": labels}
		if owned {
			md["ownerReferences"] = []any{map[string]any{"kind": "ReplicaSet", "name": "x"}}
		}
		return obj(map[string]any{"metadata": md, "spec": map[string]any{"containers": []any{map[string]any{"name": "c", "command": command}}},
			"status": map[string]any{"podIP": "100.96.0.1"}})
	}
	if p := e.keep(kind("pods"), pod("bare", false, nil, nil, nil)); p == nil || p["status"] != nil {
		t.Errorf("a bare pod: %v", p)
	}
	if e.keep(kind("pods"), pod("web-1", true, nil, nil, nil)) != nil {
		t.Error("a workload's pod copied")
	}
	mirror := map[string]any{"kubernetes.io/config.mirror": "x"}
	if e.keep(kind("pods"), pod("kube-apiserver-n", false, mirror, map[string]any{"component": "kube-apiserver"},
		[]any{"/bin/sh", "-c", "mkfifo /tmp/pipe; /usr/local/bin/kube-apiserver --service-cluster-ip-range=100.64.0.0/13 --v=2 2>&1 | tee -a /var/log/x"})) == nil {
		t.Error("a static pod's mirror pod not copied: it runs in production, and no controller restarts it")
	}
	kcm := e.keep(kind("pods"), pod("kube-controller-manager-n", false, mirror, map[string]any{"k8s-app": "kube-controller-manager"},
		[]any{"kube-controller-manager", "--kube-api-qps=100", "--allocate-node-cidrs", "--token=planted-secret-flag", "--cluster-cidr", "100.96.0.0/11"}))
	// The flags the provider reads and the twin takes stay on the command line; the rest goes.
	if got := kcm["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["command"]; !reflect.DeepEqual(got,
		[]any{Redacted, "--kube-api-qps=100", "--allocate-node-cidrs", Redacted, "--cluster-cidr", "100.96.0.0/11"}) {
		t.Errorf("controller-manager's command line in the snapshot: %v", got)
	}
	if ranges, source := e.serviceRanges(); !slices.Equal(ranges, []string{"100.64.0.0/13"}) || !strings.Contains(source, "kube-apiserver-n") {
		t.Errorf("ranges %v from %s", ranges, source)
	}
	if !slices.Equal(e.kcmFlags, []string{"--kube-api-qps=100"}) {
		t.Errorf("controller-manager flags %v", e.kcmFlags)
	}
	if e.keep(kind("configmaps"), obj(map[string]any{"metadata": map[string]any{"name": "app-settings", "namespace": "kube-system"}})) != nil {
		t.Error("a ConfigMap the provider does not read copied")
	}

	// Nothing a manifest tells its containers reaches the snapshot; names and references do.
	container := func() map[string]any {
		return map[string]any{"name": "app", "image": "app:1", "command": []any{"app"}, "args": []any{"--password=planted-secret-arg"},
			"env": []any{map[string]any{"name": "DB_PASSWORD", "value": "planted-secret-env"},
				map[string]any{"name": "TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "app", "key": "token"}}}},
			"livenessProbe": map[string]any{"httpGet": map[string]any{"path": "/", "httpHeaders": []any{map[string]any{"name": "Authorization", "value": "planted-secret-header"}}}},
			"lifecycle":     map[string]any{"preStop": map[string]any{"exec": map[string]any{"command": []any{"curl", "-u", "planted-secret-hook"}}}}}
	}
	annotations := func() map[string]any {
		return map[string]any{"example.org/creds": "planted-secret-annotation", "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
			"cni.projectcalico.org/ipv4pools":                  `["old-pool"]`,
			"kubectl.kubernetes.io/last-applied-configuration": `{"planted-secret-last-applied":1}`}
	}
	deploy := e.keep(kind("deployments"), obj(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "app", "namespace": "a", "annotations": annotations()},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"metadata": map[string]any{"annotations": annotations()},
			"spec": map[string]any{"containers": []any{container()}, "initContainers": []any{container()}}}}}))
	bare := e.keep(kind("pods"), obj(map[string]any{"metadata": map[string]any{"name": "bare", "namespace": "a", "annotations": annotations()},
		"spec": map[string]any{"containers": []any{container()}}}))
	for name, o := range map[string]map[string]any{"Deployment": deploy, "bare pod": bare, "kube-controller-manager's pod": kcm} {
		text, err := yaml.Marshal(o) // as the snapshot's files are written
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(text), "planted-secret") {
			t.Errorf("the %s's copy holds a planted secret: %s", name, text)
		}
		for _, kept := range []string{"name: DB_PASSWORD", "secretKeyRef:", "example.org/creds: " + Redacted, `'["old-pool"]'`} {
			if name != "kube-controller-manager's pod" && !strings.Contains(string(text), kept) {
				t.Errorf("the %s's copy lost %s: %s", name, kept, text)
			}
		}
	}
	if got := deploy["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)["kubectl.kubernetes.io/restartedAt"]; got != "2026-01-01T00:00:00Z" {
		t.Errorf("the template's restartedAt is %v, want it kept", got)
	}
	if slices.Contains(e.kcmFlags, "--token=planted-secret-flag") {
		t.Errorf("controller-manager flags the twin does not take recorded: %v", e.kcmFlags)
	}
}

// TestNewestAndMinor: the served version a snapshot reads, and the minor it records.
func TestNewestAndMinor(t *testing.T) {
	if got := newest([]string{"v1beta1", "v1alpha1"}); got != "v1beta1" {
		t.Errorf("newest = %s", got)
	}
	if got := minorOf("1", "29+", "v1.29.6-eks-1234"); got != "1.29" {
		t.Errorf("minorOf = %s", got)
	}
	if got := minorOf("1", "33+", ""); got != "1.33" {
		t.Errorf("minorOf without gitVersion = %s", got)
	}
}

// TestOutcome: a report's facts, without times, for comparing two rehearsals; a failed stage or
// a journal left behind fails the report.
func TestOutcome(t *testing.T) {
	r := &Report{Stages: []Stage{
		{Name: "stage 1", Moves: map[string][]string{"b/y": {"172.24.0.2"}, "a/x": {"172.24.0.1"}}, Change: "Apply complete!",
			Differences: []string{"b/y: planned 172.24.0.2, has 100.64.0.2"}},
		{Name: "stage 2", Before: "kube-apiserver restarted", PlanError: "Resource precondition failed"},
	}}
	want := []string{"stage 1: move a/x to 172.24.0.1", "stage 1: move b/y to 172.24.0.2", "stage 1: applied: Apply complete!",
		"stage 1: differs: b/y: planned 172.24.0.2, has 100.64.0.2", "stage 2: before: kube-apiserver restarted",
		"stage 2: plan failed: Resource precondition failed"}
	if got := r.Outcome(); !slices.Equal(got, want) {
		t.Errorf("Outcome:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !r.Failed() {
		t.Error("a failed plan does not fail the report")
	}
	ok := &Report{Stages: r.Stages[:1]}
	if ok.Failed() {
		t.Error("a passing stage fails the report")
	}
	ok.Journal = []string{"a/x"}
	if !ok.Failed() {
		t.Error("a journal left behind does not fail the report")
	}
}

// TestRangesFromSteps: kube-apiserver's new range comes from kops_networking's service_range
// step and replaces its own family only (a dual-stack cluster keeps its IPv6 range).
func TestRangesFromSteps(t *testing.T) {
	steps := `[{"name":"gates","yaml":"kubeAPIServer: {}"},{"name":"service_range","when":"after stage 1","yaml":"spec:\n  serviceClusterIPRange: 172.24.0.0/15\n"}]`
	got, err := rangesFromSteps([]byte(steps), []string{"100.64.0.0/13", "fd00:10::/108"})
	if err != nil || !slices.Equal(got, []string{"172.24.0.0/15", "fd00:10::/108"}) {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := rangesFromSteps([]byte(`[{"name":"gates","yaml":""}]`), nil); err == nil {
		t.Error("no service_range step: no error")
	}
}

// TestStandIn: a webhook's stand-in keeps what the provider reads (rules, failurePolicy,
// backend) and matches no object, the original selector kept aside.
func TestStandIn(t *testing.T) {
	o := &unstructured.Unstructured{Object: map[string]any{"kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "org-policy"},
		"webhooks": []any{map[string]any{"name": "a", "failurePolicy": "Fail", "objectSelector": map[string]any{"matchLabels": map[string]any{"x": "y"}},
			"clientConfig": map[string]any{"service": map[string]any{"namespace": "policy", "name": "org-policy"}}},
			map[string]any{"name": "b", "rules": []any{}}}}}
	standIn(o)
	hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
	for _, h := range hooks {
		sel, _, _ := unstructured.NestedSlice(h.(map[string]any), "objectSelector", "matchExpressions")
		if len(sel) != 1 || sel[0].(map[string]any)["operator"] != "Exists" {
			t.Errorf("webhook %v: selector %v", h.(map[string]any)["name"], sel)
		}
	}
	if fp, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "failurePolicy"); fp != "Fail" {
		t.Errorf("failurePolicy %q", fp)
	}
	if svc, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "service", "name"); svc != "org-policy" {
		t.Errorf("backend %q", svc)
	}
	if got := o.GetAnnotations()["k8scidr.io/rehearsal-object-selector-0"]; got != `{"matchLabels":{"x":"y"}}` {
		t.Errorf("original selector kept as %q", got)
	}
}
