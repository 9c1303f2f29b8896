// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Calico's CRDs in the test cluster, as kOps and manifest installs have them.
package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Calico releases whose crd.projectcalico.org/v1 CRDs tools/testbin.sh provides. 3.28 predates
// IPPool's assignmentMode; 3.31 has it.
const (
	Calico328 = "v3.28"
	Calico331 = "v3.31"
)

// podReadyStage is the kwok stage that makes a pod Running with its IP.
const podReadyStage = "pod-ready.yaml"

// calicoRequirement holds a pod in Pending until Calico's IPAM has annotated its
// address (hostNetwork pods need none). The stage takes the IP from the annotation.
const calicoRequirement = `    - key: '.spec.hostNetwork == true or .metadata.annotations["cni.projectcalico.org/podIPs"] != null'
      operator: 'In'
      values:
      - 'true'
`

// calicoPodReady adds calicoRequirement to the pod-ready stage's selector.
func calicoPodReady(stage []byte) []byte {
	const anchor = "    matchExpressions:\n"
	s := string(stage)
	i := strings.Index(s, anchor)
	if i < 0 {
		panic("pod-ready stage has no matchExpressions")
	}
	i += len(anchor)
	return []byte(s[:i] + calicoRequirement + s[i:])
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// calicoPath is where Calico's piece name is: Calico's builds are the same for every Kubernetes
// release, so an older release's bin/k8s-<release>/ without them takes the suite's own.
func (c *Cluster) calicoPath(name string) string {
	p := filepath.Join(c.BinDir, name)
	if _, err := os.Stat(p); err != nil {
		if q := filepath.Join(DefaultBinDir(), name); q != p {
			if _, err := os.Stat(q); err == nil {
				return q
			}
		}
	}
	return p
}

// InstallCalicoCRDs applies the crd.projectcalico.org/v1 CRDs of a Calico release (from
// BinDir/calico-crds-<release>) and waits until every one is Established.
func (c *Cluster) InstallCalicoCRDs(ctx context.Context, release string) error {
	dir := c.calicoPath("calico-crds-" + release)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no Calico %s CRDs in %s (run make testbin): %v", release, dir, err)
	}
	var docs [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		docs = append(docs, raw)
	}
	return c.applyCRDs(ctx, docs)
}

// applyCRDs server-side applies CRD manifests and waits until every one is Established.
func (c *Cluster) applyCRDs(ctx context.Context, docs [][]byte) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	api := dyn.Resource(crdResource)
	var names []string
	for _, raw := range docs {
		data, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return err
		}
		var crd unstructured.Unstructured
		if err := crd.UnmarshalJSON(data); err != nil {
			return err
		}
		_, err = api.Patch(ctx, crd.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "k8scidr-testcluster", Force: ptr.To(true)})
		if err != nil {
			return fmt.Errorf("applying %s: %w", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			obj, err := api.Get(ctx, n, metav1.GetOptions{})
			if err != nil || !k8sops.ConditionTrue(obj, "Established") {
				return false, nil //nolint:nilerr // not there yet: keep waiting
			}
		}
		return true, nil
	})
}

// CreateCalicoPool creates an IPPool as an installer would (calico-node's default pool, or a
// kOps manifest), with spec as given: no defaults are filled in.
func (c *Cluster) CreateCalicoPool(ctx context.Context, groupVersion, name string, spec map[string]any) error {
	gv, err := schema.ParseGroupVersion(groupVersion)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": groupVersion, "kind": "IPPool", "metadata": map[string]any{"name": name}, "spec": spec,
	}}
	_, err = dyn.Resource(gv.WithResource("ippools")).Create(ctx, pool, metav1.CreateOptions{})
	return err
}
