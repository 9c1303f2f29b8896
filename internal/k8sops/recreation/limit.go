// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The adaptive in-flight limit: how many moves run at once, steered by how fast
// kube-controller-manager writes the new Services' EndpointSlices.
package recreation

import (
	"context"
	"math"
	"sync"
	"time"
)

// DefaultWindowTarget is the unavailability per moved Service (delete to a ready EndpointSlice
// of the new Service) that adaptiveLimit steers to.
const DefaultWindowTarget = 150 * time.Millisecond

// adaptiveLimit bounds the moves in flight, additive increase and multiplicative decrease on
// each move's window, as TCP does on round-trip times: every move whose window stayed under
// target adds 1/limit, a window over it halves the limit (once per window, not once per late
// move). The run then goes as fast as kube-controller-manager writes EndpointSlices (its
// --kube-api-qps, 20 by default) and no faster, so no Service waits long without endpoints.
//
// The limit also never grows past what the client's rate allows to be useful: a move costs
// two requests, so qps/2 moves a second, each in flight for about the shortest window seen;
// twice that is enough. More in flight would buy no speed, only a queue that turns into
// downtime the moment the controller's burst runs out.
type adaptiveLimit struct {
	mu        sync.Mutex
	limit     float64
	max       float64
	inFlight  int
	target    time.Duration
	lastCut   time.Time
	qps       float64
	minWindow time.Duration
	wake      chan struct{}
}

func newAdaptiveLimit(most int, target time.Duration, qps float32) *adaptiveLimit {
	if target <= 0 {
		target = DefaultWindowTarget
	}
	return &adaptiveLimit{limit: float64(min(2, most)), max: float64(most), target: target, qps: float64(qps), wake: make(chan struct{})}
}

func (l *adaptiveLimit) acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		if l.inFlight < int(l.limit) {
			l.inFlight++
			l.mu.Unlock()
			return nil
		}
		ch := l.wake
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (l *adaptiveLimit) release(window time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	switch {
	case !ok:
	case window > l.target:
		if time.Since(l.lastCut) > window {
			l.limit = max(1, l.limit/2)
			l.lastCut = time.Now()
		}
	default:
		if l.minWindow == 0 || window < l.minWindow {
			l.minWindow = window
		}
		l.limit = min(l.max, l.useful(), l.limit+1/l.limit)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// cancel gives back a slot acquired for a move that was not started.
func (l *adaptiveLimit) cancel() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	close(l.wake)
	l.wake = make(chan struct{})
}

// useful is the most moves in flight the client's rate can keep busy (no bound without one).
func (l *adaptiveLimit) useful() float64 {
	if l.qps <= 0 || l.minWindow == 0 {
		return l.max
	}
	movesPerSecond := l.qps / 2
	return max(2, math.Ceil(2*movesPerSecond*l.minWindow.Seconds()))
}

func (l *adaptiveLimit) current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}
