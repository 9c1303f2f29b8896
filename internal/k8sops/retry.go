// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Retries of failures that are the apiserver's or the network's, not the request's.
//
// client-go retries on its own a response that carries Retry-After (429, 5xx: up to ten times,
// waiting as told) and a GET whose connection broke. retryHints widens that to the failures
// where a retry is safe whatever happened: a read that failed on the server, and a refused
// connection (an apiserver restarting), over which nothing was sent. A write that failed
// otherwise (500, 503, 504, a broken connection) may or may not have been done: retryWrite
// retries those, telling the operation so, and each caller treats "already done" (NotFound
// after a delete, AlreadyExists of what it created) as success.
package k8sops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
)

// retryHints is the client's transport wrapper. A refused connection (an apiserver restarting)
// is retried here, for any verb, since nothing was sent; the last error is kept, so that an
// unreachable cluster still says "connection refused". A read that failed on the server gets
// a Retry-After, so that client-go's own retry loop retries it.
type retryHints struct{ next http.RoundTripper }

// refusedBackoff spaces the attempts over a refused connection: about 15 s in all.
var refusedBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Steps: 10, Cap: 2 * time.Second}

func (t retryHints) RoundTrip(req *http.Request) (*http.Response, error) {
	b := refusedBackoff
	for {
		countAttempt(req.Context())
		resp, err := t.next.RoundTrip(req)
		replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
		if err != nil && utilnet.IsConnectionRefused(err) && replayable && b.Steps > 1 {
			select {
			case <-time.After(b.Step()):
			case <-req.Context().Done():
				return resp, err
			}
			req = req.Clone(req.Context())
			if req.GetBody != nil {
				if req.Body, err = req.GetBody(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err == nil && (req.Method == http.MethodGet || req.Method == http.MethodHead) && resp.StatusCode >= 500 &&
			resp.Header.Get("Retry-After") == "" {
			resp.Header.Set("Retry-After", "1")
		}
		return resp, err
	}
}

// Transient reports whether err is the apiserver's or the network's failure rather than an
// answer to the request, so that the same request may succeed later.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsUnexpectedServerError(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsTimeout(err) || errors.Is(err, io.ErrUnexpectedEOF)
}

// writeBackoff spaces the attempts of one write: about 40 s in all, enough for an apiserver
// restart, and short enough that a broken cluster fails the apply long before its timeout.
var writeBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 9, Cap: 10 * time.Second}

// RetryWrite runs op until it succeeds or fails with an error that is not Transient (or one of
// also), backing off between attempts with apimachinery's backoff loop (client-go's
// retry.OnError would not end when ctx does). again tells op that an earlier attempt's outcome
// is unknown, so it may already have taken effect. When the attempts or ctx run out, the error
// names the last failure.
func RetryWrite(ctx context.Context, op func(again bool) error, also ...func(error) bool) error {
	retriable := func(err error) bool {
		return Transient(err) || slices.ContainsFunc(also, func(f func(error) bool) bool { return f(err) })
	}
	start, attempt := time.Now(), 0
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, writeBackoff, func(context.Context) (bool, error) {
		attempt++
		if last = op(attempt > 1); last != nil && retriable(last) {
			return false, nil
		}
		return true, last
	})
	switch {
	case err == nil || last == nil || !retriable(last):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("%w (attempt %d; %s)", last, attempt, stoppedWhy(ctx))
	default:
		return fmt.Errorf("%w (gave up after %d attempts in %s)", last, attempt, time.Since(start).Round(time.Second))
	}
}

// stoppedWhy says why ctx ended, for an error that stops retrying because of it: its timeout,
// the cause it was cancelled with (the apply interrupted, its grace over), or a cancel.
func stoppedWhy(ctx context.Context) string {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		return "the operation's timeout ended before the next"
	case cause == nil || errors.Is(cause, context.Canceled):
		return "the operation was stopped before the next"
	default:
		return "no next, as " + cause.Error()
	}
}
