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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// journalLeaseDuration is how long a lease holds without renewal: an apply killed with -9
// blocks the next one of its journal group at most this long.
var journalLeaseDuration = 45 * time.Second

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

// JournalLease is a journal's Lease as one apply holds it (HoldJournal).
type JournalLease struct {
	ctx     context.Context
	release func()
	mu      sync.Mutex
	renewed time.Time // when the last renewal that went through was sent, on this process's monotonic clock
}

// Context is cancelled once the lease is lost.
func (l *JournalLease) Context() context.Context { return l.ctx }

// Release gives the lease up: the next apply of the journal group takes it at once.
func (l *JournalLease) Release() { l.release() }

// Check says whether the apply may still delete: it may while its last renewal that went
// through was sent less than leaseTrust ago. Another apply takes the lease over only after
// seeing it unchanged for a full journalLeaseDuration of its own clock, which starts after that
// renewal was sent: a holder paused past its trust (SIGSTOP, a suspended runner, a throttled
// apiserver) stops before its next delete instead of deleting what the other has settled.
func (l *JournalLease) Check() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	since := time.Since(l.renewed)
	l.mu.Unlock()
	if err := context.Cause(l.ctx); errors.Is(err, errJournalLeaseLost) {
		return err // an interrupted apply still finishes its deletes in flight, within their grace
	}
	if since > leaseTrust() {
		return fmt.Errorf("%w: not renewed for %s (another apply may take it over after %s), so this apply stops before "+
			"its next delete; apply again to finish", errJournalLeaseUntrusted, since.Round(time.Second), journalLeaseDuration)
	}
	return nil
}

func (l *JournalLease) renewedAt(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewed = t
}

// errJournalLeaseUntrusted stops the deletes of an apply whose lease went unrenewed too long.
var errJournalLeaseUntrusted = errors.New("the journal's lease went unrenewed")

// leaseTrust is how long after its last renewal was sent a holder goes on deleting: two thirds
// of the duration, as client-go's leader election's renew deadline, leaving the rest for a
// delete in flight to land before another apply may take over.
func leaseTrust() time.Duration { return journalLeaseDuration * 2 / 3 }

// leaseWatchEvery is how often an apply waiting on another's lease reads it again.
var leaseWatchEvery = time.Second

// LeaseOptions are a HoldJournal's hooks.
type LeaseOptions struct {
	// Log receives a line while another apply's lease is waited on; nil discards.
	Log func(msg string, fields map[string]any)
	// Now is the clock written into the lease (acquire and renew times): a skew test's fault
	// hook; nil is time.Now. Nothing is judged by those times.
	Now func() time.Time
}

// HoldJournal takes the journal's Lease for this apply and renews it until Release: two applies
// of one journal group (two configurations leaving journal_group unset, or a pipeline re-run
// while another still runs) would settle and delete each other's journal entries. The apply
// reads the journal once it holds the lease, never before.
//
// A lease another apply holds is taken over only once this process has seen it unchanged for a
// full lease duration of its own monotonic clock (client-go's leader election does the same):
// the times in the lease are the holder's, whose clock may be minutes off. One whose holder
// ended on this machine (holderProcessAnnotation) is taken over at once. A lease that changes
// meanwhile is renewed by a live apply: this one is refused, having changed nothing.
func HoldJournal(ctx context.Context, c *k8sops.Client, j Journal, o LeaseOptions) (*JournalLease, error) {
	api := c.Kube.CoordinationV1().Leases(j.Namespace)
	host, _ := os.Hostname()
	me := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.String(5))
	now := o.Now
	if now == nil {
		now = time.Now
	}
	stamp := func() *metav1.MicroTime { t := metav1.NewMicroTime(now()); return &t }
	want := func() coordinationv1.LeaseSpec {
		t := stamp()
		return coordinationv1.LeaseSpec{HolderIdentity: &me, LeaseDurationSeconds: ptr.To(int32(journalLeaseDuration / time.Second)),
			AcquireTime: t, RenewTime: t}
	}
	var held *coordinationv1.Lease
	var sent time.Time
	err := k8sops.RetryWrite(ctx, func(bool) error {
		var err error
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: j.LeaseName(),
			Labels: map[string]string{JournalLabel: j.group()}, Annotations: map[string]string{holderProcessAnnotation: processID()}},
			Spec: want()}
		sent = time.Now()
		held, err = api.Create(ctx, lease, metav1.CreateOptions{FieldManager: c.FieldManager})
		if apierrors.IsNotFound(err) { // the journal's namespace, on a cluster's first recreation
			if err := createJournalNamespace(ctx, c, j.Namespace); err != nil {
				return err
			}
			sent = time.Now()
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
		if ptr.Deref(cur.Spec.HolderIdentity, "") != "" && !processGone(cur.Annotations[holderProcessAnnotation]) {
			if cur, err = waitStill(ctx, api, cur, j, o.Log); err != nil {
				return err
			}
		}
		cur.Spec = want()
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, holderProcessAnnotation, processID())
		sent = time.Now()
		held, err = api.Update(ctx, cur, metav1.UpdateOptions{FieldManager: c.FieldManager})
		return err
	}, apierrors.IsConflict) // read again: taken by another apply, or by this one's lost write
	var h heldErr
	switch {
	case errors.As(err, &h):
		return nil, h.error
	case apierrors.IsConflict(err):
		return nil, fmt.Errorf("journal %s: another apply took its lease at the same moment; nothing was changed: %w", j, err)
	case err != nil:
		return nil, fmt.Errorf("taking the lease %s/%s of journal %s: %w", j.Namespace, j.LeaseName(), j, err)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	l := &JournalLease{ctx: lctx, renewed: sent}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	// Renewed every leaseRenewEvery, and again a second after a renewal that failed for another
	// reason than the lease being lost: the trust runs out after two failed renewals otherwise.
	renew := func() (ok bool) {
		mu.Lock()
		defer mu.Unlock()
		next := held.DeepCopy()
		next.Spec.RenewTime = stamp()
		sent := time.Now()
		got, err := api.Update(lctx, next, metav1.UpdateOptions{FieldManager: c.FieldManager})
		switch {
		case err == nil:
			held = got
			l.renewedAt(sent)
			return true
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// Lost only if it names another holder now, or is gone: the conflict may be with
			// this apply's own earlier renewal, written with its answer lost.
			cur, err := api.Get(lctx, held.Name, metav1.GetOptions{})
			switch {
			case err == nil && ptr.Deref(cur.Spec.HolderIdentity, "") == me:
				held = cur // renewed at the next attempt
			case err == nil || apierrors.IsNotFound(err):
				cancel(errJournalLeaseLost)
			}
		}
		return false
	}
	wg.Go(func() {
		for every := leaseRenewEvery; ; {
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
			every = leaseRenewEvery
			if !renew() {
				every = min(every, leaseWatchEvery)
			}
		}
	})
	l.release = func() {
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
	return l, nil
}

// waitStill waits until cur, another apply's lease, has stayed unchanged for a full lease
// duration of this process's clock, and returns it as last read, to be taken over with its
// resourceVersion as the precondition. A lease renewed meanwhile is refused (heldErr); one
// released or taken by a third apply is returned to try again (a conflict).
func waitStill(ctx context.Context, api coordinationv1client.LeaseInterface, cur *coordinationv1.Lease, j Journal,
	log func(string, map[string]any)) (*coordinationv1.Lease, error) {
	d := journalLeaseDuration
	if s := ptr.Deref(cur.Spec.LeaseDurationSeconds, 0); time.Duration(s)*time.Second > d {
		d = time.Duration(s) * time.Second
	}
	if log != nil {
		log("waiting for another apply's journal lease to go unrenewed", map[string]any{"lease": j.Namespace + "/" + j.LeaseName(),
			"holder": ptr.Deref(cur.Spec.HolderIdentity, ""), "wait": d.String()})
	}
	seen, since := cur.ResourceVersion, time.Now()
	for time.Since(since) < d {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(leaseWatchEvery):
		}
		next, err := api.Get(ctx, j.LeaseName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, apierrors.NewConflict(coordinationv1.Resource("leases"), j.LeaseName(), errors.New("released"))
		case err != nil:
			continue // read again; the wait goes on by this clock
		case next.ResourceVersion == seen && equality.Semantic.DeepEqual(next.Spec, cur.Spec):
			continue
		case ptr.Deref(next.Spec.HolderIdentity, "") == ptr.Deref(cur.Spec.HolderIdentity, ""):
			return nil, heldErr{fmt.Errorf("journal %s is in use by another apply (%s, lease %s/%s, renewed while this apply "+
				"waited): two applies of one journal group would settle and delete each other's entries. Nothing was changed. "+
				"Wait for it to end and apply again, or give each k8scidr_service_recreation its own journal_group",
				j, holderText(next), j.Namespace, j.LeaseName())}
		default:
			return nil, apierrors.NewConflict(coordinationv1.Resource("leases"), j.LeaseName(), errors.New("taken by another apply"))
		}
	}
	return cur, nil
}

// holderProcessAnnotation names the process holding the lease (processID): an apply killed
// with -9, or one whose release failed (an apiserver outage), is not waited for by the next
// apply on the same machine, which is where a pipeline's next apply usually runs.
const holderProcessAnnotation = "k8scidr.io/holder-process"

// heldErr stops retryWrite: the lease is another apply's.
type heldErr struct{ error }

// holderText names a lease's holder and since when it holds it, by the holder's clock.
func holderText(l *coordinationv1.Lease) string {
	return ptr.Deref(l.Spec.HolderIdentity, "") + ", since " + leaseTime(l.Spec.AcquireTime)
}

func leaseTime(t *metav1.MicroTime) string {
	if t == nil {
		return "?"
	}
	return t.UTC().Format(time.RFC3339)
}
