// A TEST DOUBLE of calico-ipam, kept only for IPPools served in projectcalico.org/v3 by the
// hand-written CRD (InstallCalicoV3IPPoolCRD): Calico's own IPAM (k8scidr-calico-ipam) reads
// pools from the crd.projectcalico.org/v1 CRDs, where Calico's API server would store them, so
// it cannot see those until the test cluster runs that API server. Everywhere else the tests
// use Calico's own IPAM (calicoipam.go).
//
// It behaves like calico-ipam as seen through the Kubernetes API:
//
//   - every new pod on a node (not hostNetwork) gets an address from an enabled pool whose
//     nodeSelector matches the node and whose allowedUses include Workload: first from a block
//     affine to the node, else from a newly claimed block (BlockAffinity + IPAMBlock of the
//     pool's blockSize), else borrowed from any block of an eligible pool;
//   - the IPAMBlock records it (allocations, unallocated, attributes with handle_id and the
//     pod, namespace and node), an IPAMHandle counts it, and the pod is annotated
//     cni.projectcalico.org/podIP(s) — the kwok pod-ready stage then makes that the pod's IP;
//   - the pod's addresses are released when it is deleted. Disabled pools are never used.
//
// IPv4 only; no IPReservations, no strictAffinity, no block garbage collection.
package testcluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// ipamDouble is the running test double of calico-ipam.
type ipamDouble struct {
	api    *k8sops.CalicoAPI
	c      *Cluster
	queue  workqueue.TypedRateLimitingInterface[string]
	pods   cache.Indexer
	cancel context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex // one assignment at a time, as calico-ipam's host-wide lock does

	errMu  sync.Mutex
	errors []string
}

// startIPAMDouble starts the double, reading IPPools in poolGroup; IPAM objects are always the
// v1 CRDs'.
func (c *Cluster) startIPAMDouble(ctx context.Context, poolGroup string) (*ipamDouble, error) {
	client, err := k8sops.NewClient(c.RESTConfig, "calico-ipam-test-double", poolGroup)
	if err != nil {
		return nil, err
	}
	api, err := k8sops.Calico(ctx, client)
	if err != nil {
		return nil, err
	}
	if api.Blocks == nil {
		return nil, fmt.Errorf("the cluster serves no IPAMBlocks: install the Calico CRDs first")
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ipam := &ipamDouble{
		api: api, c: c, cancel: cancel,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 2*time.Second)),
	}
	factory := informers.NewSharedInformerFactory(c.Kube, 0)
	inf := factory.Core().V1().Pods().Informer()
	ipam.pods = inf.GetIndexer()
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ipam.enqueuePod(obj) },
		UpdateFunc: func(_, obj any) { ipam.enqueuePod(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				ipam.queue.Add("release/" + string(p.UID))
			}
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	factory.Start(runCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("the calico-ipam double's pod cache did not sync")
	}
	ipam.done.Add(1)
	go func() {
		defer ipam.done.Done()
		for ipam.work(runCtx) {
		}
	}()
	go func() { <-runCtx.Done(); ipam.queue.ShutDown() }()
	return ipam, nil
}

// Stop ends the double and waits for its worker.
func (i *ipamDouble) Stop() {
	i.cancel()
	factoryWait := make(chan struct{})
	go func() { i.done.Wait(); close(factoryWait) }()
	select {
	case <-factoryWait:
	case <-time.After(10 * time.Second):
	}
}

// Errors returns what the double failed to do (each failure is retried; tests can assert none).
func (i *ipamDouble) Errors() []string {
	i.errMu.Lock()
	defer i.errMu.Unlock()
	return slices.Clone(i.errors)
}

func (i *ipamDouble) enqueuePod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" || p.Spec.HostNetwork || p.DeletionTimestamp != nil || p.Annotations[k8sops.AnnotationPodIP] != "" {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(p)
	if err == nil {
		i.queue.Add("assign/" + key)
	}
}

func (i *ipamDouble) work(ctx context.Context) bool {
	item, shutdown := i.queue.Get()
	if shutdown {
		return false
	}
	defer i.queue.Done(item)
	var err error
	switch kind, key, _ := strings.Cut(item, "/"); kind {
	case "assign":
		err = i.assignPod(ctx, key)
	case "release":
		i.mu.Lock()
		err = i.api.ReleaseHandle(ctx, podHandlePrefix+key)
		i.mu.Unlock()
	}
	if err != nil && ctx.Err() == nil {
		i.errMu.Lock()
		i.errors = append(i.errors, fmt.Sprintf("%s: %v", item, err))
		i.errMu.Unlock()
		i.queue.AddRateLimited(item)
		return true
	}
	i.queue.Forget(item)
	return true
}

func (i *ipamDouble) assignPod(ctx context.Context, key string) error {
	obj, exists, err := i.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("unexpected %T in the pod cache", obj)
	}
	if pod.DeletionTimestamp != nil || pod.Annotations[k8sops.AnnotationPodIP] != "" {
		return nil
	}
	if _, err := i.c.Kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil // bound to a node that is gone: no CNI will ever run for it
	}
	handle := podHandlePrefix + string(pod.UID)
	ip, err := i.assign(ctx, handle, pod.Spec.NodeName, apiv3.IPPoolAllowedUseWorkload,
		map[string]string{k8sops.AttrNamespace: pod.Namespace, k8sops.AttrPod: pod.Name, k8sops.AttrNode: pod.Spec.NodeName,
			"timestamp": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	cidr := netip.PrefixFrom(ip, ip.BitLen()).String()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, k8sops.AnnotationPodIP, cidr, k8sops.AnnotationPodIPs, cidr)
	_, err = i.c.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "calico-ipam-test-double"})
	if apierrors.IsNotFound(err) {
		i.mu.Lock()
		defer i.mu.Unlock()
		return i.api.ReleaseHandle(ctx, handle) // the pod went meanwhile: CNI DEL
	}
	return err
}

// AssignTunnel gives a node a tunnel address from an eligible pool, as calico-node does at
// start (handle ipip-tunnel-addr-<node> or vxlan-tunnel-addr-<node>).
func (i *ipamDouble) AssignTunnel(ctx context.Context, node, encap string) (netip.Addr, error) {
	return i.assign(ctx, encap+"-tunnel-addr-"+node, node, apiv3.IPPoolAllowedUseTunnel,
		map[string]string{k8sops.AttrNode: node, "type": encap + "TunnelAddress"})
}

// AssignLeaked records an allocation for a pod that does not exist, as a lost CNI DEL leaves
// behind.
func (i *ipamDouble) AssignLeaked(ctx context.Context, namespace, pod, node string) (netip.Addr, error) {
	return i.assign(ctx, podHandlePrefix+"leaked-"+namespace+"-"+pod, node, apiv3.IPPoolAllowedUseWorkload,
		map[string]string{k8sops.AttrNamespace: namespace, k8sops.AttrPod: pod, k8sops.AttrNode: node})
}

// assign picks an address for handle on node and records it.
func (i *ipamDouble) assign(ctx context.Context, handle, nodeName string, use apiv3.IPPoolAllowedUse, attrs map[string]string) (netip.Addr, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	node, err := i.c.Kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return netip.Addr{}, err
	}
	pools, err := i.api.ListIPPools(ctx)
	if err != nil {
		return netip.Addr{}, err
	}
	pools = slices.DeleteFunc(pools, func(p k8sops.IPPool) bool { return !eligible(p, node.Labels, use) })
	if len(pools) == 0 {
		return netip.Addr{}, fmt.Errorf("no enabled IPv4 IPPool for %s on node %s", use, nodeName)
	}
	inPools := func(p netip.Prefix) bool {
		return slices.ContainsFunc(pools, func(pool k8sops.IPPool) bool { return pool.Prefix().Contains(p.Addr()) })
	}
	blocks, err := i.api.ListBlocks(ctx)
	if err != nil {
		return netip.Addr{}, err
	}
	// 1. A block affine to the node with room.
	for _, b := range blocks {
		if b.Node == nodeName && inPools(b.CIDR) && len(b.Spec.Unallocated) > 0 {
			if ip, ok, err := i.allocate(ctx, b.Name, handle, attrs); err != nil || ok {
				return ip, err
			}
		}
	}
	// 2. Claim a new block.
	taken := map[netip.Prefix]bool{}
	for _, b := range blocks {
		taken[b.CIDR] = true
	}
	for _, p := range pools {
		for cidr := range blocksOf(p.Prefix(), p.Settings.BlockSize) {
			if taken[cidr] {
				continue
			}
			if claimed, err := i.claim(ctx, cidr, nodeName); err != nil {
				return netip.Addr{}, err
			} else if !claimed {
				continue
			}
			if ip, ok, err := i.allocate(ctx, k8sops.BlockName(cidr), handle, attrs); err != nil || ok {
				return ip, err
			}
		}
	}
	// 3. Borrow from any block of an eligible pool.
	for _, b := range blocks {
		if inPools(b.CIDR) && len(b.Spec.Unallocated) > 0 {
			if ip, ok, err := i.allocate(ctx, b.Name, handle, attrs); err != nil || ok {
				return ip, err
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("the eligible IPPools are full for node %s", nodeName)
}

// eligible is calico-ipam's pool choice: enabled, IPv4 here, automatic assignment, the use
// allowed, and the nodeSelector matching the node.
func eligible(p k8sops.IPPool, labels map[string]string, use apiv3.IPPoolAllowedUse) bool {
	if p.Spec.Disabled || !p.Prefix().IsValid() || !p.Prefix().Addr().Is4() {
		return false
	}
	if p.Spec.AssignmentMode != nil && *p.Spec.AssignmentMode == apiv3.Manual {
		return false
	}
	if len(p.Spec.AllowedUses) > 0 && !slices.Contains(p.Spec.AllowedUses, use) {
		return false
	}
	return selectorMatches(p.Spec.NodeSelector, labels)
}

// selectorMatches evaluates the subset of Calico's selector syntax the tests use: all(), !all(),
// has(k), k == 'v', k != 'v', joined by &&.
func selectorMatches(sel string, labels map[string]string) bool {
	for _, term := range strings.Split(sel, "&&") {
		term = strings.TrimSpace(term)
		unquote := func(s string) string { return strings.Trim(strings.TrimSpace(s), `'"`) }
		switch {
		case term == "" || term == "all()":
		case term == "!all()":
			return false
		case strings.HasPrefix(term, "has(") && strings.HasSuffix(term, ")"):
			if _, ok := labels[strings.TrimSpace(term[4:len(term)-1])]; !ok {
				return false
			}
		case strings.Contains(term, "!="):
			k, v, _ := strings.Cut(term, "!=")
			if labels[strings.TrimSpace(k)] == unquote(v) {
				return false
			}
		case strings.Contains(term, "=="):
			k, v, _ := strings.Cut(term, "==")
			if labels[strings.TrimSpace(k)] != unquote(v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// blocksOf yields the IPv4 blocks of size bits inside pool, in address order.
func blocksOf(pool netip.Prefix, bits int) func(func(netip.Prefix) bool) {
	return func(yield func(netip.Prefix) bool) {
		if !pool.Addr().Is4() || bits < pool.Bits() || bits > 32 {
			return
		}
		base := pool.Masked().Addr().As4()
		start := binary.BigEndian.Uint32(base[:])
		step := uint64(1) << (32 - bits)
		for off := uint64(0); off < uint64(1)<<(32-pool.Bits()); off += step {
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], start+uint32(off))
			if !yield(netip.PrefixFrom(netip.AddrFrom4(a), bits)) {
				return
			}
		}
	}
}

// claim creates the node's BlockAffinity and the empty IPAMBlock; false when another claim won.
func (i *ipamDouble) claim(ctx context.Context, cidr netip.Prefix, node string) (bool, error) {
	size := 1 << (32 - cidr.Bits())
	spec := apiv3.IPAMBlockSpec{
		CIDR: cidr.String(), Affinity: ptr.To("host:" + node),
		Allocations: make([]*int, size), Unallocated: make([]int, size), Attributes: []apiv3.AllocationAttribute{},
		SequenceNumberForAllocation: map[string]uint64{},
	}
	for n := range spec.Unallocated {
		spec.Unallocated[n] = n
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return false, err
	}
	ipamGV := i.api.IPAMGroup
	block := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ipamGV, "kind": "IPAMBlock", "metadata": map[string]any{"name": k8sops.BlockName(cidr)}, "spec": raw,
	}}
	if _, err := i.api.Blocks.Create(ctx, block, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("creating IPAMBlock %s: %w", cidr, err)
	}
	var deleted any = "false" // a string in the v1 CRD, for old releases' sake
	if !strings.HasPrefix(ipamGV, "crd.") {
		deleted = false
	}
	aff := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ipamGV, "kind": "BlockAffinity", "metadata": map[string]any{"name": node + "-" + k8sops.BlockName(cidr)},
		"spec": map[string]any{"state": "confirmed", "node": node, "cidr": cidr.String(), "deleted": deleted, "type": "host"},
	}}
	if _, err := i.api.Affinities.Create(ctx, aff, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("creating BlockAffinity for %s: %w", cidr, err)
	}
	return true, nil
}

// allocate takes the block's first unallocated ordinal for handle; false when the block is full.
func (i *ipamDouble) allocate(ctx context.Context, blockName, handle string, attrs map[string]string) (netip.Addr, bool, error) {
	var ip netip.Addr
	var cidr string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ip = netip.Addr{}
		u, err := i.api.Blocks.Get(ctx, blockName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var spec apiv3.IPAMBlockSpec
		raw, _, _ := unstructured.NestedMap(u.Object, "spec")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
			return err
		}
		if spec.Deleted || len(spec.Unallocated) == 0 {
			return nil
		}
		ord := spec.Unallocated[0]
		spec.Unallocated = spec.Unallocated[1:]
		spec.Attributes = append(spec.Attributes, apiv3.AllocationAttribute{HandleID: ptr.To(handle), ActiveOwnerAttrs: attrs})
		spec.Allocations[ord] = ptr.To(len(spec.Attributes) - 1)
		spec.SequenceNumber++
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
		if err != nil {
			return err
		}
		u.Object["spec"] = m
		if _, err := i.api.Blocks.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			return err
		}
		pfx := netip.MustParsePrefix(spec.CIDR).Masked()
		a := pfx.Addr().As4()
		binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(a[:])+uint32(ord))
		ip, cidr = netip.AddrFrom4(a), pfx.String()
		return nil
	})
	if err != nil || !ip.IsValid() {
		return ip, false, err
	}
	return ip, true, i.countHandle(ctx, handle, cidr)
}

// countHandle adds one address in cidr to the handle's IPAMHandle.
func (i *ipamDouble) countHandle(ctx context.Context, handle, cidr string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		name := strings.ToLower(handle)
		u, err := i.api.Handles.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			u = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": i.api.IPAMGroup, "kind": "IPAMHandle", "metadata": map[string]any{"name": name},
				"spec": map[string]any{"handleID": handle, "block": map[string]any{cidr: int64(1)}, "deleted": false},
			}}
			_, err = i.api.Handles.Create(ctx, u, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(schema.GroupResource{Group: "crd.projectcalico.org", Resource: "ipamhandles"}, name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		n, _, _ := unstructured.NestedInt64(u.Object, "spec", "block", cidr)
		if err := unstructured.SetNestedField(u.Object, n+1, "spec", "block", cidr); err != nil {
			return err
		}
		_, err = i.api.Handles.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
}
