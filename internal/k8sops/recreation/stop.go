// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Stopping a run early without losing anything: a kube-controller-manager that writes no
// EndpointSlices, and an apply interrupted while moves are between delete and create.
package recreation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// stallAfter is how many moves in a row may end without their EndpointSlice before the run
// stops: kube-controller-manager is down or stuck, and every further move would add a Service
// without endpoints, one per SliceWait.
const stallAfter = 5

// sliceOutcome records whether a moved Service's EndpointSlice came; one that came resets the
// count of moves in a row without one.
func (x *executor) sliceOutcome(key string, uid types.UID, came bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if came {
		x.noSliceInRow = 0
		return
	}
	x.noSliceInRow++
	x.noSlice = append(x.noSlice, movedService{key, uid})
}

type movedService struct {
	key string
	uid types.UID
}

// stalled returns errStalled once, when stallAfter moves in a row have ended without their
// EndpointSlice; moveAll then starts no further move and reports with stallReport.
func (x *executor) stalled() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.noSliceInRow < stallAfter || x.stallReported {
		return nil
	}
	x.stallReported = true
	return errStalled
}

// stallReport says why the run stopped, naming the moved Services that still have no
// EndpointSlice with a ready endpoint, once the moves in flight have ended.
func (x *executor) stallReport() error {
	x.mu.Lock()
	moved := slices.Clone(x.noSlice)
	x.mu.Unlock()
	var without []string
	for _, m := range moved {
		items, _ := x.sliceIndex.ByIndex("service", m.key)
		if !slices.ContainsFunc(items, func(o any) bool {
			s, ok := o.(*discoveryv1.EndpointSlice)
			return ok && ownedBy(s.OwnerReferences, m.uid) && readyEndpoints([]discoveryv1.EndpointSlice{*s}) > 0
		}) {
			without = append(without, m.key)
		}
	}
	slices.Sort(without)
	return fmt.Errorf("%w: kube-controller-manager wrote no EndpointSlice for %d moved Services in a row within "+
		"endpoint_wait (%s each), so no further move was started. Moved and still without endpoints: %s. They exist at "+
		"their new IPs and are served as soon as it writes their EndpointSlices. Check that kube-controller-manager "+
		"runs and is healthy (its logs, its endpointslice controller, its --kube-api-qps), then apply again: the next "+
		"apply moves the rest", errStalled, stallAfter, x.o.SliceWait, orNone(without))
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none any more"
	}
	return strings.Join(list, ", ")
}

// errStalled stops a run whose moved Services get no endpoints.
var errStalled = errors.New("stopped")

// interruptGrace is how long moves already past their delete may still take once the apply is
// interrupted: CI runners send SIGKILL about 10 s after SIGINT, and terraform needs some of it.
const interruptGrace = 5 * time.Second

// afterCancel is a context that outlives ctx by grace: it is cancelled grace after ctx is.
func afterCancel(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var timer *time.Timer
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, func() {
			cancel(fmt.Errorf("the apply was interrupted (%v) and the %s given to moves in flight ran out", context.Cause(ctx), grace))
		})
	})
	return out, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}
