// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// One apply per journal: a coordination.k8s.io Lease held for the length of an apply.
package recreation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// journalLeaseDuration is how long a lease holds without renewal: an apply killed with -9
// blocks the next one of its journal group at most this long.
const journalLeaseDuration = 45 * time.Second

// leaseRenewEvery is how often the holder renews its lease: four times a duration.
var leaseRenewEvery = journalLeaseDuration / 4

// errJournalLeaseLost cancels an apply whose lease another apply took over (this one was too
// slow to renew it and was taken for dead).
var errJournalLeaseLost = errors.New("the journal's lease was taken over by another apply")

// createJournalNamespace creates the journal's namespace, which its Lease is the first object
// of. An identity that may not create namespaces (examples/rbac's apply role: the namespace is
// created with the role) is told to create it.
func createJournalNamespace(ctx context.Context, c *k8sops.Client, namespace string) error {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": c.FieldManager}}}, metav1.CreateOptions{FieldManager: c.FieldManager})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the journal's namespace %s does not exist, and this identity may not create it (%w): create it "+
			"(kubectl create namespace %s; examples/rbac creates it with the roles that write in it), or set journal_namespace "+
			"on the k8scidr_service_moves data source to a namespace that exists. Nothing was changed", namespace, err, namespace)
	}
	return fmt.Errorf("creating the journal's namespace %s: %w", namespace, err)
}

// LeaseName is the Lease that one apply of the journal holds.
func (j Journal) LeaseName() string { return "k8scidr-journal-" + j.group() }

// holdJournal takes the journal's Lease for this apply and renews it until release: two applies
// of one journal group (two configurations leaving journal_group unset, or a pipeline re-run
// while another still runs) would settle and delete each other's journal entries. A lease that
// has expired (its apply was killed) is taken over. The context returned is cancelled if the
// lease is lost.
func holdJournal(ctx context.Context, c *k8sops.Client, j Journal) (context.Context, func(), error) {
	api := c.Kube.CoordinationV1().Leases(j.Namespace)
	host, _ := os.Hostname()
	me := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.String(5))
	now := metav1.NewMicroTime(time.Now())
	want := coordinationv1.LeaseSpec{HolderIdentity: &me, LeaseDurationSeconds: ptr.To(int32(journalLeaseDuration / time.Second)),
		AcquireTime: &now, RenewTime: &now}
	var held *coordinationv1.Lease
	err := k8sops.RetryWrite(ctx, func(bool) error {
		var err error
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: j.LeaseName(),
			Labels: map[string]string{JournalLabel: j.group()}, Annotations: map[string]string{holderProcessAnnotation: processID()}},
			Spec: want}
		held, err = api.Create(ctx, lease, metav1.CreateOptions{FieldManager: c.FieldManager})
		if apierrors.IsNotFound(err) { // the journal's namespace, on a cluster's first recreation
			if err := createJournalNamespace(ctx, c, j.Namespace); err != nil {
				return err
			}
			held, err = api.Create(ctx, lease, metav1.CreateOptions{FieldManager: c.FieldManager})
		}
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		cur, err := api.Get(ctx, j.LeaseName(), metav1.GetOptions{})
		switch {
		case err != nil:
			return err
		case ptr.Deref(cur.Spec.HolderIdentity, "") == me:
			held = cur // an earlier attempt's write went through, its answer lost
			return nil
		}
		if holder, until, live := leaseLive(cur); live && !processGone(cur.Annotations[holderProcessAnnotation]) {
			return heldErr{fmt.Errorf("journal %s is in use by another apply (%s, lease %s/%s held until %s): two applies of one journal "+
				"group would settle and delete each other's entries. Nothing was changed. Wait for it to end and apply again, or give "+
				"each k8scidr_service_recreation its own journal_group", j, holder, j.Namespace, j.LeaseName(), until.UTC().Format(time.RFC3339))}
		}
		cur.Spec = want
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, holderProcessAnnotation, processID())
		held, err = api.Update(ctx, cur, metav1.UpdateOptions{FieldManager: c.FieldManager})
		return err
	}, apierrors.IsConflict) // read again: taken by another apply, or by this one's lost write
	var h heldErr
	switch {
	case errors.As(err, &h):
		return ctx, func() {}, h.error
	case apierrors.IsConflict(err):
		return ctx, func() {}, fmt.Errorf("journal %s: another apply took its lease at the same moment; nothing was changed: %w", j, err)
	case err != nil:
		return ctx, func() {}, fmt.Errorf("taking the lease %s/%s of journal %s: %w", j.Namespace, j.LeaseName(), j, err)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() {
		wait.Until(func() {
			mu.Lock()
			defer mu.Unlock()
			next := held.DeepCopy()
			renew := metav1.NewMicroTime(time.Now())
			next.Spec.RenewTime = &renew
			got, err := api.Update(lctx, next, metav1.UpdateOptions{FieldManager: c.FieldManager})
			switch {
			case err == nil:
				held = got
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				// Lost only if it names another holder now, or is gone: the conflict may be with
				// this apply's own earlier renewal, written with its answer lost.
				cur, err := api.Get(lctx, held.Name, metav1.GetOptions{})
				switch {
				case err == nil && ptr.Deref(cur.Spec.HolderIdentity, "") == me:
					held = cur // renewed at the next tick
				case err == nil || apierrors.IsNotFound(err):
					cancel(errJournalLeaseLost)
				}
			} // a transient failure is retried at the next tick, well within the duration
		}, leaseRenewEvery, stop)
	})
	release := func() {
		close(stop)
		wg.Wait()
		cancel(nil)
		mu.Lock()
		defer mu.Unlock()
		dctx, done := context.WithTimeout(context.WithoutCancel(ctx), interruptGrace)
		defer done()
		rv := held.ResourceVersion
		// Only the lease as this apply last wrote it: one taken over stays with its new holder.
		// Left behind (the apiserver did not answer), it expires, and the next apply on this
		// machine takes it over at once (holderProcessAnnotation).
		_ = k8sops.RetryWrite(dctx, func(again bool) error {
			err := api.Delete(dctx, held.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
			if again && apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	return lctx, release, nil
}

// holderProcessAnnotation names the process holding the lease (processID): an apply killed
// with -9, or one whose release failed (an apiserver outage), is not waited for by the next
// apply on the same machine, which is where a pipeline's next apply usually runs.
const holderProcessAnnotation = "k8scidr.io/holder-process"

// heldErr stops retryWrite: the lease is another apply's.
type heldErr struct{ error }

// leaseLive reports a lease's holder and until when it holds, and whether that is still ahead.
func leaseLive(l *coordinationv1.Lease) (holder string, until time.Time, live bool) {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", time.Time{}, false
	}
	renewed := l.CreationTimestamp.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	d := journalLeaseDuration
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	until = renewed.Add(d)
	return *l.Spec.HolderIdentity + ", since " + leaseTime(l.Spec.AcquireTime), until, time.Now().Before(until)
}

func leaseTime(t *metav1.MicroTime) string {
	if t == nil {
		return "?"
	}
	return t.UTC().Format(time.RFC3339)
}
