// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// TestHoldJournalLostAnswers: a write of the lease whose answer was lost (the apiserver did it,
// the client saw an error) is this apply's, not another's: the create retried finds the lease
// naming this apply and holds it, and a renewal refused as a conflict with the apply's own
// earlier renewal keeps it. Only a lease naming another holder is lost. The fault suite found
// both: an apply cancelled itself ("taken over by another apply") under lost answers and 409s.
func TestHoldJournalLostAnswers(t *testing.T) {
	defer func(d time.Duration) { leaseRenewEvery = d }(leaseRenewEvery)
	leaseRenewEvery = 20 * time.Millisecond
	client := fake.NewClientset()
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	var creates, updates atomic.Int32
	var writing sync.Mutex
	client.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) == 1 { // written, answer lost
			obj := a.(k8stesting.CreateAction).GetObject()
			if err := client.Tracker().Create(leases.WithVersion("v1"), obj, "kube-system"); err != nil {
				return true, nil, err
			}
			return true, nil, apierrors.NewServerTimeout(leases, "create", 1)
		}
		return false, nil, nil
	})
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if updates.Add(1) <= 2 { // two renewals refused as conflicts: the lease still names this apply
			return true, nil, apierrors.NewConflict(leases, "k8scidr-journal-default", errors.New("injected"))
		}
		// The fake keeps no resourceVersions: a renewal of a lease another apply has taken
		// conflicts, as it does on an apiserver. The check and the write are one step under
		// writing, as the takeover below is: a renewal read before the takeover must not
		// overwrite it after (the fake's last writer would win; an apiserver's would conflict).
		writing.Lock()
		defer writing.Unlock()
		next := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		cur, err := client.Tracker().Get(leases.WithVersion("v1"), "kube-system", next.Name)
		if err == nil && ptr.Deref(cur.(*coordinationv1.Lease).Spec.HolderIdentity, "") != ptr.Deref(next.Spec.HolderIdentity, "") {
			return true, nil, apierrors.NewConflict(leases, next.Name, errors.New("the object has been modified"))
		}
		if err := client.Tracker().Update(leases.WithVersion("v1"), next, "kube-system"); err != nil {
			return true, nil, err
		}
		return true, next, nil
	})
	c := &k8sops.Client{Kube: client, FieldManager: "k8scidr"}
	j := Journal{Namespace: "kube-system", Group: DefaultJournalGroup}
	held, err := HoldJournal(context.Background(), c, j, LeaseOptions{})
	if err != nil {
		t.Fatalf("taking the lease after a lost answer: %v", err)
	}
	ctx, release := held.Context(), held.Release
	for updates.Load() < 4 {
		time.Sleep(leaseRenewEvery)
	}
	if ctx.Err() != nil {
		t.Fatalf("the apply took its own renewals for another's: %v", context.Cause(ctx))
	}
	// Another apply takes it over: lost.
	api := client.CoordinationV1().Leases("kube-system")
	l, err := api.Get(context.Background(), j.LeaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To("elsewhere/1/abcde")
	l.ResourceVersion = ""
	writing.Lock()
	err = client.Tracker().Update(leases.WithVersion("v1"), l, "kube-system")
	writing.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), errJournalLeaseLost) {
			t.Errorf("cancelled by %v, want errJournalLeaseLost", context.Cause(ctx))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lease naming another holder was not taken for lost")
	}
	release()
}

// TestHoldJournalOwnClock: a lease another apply holds is judged by this process's clock, never
// by the times in it, which are the holder's. A holder whose clock runs two minutes behind
// writes renewal times that look expired: while it renews, the taker is refused. One that
// stopped renewing (paused, or killed elsewhere) is taken over once it stayed unchanged a full
// duration, even with times two minutes ahead that look live. The holder, once its renewals
// stop going through, stops deleting (Check) before the taker may take over.
func TestHoldJournalOwnClock(t *testing.T) {
	defer func(d, r, w time.Duration) { journalLeaseDuration, leaseRenewEvery, leaseWatchEvery = d, r, w }(
		journalLeaseDuration, leaseRenewEvery, leaseWatchEvery)
	journalLeaseDuration, leaseRenewEvery, leaseWatchEvery = 600*time.Millisecond, 150*time.Millisecond, 20*time.Millisecond
	j := Journal{Namespace: "k8scidr-journal", Group: DefaultJournalGroup}
	for _, skew := range []time.Duration{-2 * time.Minute, 2 * time.Minute} {
		client := fake.NewClientset()
		var paused atomic.Bool
		var holderID atomic.Value
		client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
			if paused.Load() && holderID.Load() == ptr.Deref(l.Spec.HolderIdentity, "") { // the holder's renewals no longer go through
				return true, nil, apierrors.NewServerTimeout(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "update", 1)
			}
			return false, nil, nil
		})
		c := &k8sops.Client{Kube: client, FieldManager: "k8scidr"}
		holder, err := HoldJournal(context.Background(), c, j, LeaseOptions{Now: func() time.Time { return time.Now().Add(skew) }})
		if err != nil {
			t.Fatal(err)
		}
		if l, err := client.CoordinationV1().Leases(j.Namespace).Get(context.Background(), j.LeaseName(), metav1.GetOptions{}); err == nil {
			holderID.Store(ptr.Deref(l.Spec.HolderIdentity, ""))
		}
		// Another process: processGone never says so of a lease whose annotation names none.
		strip := func() {
			l, err := client.CoordinationV1().Leases(j.Namespace).Get(context.Background(), j.LeaseName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			delete(l.Annotations, holderProcessAnnotation)
			if err := client.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), l, j.Namespace); err != nil {
				t.Fatal(err)
			}
		}
		strip()
		if skew < 0 {
			start := time.Now()
			_, err := HoldJournal(context.Background(), c, j, LeaseOptions{})
			if err == nil || !strings.Contains(err.Error(), "is in use by another apply") {
				t.Errorf("skew %s: a renewing holder's lease: %v, want refused", skew, err)
			}
			if d := time.Since(start); d > journalLeaseDuration {
				t.Errorf("skew %s: refused after %s, want within a renewal (%s)", skew, d, leaseRenewEvery)
			}
			if err := holder.Check(); err != nil {
				t.Errorf("skew %s: the renewing holder: %v", skew, err)
			}
			holder.Release()
			continue
		}
		paused.Store(true)
		start := time.Now()
		taker, err := HoldJournal(context.Background(), c, j, LeaseOptions{})
		if err != nil {
			t.Fatalf("skew %s: a lease left unrenewed: %v", skew, err)
		}
		if d := time.Since(start); d < journalLeaseDuration {
			t.Errorf("skew %s: taken over after %s, before a full duration (%s) of the taker's clock", skew, d, journalLeaseDuration)
		}
		if err := holder.Check(); !errors.Is(err, errJournalLeaseUntrusted) && !errors.Is(err, errJournalLeaseLost) {
			t.Errorf("skew %s: the paused holder may still delete: %v", skew, err)
		}
		if err := taker.Check(); err != nil {
			t.Errorf("skew %s: the taker: %v", skew, err)
		}
		taker.Release()
		holder.Release()
	}
}
