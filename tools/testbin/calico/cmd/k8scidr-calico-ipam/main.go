// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Command k8scidr-calico-ipam gives the test cluster's pods their addresses through Calico's own
// IPAM library (libcalico-go/lib/ipam on the Kubernetes datastore), doing around it what
// Calico's CNI plugin (cni-plugin/pkg/ipamplugin and pkg/k8s) does on a real node:
//
//   - ADD, for every pod bound to a node that is not hostNetwork: pools from the
//     cni.projectcalico.org/ipv4pools annotation of the pod, else of its namespace (names or
//     CIDRs, as utils.ResolvePools takes them), the namespace for namespaceSelector, handle
//     k8s-pod-network.<id> (the pod UID stands in for the container ID), attributes node,
//     namespace, pod and timestamp, intended use Workload; the address is written to the pod's
//     cni.projectcalico.org/podIP(s) annotations, which the kwok stage turns into its IP;
//   - DEL when the pod is gone: ReleaseByHandle.
//
// At start it initializes the datastore as calico-node and calico-kube-controllers do
// (EnsureInitialized: the ClusterInformation with this build's Calico version, and the default
// tiers; the default KubeControllersConfiguration), which calicoctl's ipam check needs.
//
// The block layout, affinities, handles and pool choice are all Calico's. Usage:
//
//	k8scidr-calico-ipam run -kubeconfig F
//	k8scidr-calico-ipam assign -kubeconfig F -handle H -node N [-use Workload|Tunnel] [-pools P,…] [-attr k=v]… [-node-annotation A]
//
// run works until SIGTERM; each failure is printed as a line starting "error: " and retried.
// assign is one AutoAssign (as calico-node does for tunnel addresses, or to leave a leaked
// allocation behind) and prints the address; with -node-annotation it also records the address
// on the node as calico-node records its tunnel address on the Kubernetes datastore (e.g.
// projectcalico.org/IPv4IPIPTunnelAddr).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	v3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	kccconfig "github.com/projectcalico/calico/kube-controllers/pkg/config"
	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	client "github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"github.com/projectcalico/calico/pkg/buildinfo"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

const (
	handlePrefix      = "k8s-pod-network."
	annotationPools   = "cni.projectcalico.org/ipv4pools"
	annotationPodIP   = "cni.projectcalico.org/podIP"
	annotationPodIPs  = "cni.projectcalico.org/podIPs"
	fieldManager      = "k8scidr-calico-ipam"
	workers           = 4
	requestTimeout    = 30 * time.Second
	retryBaseInterval = 50 * time.Millisecond
	retryMaxInterval  = 2 * time.Second
)

type attrs map[string]string

func (a attrs) String() string { return fmt.Sprint(map[string]string(a)) }
func (a attrs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q: want key=value", s)
	}
	a[k] = v
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: k8scidr-calico-ipam run|assign -kubeconfig F …"))
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	handle := fs.String("handle", "", "assign: the IPAM handle")
	node := fs.String("node", "", "assign: the node (Calico hostname)")
	use := fs.String("use", string(v3.IPPoolAllowedUseWorkload), "assign: the intended use (Workload or Tunnel)")
	pools := fs.String("pools", "", "assign: comma-separated pool names or CIDRs (default: every eligible pool)")
	nodeAnnotation := fs.String("node-annotation", "", "assign: the node annotation to record the address in")
	extra := attrs{}
	fs.Var(extra, "attr", "assign: an allocation attribute key=value (repeatable)")
	_ = fs.Parse(os.Args[2:])
	logrus.SetLevel(logrus.WarnLevel)

	cfg := apiconfig.NewCalicoAPIConfig()
	cfg.Spec.DatastoreType = apiconfig.Kubernetes
	cfg.Spec.Kubeconfig = *kubeconfig
	// The CNI plugin is a new process per ADD or DEL, each with a fresh client-side limiter
	// (QPS 5, burst 100); one long-running process must not share one limiter across pods.
	cfg.Spec.K8sClientQPS = 1000
	calico, err := client.New(*cfg)
	if err != nil {
		fail(err)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	restConfig.QPS, restConfig.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := initialize(ctx, calico); err != nil {
			fail(fmt.Errorf("initializing the datastore: %w", err))
		}
		if err := run(ctx, &cni{calico: calico, kube: kube}); err != nil {
			fail(err)
		}
	case "assign":
		if *handle == "" || *node == "" {
			fail(errors.New("assign needs -handle and -node"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		var names []string
		if *pools != "" {
			names = strings.Split(*pools, ",")
		}
		ip, err := (&cni{calico: calico, kube: kube}).assign(ctx, *handle, *node, v3.IPPoolAllowedUse(*use), names, nil, extra)
		if err != nil {
			fail(err)
		}
		if *nodeAnnotation != "" {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, *nodeAnnotation, ip)
			if _, err := kube.CoreV1().Nodes().Patch(ctx, *node, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
				fail(err)
			}
		}
		fmt.Println(ip)
	default:
		fail(fmt.Errorf("unknown command %q: use run or assign", os.Args[1]))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "k8scidr-calico-ipam:", err)
	os.Exit(1)
}

// initialize does what calico-node and calico-kube-controllers do to a new datastore.
func initialize(ctx context.Context, calico client.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	// Older releases' CRD sets (3.28) have no Tier: what they lack is not initialized, but the
	// ClusterInformation must be there.
	if err := calico.EnsureInitialized(ctx, buildinfo.Version, "k8s"); err != nil {
		if _, getErr := calico.ClusterInformation().Get(ctx, "default", options.GetOptions{}); getErr != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "initializing the datastore, left out: %v\n", err)
	}
	_, err := calico.KubeControllersConfiguration().Create(ctx, kccconfig.NewDefaultKubeControllersConfig(), options.SetOptions{})
	var exists cerrors.ErrorResourceAlreadyExists
	if errors.As(err, &exists) {
		return nil
	}
	return err
}

// cni is the part of the CNI plugin that talks to IPAM.
type cni struct {
	calico client.Interface
	kube   kubernetes.Interface
	pods   cache.Indexer
}

// run assigns and releases pod addresses until ctx ends.
func run(ctx context.Context, c *cni) error {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBaseInterval, retryMaxInterval))
	factory := informers.NewSharedInformerFactory(c.kube, 0)
	inf := factory.Core().V1().Pods().Informer()
	c.pods = inf.GetIndexer()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && needsAddress(p) {
			if key, err := cache.MetaNamespaceKeyFunc(p); err == nil {
				queue.Add("add/" + key)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok && !p.Spec.HostNetwork {
				queue.Add("del/" + string(p.UID))
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errors.New("the pod cache did not sync")
	}
	fmt.Fprintln(os.Stderr, "k8scidr-calico-ipam running")
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for c.work(ctx, queue) {
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	for range workers {
		<-done
	}
	return nil
}

func needsAddress(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && !p.Spec.HostNetwork && p.DeletionTimestamp == nil && p.Annotations[annotationPodIP] == ""
}

func (c *cni) work(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	item, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(item)
	reqCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var err error
	switch verb, key, _ := strings.Cut(item, "/"); verb {
	case "add":
		err = c.add(reqCtx, key)
	case "del":
		err = c.release(reqCtx, handlePrefix+key)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "error: %s: %v\n", item, err)
		queue.AddRateLimited(item)
		return true
	}
	queue.Forget(item)
	return true
}

// add is CNI ADD for the pod at key.
func (c *cni) add(ctx context.Context, key string) error {
	obj, exists, err := c.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	if !needsAddress(pod) {
		return nil
	}
	if _, err := c.kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil // bound to a node that is gone: no CNI will ever run for it
	}
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, pod.Namespace, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pools, err := poolAnnotation(pod, ns)
	if err != nil {
		return err
	}
	handle := handlePrefix + string(pod.UID)
	ip, err := c.assign(ctx, handle, pod.Spec.NodeName, v3.IPPoolAllowedUseWorkload, pools, ns,
		attrs{ipam.AttributeNamespace: pod.Namespace, ipam.AttributePod: pod.Name})
	if err != nil {
		return err
	}
	cidr := ip + "/32"
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, annotationPodIP, cidr, annotationPodIPs, cidr)
	_, err = c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsNotFound(err) {
		return c.release(ctx, handle) // the pod went meanwhile: DEL
	}
	return err
}

// poolAnnotation is the pod's, else its namespace's, cni.projectcalico.org/ipv4pools list.
func poolAnnotation(pod *corev1.Pod, ns *corev1.Namespace) ([]string, error) {
	raw := ns.Annotations[annotationPools]
	if v := pod.Annotations[annotationPools]; v != "" {
		raw = v
	}
	if raw == "" {
		return nil, nil
	}
	var pools []string
	if err := json.Unmarshal([]byte(raw), &pools); err != nil {
		return nil, fmt.Errorf("annotation %s=%s: %w", annotationPools, raw, err)
	}
	return pools, nil
}

// assign is one AutoAssign of an IPv4 address for handle on node. An address the handle
// already holds is returned again, as a repeated CNI ADD for the same container gets it.
func (c *cni) assign(ctx context.Context, handle, node string, use v3.IPPoolAllowedUse, poolNames []string, ns *corev1.Namespace, extra attrs) (string, error) {
	if held, err := c.calico.IPAM().IPsByHandle(ctx, handle); err == nil && len(held) > 0 {
		return held[0].String(), nil
	} else if err != nil && !isNotExist(err) {
		return "", err
	}
	pools, err := c.resolvePools(ctx, poolNames)
	if err != nil {
		return "", err
	}
	a := attrs{ipam.AttributeNode: node, ipam.AttributeTimestamp: time.Now().UTC().String()}
	for k, v := range extra {
		a[k] = v
	}
	v4, _, err := c.calico.IPAM().AutoAssign(ctx, ipam.AutoAssignArgs{
		Num4: 1, HandleID: &handle, Hostname: node, IPv4Pools: pools, Attrs: a, IntendedUse: use, Namespace: ns,
	})
	if err != nil {
		return "", err
	}
	if v4 == nil || len(v4.IPs) == 0 {
		return "", fmt.Errorf("no IPv4 address for %s on node %s: %v", handle, node, v4)
	}
	return v4.IPs[0].IP.String(), nil
}

// resolvePools turns pool names or CIDRs into CIDRs, as the CNI plugin's utils.ResolvePools does.
func (c *cni) resolvePools(ctx context.Context, names []string) ([]cnet.IPNet, error) {
	if len(names) == 0 {
		return nil, nil
	}
	list, err := c.calico.IPPools().List(ctx, options.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []cnet.IPNet
	for _, p := range names {
		_, cidr, err := net.ParseCIDR(p)
		if err != nil {
			for _, pool := range list.Items {
				if pool.Name == p {
					_, cidr, err = net.ParseCIDR(pool.Spec.CIDR)
				}
			}
			if cidr == nil {
				return nil, fmt.Errorf("error parsing pool %q: %v", p, err)
			}
		}
		if cidr.IP.To4() == nil {
			return nil, fmt.Errorf("%q isn't a IPv4 address", cidr.IP)
		}
		out = append(out, cnet.IPNet{IPNet: *cidr})
	}
	return out, nil
}

// release is CNI DEL: the handle's addresses go back to their blocks; a handle already gone is
// fine.
func (c *cni) release(ctx context.Context, handle string) error {
	if err := c.calico.IPAM().ReleaseByHandle(ctx, handle); err != nil && !isNotExist(err) {
		return err
	}
	return nil
}

func isNotExist(err error) bool {
	var notExist cerrors.ErrorResourceDoesNotExist
	return errors.As(err, &notExist)
}
