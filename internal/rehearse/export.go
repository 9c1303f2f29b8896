// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package rehearse copies what a migration touches, or is touched by, out of a cluster (Export),
// loads that copy into a local control plane of the same minor version (LoadTwin), and applies a
// configuration to a cluster stage by stage as the pipeline would, reporting per stage what was
// planned, what the apply did and refused, and what the journal holds (Rehearse). It is the
// engine of cmd/k8scidr-rehearse.
package rehearse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// ManifestFile is the snapshot's table of contents.
const ManifestFile = "snapshot.yaml"

// Kind is one kind of object a snapshot holds, in the order a twin loads it.
type Kind struct {
	// File is the snapshot's YAML file of the kind.
	File string
	GVR  schema.GroupVersionResource
	// Namespaced kinds are listed across all namespaces.
	Namespaced bool
	// Load: the twin gets these objects. The others are recorded for the reviewer and the report
	// (IPAM state, which the twin's own Calico IPAM makes afresh; IPAddresses, which the
	// apiserver makes for the Services; nodes, which the twin starts with).
	Load bool
	// Status is kept (nodes' addresses, LoadBalancer ingress).
	Status bool
}

// Snapshot kinds, in load order: what a created object needs exists before it; quotas, limits
// and admission policies last, so that production's guards judge the migration and not the
// loading of the copy.
var Kinds = []Kind{
	{File: "namespaces.yaml", GVR: core("namespaces"), Load: true},
	{File: "nodes.yaml", GVR: core("nodes"), Status: true},
	{File: "configmaps.yaml", GVR: core("configmaps"), Namespaced: true, Load: true},
	{File: "servicecidrs.yaml", GVR: schema.GroupVersionResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, Load: true},
	{File: "ippools.yaml", GVR: calico("ippools"), Load: true},
	{File: "ipamblocks.yaml", GVR: calico("ipamblocks")},
	{File: "ipamhandles.yaml", GVR: calico("ipamhandles")},
	{File: "services.yaml", GVR: core("services"), Namespaced: true, Load: true, Status: true},
	{File: "endpoints.yaml", GVR: core("endpoints"), Namespaced: true, Load: true},
	{File: "endpointslices.yaml", GVR: schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, Namespaced: true, Load: true},
	{File: "ipaddresses.yaml", GVR: schema.GroupVersionResource{Group: "networking.k8s.io", Resource: "ipaddresses"}},
	{File: "deployments.yaml", GVR: apps("deployments"), Namespaced: true, Load: true},
	{File: "statefulsets.yaml", GVR: apps("statefulsets"), Namespaced: true, Load: true},
	{File: "daemonsets.yaml", GVR: apps("daemonsets"), Namespaced: true, Load: true},
	{File: "pods.yaml", GVR: core("pods"), Namespaced: true, Load: true},
	{File: "poddisruptionbudgets.yaml", GVR: schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, Namespaced: true, Load: true},
	{File: "limitranges.yaml", GVR: core("limitranges"), Namespaced: true, Load: true},
	{File: "resourcequotas.yaml", GVR: core("resourcequotas"), Namespaced: true, Load: true},
	{File: "validatingadmissionpolicies.yaml", GVR: admission("validatingadmissionpolicies"), Load: true},
	{File: "validatingadmissionpolicybindings.yaml", GVR: admission("validatingadmissionpolicybindings"), Load: true},
	// Loaded as stand-ins that deny nothing (standIn): the backends are not in the twin.
	{File: "validatingwebhookconfigurations.yaml", GVR: admission("validatingwebhookconfigurations"), Load: true},
	{File: "mutatingwebhookconfigurations.yaml", GVR: admission("mutatingwebhookconfigurations"), Load: true},
}

func core(r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Version: "v1", Resource: r}
}
func apps(r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: r}
}
func calico(r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: r}
}
func admission(r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Resource: r}
}

// ConfigMaps are the only ConfigMaps a snapshot holds (kube-system's): the kubelets' clusterDNS,
// kube-proxy's clusterCIDR, Calico's CNI configuration, NodeLocal DNSCache's Corefile and
// kubeadm's ClusterConfiguration, as the provider reads them. Never Secrets.
var ConfigMaps = []string{"kubelet-config", "kube-proxy", "calico-config", "node-local-dns", "kubeadm-config"}

// Manifest is snapshot.yaml.
type Manifest struct {
	ExportedAt time.Time `json:"exportedAt"`
	// Server is the cluster's version; the twin runs the same minor.
	Server ServerVersion `json:"server"`
	// ServiceClusterIPRanges are kube-apiserver's --service-cluster-ip-range, with where they
	// were found.
	ServiceClusterIPRanges []string `json:"serviceClusterIPRanges,omitempty"`
	RangesSource           string   `json:"rangesSource,omitempty"`
	// ControllerManagerFlags are kube-controller-manager's command line where its pod is
	// readable (kubeadm and kOps run it as a static pod), else empty with the reason.
	ControllerManagerFlags  []string `json:"controllerManagerFlags,omitempty"`
	ControllerManagerSource string   `json:"controllerManagerSource"`
	Files                   []File   `json:"files"`
	// Seconds the export took.
	Seconds float64 `json:"seconds"`
}

// ServerVersion is the apiserver's /version.
type ServerVersion struct {
	GitVersion string `json:"gitVersion"`
	Minor      string `json:"minor"` // "1.37"
}

// File is one kind's file in the snapshot.
type File struct {
	Name    string `json:"name"`
	Objects int    `json:"objects"`
	Bytes   int64  `json:"bytes"`
	// Missing says why there is no file: not served, or not readable with these credentials.
	Missing string `json:"missing,omitempty"`
}

// list is a snapshot file's content: a v1 List, as kubectl writes one.
type list struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Items      []map[string]any `json:"items"`
}

// Export writes the snapshot of the cluster cfg reaches into dir, read-only (list and get),
// and returns its manifest. A kind not served (no Calico, an older release) or not readable
// with these credentials is recorded as missing; any other failure is an error.
func Export(ctx context.Context, cfg *rest.Config, dir string) (*Manifest, error) {
	start := time.Now()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.WarningHandler = rest.NoWarnings{} // Endpoints' deprecation, once per list
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	m := &Manifest{ExportedAt: start.UTC().Truncate(time.Second)}
	v, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	m.Server = ServerVersion{GitVersion: v.GitVersion, Minor: minorOf(v.Major, v.Minor, v.GitVersion)}
	kinds, err := served(dc)
	if err != nil {
		return nil, err
	}
	e := exporter{dyn: dyn, selectorless: map[string]bool{}}
	for _, k := range kinds {
		f := File{Name: k.File}
		items, err := e.list(ctx, k)
		switch {
		case err == errNotServed:
			f.Missing = "not served by this cluster"
		case apierrors.IsForbidden(err):
			f.Missing = "not readable with these credentials: " + err.Error()
		case err != nil:
			return nil, fmt.Errorf("listing %s: %w", k.GVR.Resource, err)
		}
		if f.Missing == "" {
			data, err := yaml.Marshal(list{APIVersion: "v1", Kind: "List", Items: items})
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(dir, k.File), data, 0o600); err != nil {
				return nil, err
			}
			f.Objects, f.Bytes = len(items), int64(len(data))
		}
		m.Files = append(m.Files, f)
	}
	m.ServiceClusterIPRanges, m.RangesSource = e.serviceRanges()
	m.ControllerManagerFlags, m.ControllerManagerSource = e.kcmFlags, e.kcmSource
	if m.ControllerManagerSource == "" {
		m.ControllerManagerSource = "not found: no kube-controller-manager pod in kube-system (a managed control plane, or pods not readable)"
	}
	m.Seconds = time.Since(start).Seconds()
	data, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return m, os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o600)
}

var errNotServed = errors.New("not served")

// served fills in each kind's served version (ServiceCIDRs: v1, v1beta1 or v1alpha1 by
// release; admission policies: v1 or v1beta1) and drops none: a kind not served keeps an
// empty version and is recorded as missing.
func served(dc discovery.DiscoveryInterface) ([]Kind, error) {
	_, resources, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	// Preferred first: ServerGroupsAndResources lists each group's preferred version first.
	versions := map[string][]string{}
	for _, rl := range resources {
		gv, err := schema.ParseGroupVersion(rl.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range rl.APIResources {
			if !strings.Contains(r.Name, "/") {
				versions[gv.Group+"/"+r.Name] = append(versions[gv.Group+"/"+r.Name], gv.Version)
			}
		}
	}
	out := slices.Clone(Kinds)
	for i, k := range out {
		vs := versions[k.GVR.Group+"/"+k.GVR.Resource]
		switch {
		case k.GVR.Version != "" && slices.Contains(vs, k.GVR.Version):
		case k.GVR.Version == "" && len(vs) > 0:
			out[i].GVR.Version = newest(vs)
		default:
			out[i].GVR.Version = ""
		}
	}
	return out, nil
}

// newest is the most mature version: v1 over v1beta1 over v1alpha1.
func newest(vs []string) string {
	for _, want := range []string{"v1", "v1beta1", "v1alpha1"} {
		if slices.Contains(vs, want) {
			return want
		}
	}
	return vs[0]
}

func minorOf(major, minor, git string) string {
	if m := regexp.MustCompile(`^v?(\d+)\.(\d+)`).FindStringSubmatch(git); m != nil {
		return m[1] + "." + m[2]
	}
	return major + "." + strings.TrimSuffix(minor, "+")
}

type exporter struct {
	dyn dynamic.Interface
	// selectorless holds "namespace/name" of the Services without a selector: only their
	// Endpoints and EndpointSlices are hand-made, and copied.
	selectorless map[string]bool
	// defaultCIDRs is the ServiceCIDR "kubernetes"; apiserverRanges kube-apiserver's flag.
	defaultCIDRs, apiserverRanges []string
	apiserverSource               string
	kcmFlags                      []string
	kcmSource                     string
}

func (e *exporter) list(ctx context.Context, k Kind) ([]map[string]any, error) {
	if k.GVR.Version == "" {
		return nil, errNotServed
	}
	var out []map[string]any
	if k.GVR.Resource == "configmaps" {
		// Only the named ones are read (get): the others may hold anything.
		for _, name := range ConfigMaps {
			o, err := e.dyn.Resource(k.GVR).Namespace("kube-system").Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, e.keep(k, o))
		}
		return out, nil
	}
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := e.dyn.Resource(k.GVR).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			if obj := e.keep(k, &l.Items[i]); obj != nil {
				out = append(out, obj)
			}
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// keep says whether the snapshot holds o and returns it trimmed to what a twin needs and a
// reviewer reads: no server-set metadata, no owner references, status only where it matters.
func (e *exporter) keep(k Kind, o *unstructured.Unstructured) map[string]any {
	ns, name := o.GetNamespace(), o.GetName()
	switch k.GVR.Resource {
	case "configmaps":
		if ns != "kube-system" || !slices.Contains(ConfigMaps, name) {
			return nil
		}
	case "services":
		if sel, _, _ := unstructured.NestedMap(o.Object, "spec", "selector"); len(sel) == 0 {
			e.selectorless[ns+"/"+name] = true
		}
	case "endpoints":
		if !e.selectorless[ns+"/"+name] || (ns == "default" && name == "kubernetes") {
			return nil
		}
	case "endpointslices":
		// The controllers' slices are made again in the twin; only hand-made ones are copied.
		l := o.GetLabels()
		switch l["endpointslice.kubernetes.io/managed-by"] {
		case "endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io":
			return nil
		}
		if !e.selectorless[ns+"/"+l["kubernetes.io/service-name"]] || (ns == "default" && l["kubernetes.io/service-name"] == "kubernetes") {
			return nil
		}
	case "servicecidrs":
		if name == "kubernetes" {
			e.defaultCIDRs, _, _ = unstructured.NestedStringSlice(o.Object, "spec", "cidrs")
		}
	case "pods":
		e.controlPlaneFlags(o)
		// Workloads' pods are made again by the twin's controllers: only bare pods and the
		// mirror pods of static pods (owned by their Node) are copied.
		for _, ref := range o.GetOwnerReferences() {
			if ref.Kind != "Node" {
				return nil
			}
		}
	}
	obj := o.DeepCopy().Object
	md, _ := obj["metadata"].(map[string]any)
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "ownerReferences", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		delete(md, f)
	}
	redactAnnotations(md)
	switch k.GVR.Resource {
	case "pods":
		redactPodSpec(obj, controlPlaneFlag(o), "spec")
	case "deployments", "statefulsets", "daemonsets":
		redactAnnotations(nested(obj, "spec", "template", "metadata"))
		redactPodSpec(obj, nil, "spec", "template", "spec")
	}
	if !k.Status {
		delete(obj, "status")
	}
	return obj
}

// Redacted stands in for a value the snapshot leaves out.
const Redacted = "<redacted>"

// keptAnnotations are the annotations whose values the snapshot keeps, by prefix: the
// provider's own, and what kube-controller-manager, kubelet and Calico set and the twin may
// read. Every other annotation keeps its key, with its value Redacted: annotations are free
// text, and some tools keep credentials in them.
var keptAnnotations = []string{"k8scidr.io/", "kubectl.kubernetes.io/restartedAt", "kubernetes.io/config.",
	"projectcalico.org/", "cni.projectcalico.org/", "deprecated.daemonset.template.generation", "endpoints.kubernetes.io/",
	"service.kubernetes.io/"}

// redactAnnotations redacts the annotations of the object metadata md (keptAnnotations), and
// drops kubectl's last-applied configuration (the whole object again, unredacted) and the
// Deployment controller's revision.
func redactAnnotations(md map[string]any) {
	a, _ := md["annotations"].(map[string]any)
	if a == nil {
		return
	}
	delete(a, "kubectl.kubernetes.io/last-applied-configuration")
	delete(a, "deployment.kubernetes.io/revision")
	for key := range a {
		if !slices.ContainsFunc(keptAnnotations, func(p string) bool { return strings.HasPrefix(key, p) }) {
			a[key] = Redacted
		}
	}
	if len(a) == 0 {
		delete(md, "annotations")
	}
}

// redactPodSpec redacts, in the pod spec at path of obj, what its containers are told: each
// word of their command and args (but the flags kept says the provider reads), the literal
// value of each environment variable (its name and valueFrom stay: a reference, not a
// secret), and their probes' and lifecycle hooks' commands and HTTP headers, which the twin's
// kwok nodes never run. A literal password or --token= flag in a manifest never reaches the
// snapshot.
func redactPodSpec(obj map[string]any, kept func(string) bool, path ...string) {
	spec := nested(obj, path...)
	for _, field := range []string{"containers", "initContainers", "ephemeralContainers"} {
		cs, _ := spec[field].([]any)
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				redactContainer(cm, kept)
			}
		}
	}
}

// readFlags are the flags of kube-apiserver and kube-controller-manager that the provider's
// preflight reads from their static pods, and the twin takes (kcmFlags): the mirror pods keep
// them, so that the twin's plans find what the cluster's find.
var readFlags = []string{"--service-cluster-ip-range", "--cluster-cidr", "--allocate-node-cidrs", "--node-cidr-mask-size", "--feature-gates"}

// controlPlaneFlag says, for the mirror pod of kube-apiserver or kube-controller-manager, which
// words of its command line stay (readFlags); nil for any other pod.
func controlPlaneFlag(o *unstructured.Unstructured) func(string) bool {
	if controlPlaneComponent(o) == "" {
		return nil
	}
	return func(word string) bool {
		name, _, _ := strings.Cut(word, "=")
		return slices.ContainsFunc(slices.Concat(readFlags, kcmFlags), func(f string) bool {
			return strings.HasPrefix(name, strings.TrimSuffix(f, "="))
		})
	}
}

// nested is the map at path in obj, in place (nil where there is none).
func nested(obj map[string]any, path ...string) map[string]any {
	for _, p := range path {
		obj, _ = obj[p].(map[string]any)
	}
	return obj
}

func redactContainer(c map[string]any, kept func(string) bool) {
	redactWords := func(m map[string]any, field string) {
		if words, ok := m[field].([]any); ok {
			for i := range words {
				words[i] = Redacted
			}
		}
	}
	// A flag kept keeps its value, also as the next word ("--cluster-cidr 10.0.0.0/8").
	keepFlags := func(field string) {
		words, _ := c[field].([]any)
		valueOf := false
		for i, w := range words {
			word, _ := w.(string)
			if valueOf && !strings.HasPrefix(word, "-") {
				valueOf = false
				continue
			}
			if valueOf = strings.HasPrefix(word, "--") && kept(word); valueOf {
				valueOf = !strings.Contains(word, "=")
				continue
			}
			words[i] = Redacted
		}
	}
	if kept != nil {
		keepFlags("command")
		keepFlags("args")
	} else {
		redactWords(c, "command")
		redactWords(c, "args")
	}
	if env, ok := c["env"].([]any); ok {
		for _, e := range env {
			if em, ok := e.(map[string]any); ok {
				if _, literal := em["value"]; literal {
					em["value"] = Redacted
				}
			}
		}
	}
	handlers := []map[string]any{}
	for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		if m, ok := c[probe].(map[string]any); ok {
			handlers = append(handlers, m)
		}
	}
	if l, ok := c["lifecycle"].(map[string]any); ok {
		for _, hook := range []string{"postStart", "preStop"} {
			if m, ok := l[hook].(map[string]any); ok {
				handlers = append(handlers, m)
			}
		}
	}
	for _, h := range handlers {
		if exec, ok := h["exec"].(map[string]any); ok {
			redactWords(exec, "command")
		}
		if get, ok := h["httpGet"].(map[string]any); ok {
			if headers, ok := get["httpHeaders"].([]any); ok {
				for _, hd := range headers {
					if hm, ok := hd.(map[string]any); ok {
						hm["value"] = Redacted
					}
				}
			}
		}
	}
}

// controlPlaneComponent is "kube-apiserver" or "kube-controller-manager" for the mirror pod of
// either in kube-system (labelled component by kubeadm, k8s-app by kOps), else "".
func controlPlaneComponent(o *unstructured.Unstructured) string {
	component := o.GetLabels()["component"]
	if component == "" {
		component = o.GetLabels()["k8s-app"]
	}
	if o.GetNamespace() != "kube-system" || (component != "kube-apiserver" && component != "kube-controller-manager") {
		return ""
	}
	return component
}

// controlPlaneFlags records kube-apiserver's --service-cluster-ip-range and kube-controller-manager's
// command line from their static pods (kubeadm, kOps), where the credentials can read them.
func (e *exporter) controlPlaneFlags(o *unstructured.Unstructured) {
	component := controlPlaneComponent(o)
	if component == "" {
		return
	}
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "containers")
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		var line []string
		for _, f := range []string{"command", "args"} {
			s, _, _ := unstructured.NestedStringSlice(cm, f)
			line = append(line, s...)
		}
		// kOps runs the component under a shell: one string holds the command line.
		var flags []string
		for _, w := range line {
			for _, f := range strings.Fields(w) {
				if strings.HasPrefix(f, "--") {
					flags = append(flags, f)
				}
			}
		}
		if len(flags) == 0 {
			continue
		}
		source := "the command line of pod kube-system/" + o.GetName()
		if component == "kube-controller-manager" {
			// Only the flags the twin takes: the rest may name anything.
			e.kcmFlags, e.kcmSource = slices.DeleteFunc(flags, func(f string) bool {
				return !slices.ContainsFunc(kcmFlags, func(p string) bool { return strings.HasPrefix(f, p) })
			}), source
			return
		}
		for _, f := range flags {
			if v, ok := strings.CutPrefix(f, "--service-cluster-ip-range="); ok {
				e.apiserverRanges, e.apiserverSource = strings.Split(v, ","), "kube-apiserver's --service-cluster-ip-range in "+source
			}
		}
	}
}

func (e *exporter) serviceRanges() ([]string, string) {
	switch {
	case len(e.apiserverRanges) > 0:
		return e.apiserverRanges, e.apiserverSource
	case len(e.defaultCIDRs) > 0:
		return e.defaultCIDRs, "the default ServiceCIDR \"kubernetes\" (made from kube-apiserver's --service-cluster-ip-range)"
	}
	return nil, "not found: run the rehearsal with -service-cluster-ip-range"
}
