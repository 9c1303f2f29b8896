// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Progress of a long apply where people look: Kubernetes Events on the journal's Lease, which
// `kubectl get events -n <journal_namespace> -w` shows while Terraform prints only "Still
// creating…".
package recreation

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultProgressEvery is how often a running apply reports its progress.
const DefaultProgressEvery = 10 * time.Second

// Reasons of the progress Events.
const (
	ProgressReason = "RecreationProgress"
	FinishedReason = "RecreationFinished"
	FailedReason   = "RecreationFailed"
)

// progressCounts is where an apply stands: Services settled (moved or restored), planned moves
// that no longer held, and the total planned.
type progressCounts struct {
	done, notMoved, total int
	elapsed               time.Duration
}

// text is the message of a progress Event: done/total, the rate, the time left at that
// rate, and what did not move.
func (p progressCounts) text() string {
	handled := p.done + p.notMoved
	parts := []string{fmt.Sprintf("%d of %d Services moved", p.done, p.total)}
	if p.notMoved > 0 {
		parts[0] += fmt.Sprintf(", %d not moved (no longer held)", p.notMoved)
	}
	secs := p.elapsed.Seconds()
	if secs > 0 && handled > 0 {
		rate := float64(handled) / secs
		parts = append(parts, fmt.Sprintf("%.1f/s", rate))
		if left := p.total - handled; left > 0 {
			parts = append(parts, fmt.Sprintf("about %s left", (time.Duration(float64(left)/rate)*time.Second).Round(time.Second)))
		}
	}
	parts = append(parts, fmt.Sprintf("%s elapsed", p.elapsed.Round(time.Second)))
	return strings.Join(parts, ", ")
}

// counts reads the executor's progress.
func (x *executor) counts(total int, start time.Time) progressCounts {
	x.mu.Lock()
	defer x.mu.Unlock()
	return progressCounts{done: len(x.res.Recreated), notMoved: len(x.res.NotMoved), total: total, elapsed: time.Since(start)}
}

// reportProgress posts a progress Event every `every` until the returned function is called
// with the apply's outcome, which posts the last one (finished, or failed with the error) and
// returns the finished line ("" for a failed run: its error says it). An Event that
// cannot be written is noted once and never fails the apply.
func (x *executor) reportProgress(ctx context.Context, total int, every time.Duration) func(error) string {
	if every <= 0 {
		every = DefaultProgressEvery
	}
	start := time.Now()
	lease := corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: x.o.Journal.Namespace,
		Name: x.o.Journal.LeaseName()}
	if l, err := x.c.Kube.CoordinationV1().Leases(lease.Namespace).Get(ctx, lease.Name, metav1.GetOptions{}); err == nil {
		lease.UID = l.UID // kubectl describe lease finds its Events by UID
	}
	var once sync.Once
	post := func(ctx context.Context, typ, reason, msg string) {
		now := metav1.Now()
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", lease.Name, now.UnixNano()), Namespace: lease.Namespace},
			InvolvedObject: lease, Type: typ, Reason: reason, Message: msg, Count: 1,
			FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "k8scidr"},
		}
		if _, err := x.c.Kube.CoreV1().Events(lease.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			once.Do(func() {
				x.note("Progress Events on %s/%s could not be written (%v); the apply goes on without them.", lease.Namespace, lease.Name, err)
			})
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				post(ctx, corev1.EventTypeNormal, ProgressReason, x.counts(total, start).text())
			}
		}
	})
	return func(err error) string {
		close(stop)
		wg.Wait()
		c := x.counts(total, start)
		x.log("recreation finished", map[string]any{"moved": c.done, "not_moved": c.notMoved, "total": c.total,
			"elapsed_ms": c.elapsed.Milliseconds()})
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err != nil {
			msg := err.Error()
			if len(msg) > 512 { // an Event's message is meant to be short: the apply's diagnostics hold the rest
				msg = msg[:512] + "…"
			}
			post(pctx, corev1.EventTypeWarning, FailedReason, "Stopped: "+c.text()+": "+msg)
			return ""
		}
		post(pctx, corev1.EventTypeNormal, FinishedReason, "Finished: "+c.text())
		return "Finished: " + c.text() // the outcome in one line at the end, too
	}
}
