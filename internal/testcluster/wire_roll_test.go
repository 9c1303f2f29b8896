// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
)

// udpTimeout is the namespace's nf_conntrack_udp_timeout: how long a UDP flow seen one way
// at a time (a DNS query and its answer) keeps its conntrack entry, and so its NAT binding.
const udpTimeout = "/proc/sys/net/netfilter/nf_conntrack_udp_timeout"

// TestWire_coreDNSRoll names the mechanism behind the resolver failures of CoreDNS's own roll
// (the migration's stages 3 and 5; docs/guides/zero-downtime.md): a query whose random source
// port matches a UDP conntrack entry still alive (30 s) from an earlier query follows that
// entry's NAT binding to the CoreDNS pod it chose then; when that pod has just gone, the query
// is lost until kube-proxy's next sync deletes the entries of the removed endpoint
// (pkg/proxy/conntrack). It rolls the cluster DNS Deployment under the resolver clients with
// the kernel's default UDP timeout (failures are logged, not asserted: they are rare), then
// with a 1 s timeout, under which no entry outlives the pod it binds to: no client may fail.
// Opt-in (make test-wire): two minutes.
func TestWire_coreDNSRoll(t *testing.T) {
	if RerunIsolated(t) {
		return
	}
	def, err := os.ReadFile(udpTimeout)
	if err != nil {
		t.Fatalf("the namespace's UDP conntrack timeout: %v", err)
	}
	c, w, seed := startWire(t, WireOptions{Corefile: CorefileKOps}, 13, 3*time.Second)
	ctx := context.Background()

	f := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace("kube-system"))
	dnsPods := f.Core().V1().Pods().Lister().Pods("kube-system")
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	f.WaitForCacheSync(stop)
	dnsSelector := labels.SelectorFromSet(labels.Set{"k8s-app": "kube-dns"})

	arm := func(name string, rolls int) *WireReport {
		start := time.Now()
		cl, err := w.StartClients(ctx, ClientOptions{Services: seed.Services})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Stop()
		for i := range rolls {
			patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"roll":"%s-%d"}}}}}`, name, i)
			if _, err := c.Kube.AppsV1().Deployments("kube-system").Patch(ctx, "coredns", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			// Rolled once only the new pods are left: the old ones terminated (3 s) and went.
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, false, func(context.Context) (bool, error) {
				pods, err := dnsPods.List(dnsSelector)
				return err == nil && len(pods) == 2 && !slices.ContainsFunc(pods, func(p *corev1.Pod) bool {
					return p.DeletionTimestamp != nil || p.Annotations["roll"] != fmt.Sprintf("%s-%d", name, i)
				}), nil
			}); err != nil {
				t.Fatalf("%s: roll %d of coredns did not finish: %v", name, i, err)
			}
			time.Sleep(2 * time.Second) // past kube-proxy's sync after the removals
		}
		r := cl.Stop()
		removed := slices.DeleteFunc(w.Gone("kube-system/coredns-"), func(at time.Time) bool { return at.Before(start) })
		var late time.Duration // the longest a failure came after the last removal before it
		for _, fl := range r.Kinds[ClientOldResolver].Failures {
			i, _ := slices.BinarySearchFunc(removed, fl.At, func(a, b time.Time) int { return a.Compare(b) })
			if i == 0 {
				t.Errorf("%s: a resolver failure before any CoreDNS pod was removed: %+v", name, fl)
				continue
			}
			late = max(late, fl.At.Sub(removed[i-1]))
		}
		t.Logf("%s, %d rolls of coredns (%d pods removed), the failures at most %v after a removal:\n%s",
			name, rolls, len(removed), late.Round(time.Millisecond), r)
		for _, k := range []ClientKind{ClientKeptIP, ClientServiceHost} {
			if n := r.Failed(k); n != 0 {
				t.Errorf("%s: %s failed %d times: only UDP flows keep a binding from an earlier request", name, k, n)
			}
		}
		return r
	}
	arm(fmt.Sprintf("UDP conntrack timeout %ss (the default)", strings.TrimSpace(string(def))), 8)

	if err := os.WriteFile(udpTimeout, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(31 * time.Second) // the entries made under the default time out
	if r := arm("UDP conntrack timeout 1s", 8); r.Failed(ClientOldResolver) != 0 {
		t.Errorf("resolvers failed in CoreDNS's roll although no UDP conntrack entry outlived 1 s: a mechanism other than stale NAT bindings")
	}
}
