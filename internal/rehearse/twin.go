// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package rehearse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"golang.org/x/sync/errgroup"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// Snapshot is an exported snapshot, read back.
type Snapshot struct {
	Dir      string
	Manifest Manifest
}

// ReadSnapshot reads the snapshot in dir.
func ReadSnapshot(dir string) (*Snapshot, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("not a snapshot (k8scidr-rehearse export writes one): %w", err)
	}
	s := &Snapshot{Dir: dir}
	if err := yaml.Unmarshal(data, &s.Manifest); err != nil {
		return nil, fmt.Errorf("reading %s: %w", ManifestFile, err)
	}
	return s, nil
}

// Objects are the objects of one snapshot file (none when the kind was missing).
func (s *Snapshot) Objects(file string) ([]unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(s.Dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l struct {
		Items []map[string]any `json:"items"`
	}
	if err := yaml.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	out := make([]unstructured.Unstructured, len(l.Items))
	for i, o := range l.Items {
		out[i].Object = o
	}
	return out, nil
}

// Count is the number of objects of a snapshot file.
func (s *Snapshot) Count(file string) int {
	for _, f := range s.Manifest.Files {
		if f.Name == file {
			return f.Objects
		}
	}
	return 0
}

// twinAPIServerFlags make default/kubernetes carry endpoints as in production (the test
// clusters turn them off: they advertise 127.0.0.1), so that the apiserver Service's bridge has
// endpoints to copy. 192.0.2.1 is object data only: nothing connects to it.
var twinAPIServerFlags = []string{"--advertise-address=192.0.2.1", "--endpoint-reconciler-type=lease"}

// kcmFlags are the kube-controller-manager settings of production the twin takes: its client
// budget and the EndpointSlice controller's pace set how fast moved Services get endpoints.
var kcmFlags = []string{"--kube-api-qps=", "--kube-api-burst=", "--concurrent-service-endpoint-syncs=",
	"--endpointslice-updates-batch-period=", "--concurrent-deployment-syncs=", "--concurrent-replicaset-syncs="}

// TwinOptions are the options of the twin's control plane: the snapshot's minor version (as
// tools/testbin.sh builds it), its Service ranges (serviceRanges overrides them), its nodes by
// name, labels and pod ranges, Calico's CRDs and IPAM where the snapshot has Calico pools, and
// production's controller-manager client budget where the snapshot knows it.
func (s *Snapshot) TwinOptions(serviceRanges []string) (testcluster.Options, error) {
	r, err := testcluster.ReleaseNamed(s.Manifest.Server.Minor)
	if err != nil {
		return testcluster.Options{}, fmt.Errorf("the snapshot is of Kubernetes %s: %w", s.Manifest.Server.GitVersion, err)
	}
	if err := r.Built(); err != nil {
		return testcluster.Options{}, err
	}
	o := r.Options()
	o.ServiceCIDRs = cmpOr(serviceRanges, s.Manifest.ServiceClusterIPRanges)
	if len(o.ServiceCIDRs) == 0 {
		return o, fmt.Errorf("the snapshot does not say kube-apiserver's --service-cluster-ip-range (%s): give it with -service-cluster-ip-range", s.Manifest.RangesSource)
	}
	o.APIServerFlags = append(o.APIServerFlags, twinAPIServerFlags...)
	for _, f := range s.Manifest.ControllerManagerFlags {
		if slices.ContainsFunc(kcmFlags, func(p string) bool { return strings.HasPrefix(f, p) }) {
			o.ControllerManagerFlags = append(o.ControllerManagerFlags, f)
		}
	}
	nodes, err := s.Objects("nodes.yaml")
	if err != nil {
		return o, err
	}
	if len(nodes) == 0 {
		return o, errors.New("the snapshot has no nodes (nodes.yaml)")
	}
	for _, u := range nodes {
		var n corev1.Node
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
			return o, fmt.Errorf("node %s: %w", u.GetName(), err)
		}
		o.NodeTemplates = append(o.NodeTemplates, n)
	}
	if s.Count("ippools.yaml") > 0 {
		o.Calico = testcluster.Calico331
	}
	o.StartTimeout = 3 * time.Minute
	return o, nil
}

func cmpOr(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// Loaded is what LoadTwin put into the twin, and what it could not.
type Loaded struct {
	// Objects counts the objects loaded per snapshot file.
	Objects map[string]int
	// NotLoaded are objects the twin refused, "file: namespace/name: reason".
	NotLoaded []string
	// Paused are the Deployments paused in production: created running (a paused Deployment
	// makes no pods) and paused once their pods run.
	Paused []string
	Pods   int
}

// presentInTwin are namespaces every cluster has.
var presentInTwin = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// LoadTwin loads the snapshot's objects into the twin cfg reaches, in Kinds' order, with their
// ClusterIPs and LoadBalancer ingress, and waits until every workload's pods run with an
// address. Objects the twin refuses are listed, not fatal: the report names them.
func LoadTwin(ctx context.Context, cfg *rest.Config, s *Snapshot) (*Loaded, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Objects: map[string]int{}}
	var mu sync.Mutex
	for _, k := range Kinds {
		if !k.Load {
			continue
		}
		objs, err := s.Objects(k.File)
		if err != nil {
			return nil, err
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(32)
		for i := range objs {
			o := &objs[i]
			if skipLoad(k, o) {
				continue
			}
			if k.GVR.Resource == "deployments" {
				if paused, _, _ := unstructured.NestedBool(o.Object, "spec", "paused"); paused {
					unstructured.RemoveNestedField(o.Object, "spec", "paused")
					l.Paused = append(l.Paused, o.GetNamespace()+"/"+o.GetName())
				}
			}
			g.Go(func() error {
				err := create(gctx, dyn, k, o)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					l.NotLoaded = append(l.NotLoaded, fmt.Sprintf("%s: %s: %v", k.File, key(o), err))
				} else {
					l.Objects[k.File]++
				}
				return gctx.Err()
			})
		}
		if err := g.Wait(); err != nil {
			return l, err
		}
	}
	slices.Sort(l.NotLoaded)
	if l.Pods, err = waitPods(ctx, dyn); err != nil {
		return l, err
	}
	for _, d := range l.Paused {
		ns, name, _ := strings.Cut(d, "/")
		if _, err := dyn.Resource(apps("deployments")).Namespace(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
			return l, fmt.Errorf("pausing Deployment %s again: %w", d, err)
		}
	}
	return l, nil
}

func key(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// skipLoad: what the twin's apiserver made itself.
func skipLoad(k Kind, o *unstructured.Unstructured) bool {
	switch k.GVR.Resource {
	case "namespaces":
		return slices.Contains(presentInTwin, o.GetName())
	case "services":
		return o.GetNamespace() == "default" && o.GetName() == "kubernetes"
	case "servicecidrs":
		return o.GetName() == "kubernetes"
	}
	return false
}

// create makes o in the twin (its version as exported: the twin is of the same minor) and sets
// its status where the snapshot keeps one (a LoadBalancer's ingress).
func create(ctx context.Context, dyn dynamic.Interface, k Kind, o *unstructured.Unstructured) error {
	gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
	if err != nil {
		return err
	}
	gvr := gv.WithResource(k.GVR.Resource)
	var api dynamic.ResourceInterface = dyn.Resource(gvr)
	if k.Namespaced {
		api = dyn.Resource(gvr).Namespace(o.GetNamespace())
	}
	if strings.HasSuffix(k.GVR.Resource, "webhookconfigurations") {
		standIn(o)
	}
	status := o.Object["status"]
	ingress, _, _ := unstructured.NestedSlice(o.Object, "status", "loadBalancer", "ingress")
	delete(o.Object, "status")
	created, err := api.Create(ctx, o, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) && k.GVR.Resource == "configmaps" {
		return nil
	}
	if err != nil {
		return err
	}
	if len(ingress) > 0 {
		created.Object["status"] = status
		_, err = api.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	}
	return err
}

// standInSelector matches no object: no object carries the label.
var standInSelector = map[string]any{"matchExpressions": []any{map[string]any{"key": "k8scidr.io/rehearsal-stand-in", "operator": "Exists"}}}

// standIn makes a webhook configuration a stand-in that denies (and mutates) nothing: each
// webhook keeps its rules, failurePolicy and backend reference, which is what the provider and
// its preflight read, but its objectSelector matches no object, so the twin's apiserver never
// calls the backend it does not have. The original selector is kept in an annotation.
func standIn(o *unstructured.Unstructured) {
	hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
	for i, h := range hooks {
		hm, _ := h.(map[string]any)
		if orig, ok := hm["objectSelector"]; ok {
			data, _ := json.Marshal(orig)
			a := o.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a["k8scidr.io/rehearsal-object-selector-"+strconv.Itoa(i)] = string(data)
			o.SetAnnotations(a)
		}
		hm["objectSelector"] = runtime.DeepCopyJSONValue(standInSelector)
	}
	_ = unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
}

// waitPods waits until the workloads' pods exist and every pod runs with an address (host-network
// pods with the node's), and returns how many there are.
func waitPods(ctx context.Context, dyn dynamic.Interface) (int, error) {
	var n, last int
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		want, err := wantPods(ctx, dyn)
		if err != nil {
			return false, err
		}
		pods, err := dyn.Resource(core("pods")).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n, waiting = 0, ""
		for _, p := range pods.Items {
			if p.GetDeletionTimestamp() != nil {
				continue
			}
			n++
			phase, _, _ := unstructured.NestedString(p.Object, "status", "phase")
			ip, _, _ := unstructured.NestedString(p.Object, "status", "podIP")
			// A host-network pod has its node's address, which a node without one does not give.
			host, _, _ := unstructured.NestedBool(p.Object, "spec", "hostNetwork")
			if phase != string(corev1.PodRunning) || (ip == "" && !host) {
				waiting = key(&p)
			}
		}
		done := n >= want && waiting == "" && n == last
		last = n
		return done, nil
	})
	if err != nil {
		return n, fmt.Errorf("waiting for the twin's pods (%d so far; %s not running with an address): %w", n, waiting, err)
	}
	return n, nil
}

// wantPods is the number of pods the workloads ask for: replicas, and each DaemonSet's
// scheduled count once its controller has counted the nodes.
func wantPods(ctx context.Context, dyn dynamic.Interface) (int, error) {
	want := 0
	for _, r := range []string{"deployments", "statefulsets", "daemonsets"} {
		l, err := dyn.Resource(apps(r)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for _, o := range l.Items {
			field := []string{"spec", "replicas"}
			if r == "daemonsets" {
				field = []string{"status", "desiredNumberScheduled"}
			}
			v, found, _ := unstructured.NestedInt64(o.Object, field...)
			if !found && r != "daemonsets" {
				v = 1
			}
			want += int(v)
		}
	}
	return want, nil
}
