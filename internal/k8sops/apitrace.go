// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// One record per API request, for the provider's debug log: verb, path, status, duration and
// the attempts the transport made. The wrapper sits outside client-go's authentication, so it
// never sees a header with credentials, and it reads no body.
package k8sops

import (
	"context"
	"net/http"
	"time"
)

// APIRequest is what the trace records of one request.
type APIRequest struct {
	Verb     string
	Path     string // URL path only: query strings (selectors, continue tokens) are left out
	Status   int    // 0 when no answer came
	Duration time.Duration
	Retries  int    // attempts repeated by the transport (refused connections)
	Err      string // the transport's error, when no answer came
}

// attemptsKey carries the attempt counter of one traced request to retryHints.
type attemptsKey struct{}

// apiTrace calls *hook, when set, after each request.
type apiTrace struct {
	next http.RoundTripper
	hook *func(context.Context, APIRequest)
}

func (t apiTrace) RoundTrip(req *http.Request) (*http.Response, error) {
	if *t.hook == nil {
		return t.next.RoundTrip(req)
	}
	attempts := 0
	req = req.WithContext(context.WithValue(req.Context(), attemptsKey{}, &attempts))
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	r := APIRequest{Verb: req.Method, Path: req.URL.Path, Duration: time.Since(start), Retries: max(attempts-1, 0)}
	if resp != nil {
		r.Status = resp.StatusCode
	}
	if err != nil {
		r.Err = err.Error()
	}
	(*t.hook)(req.Context(), r)
	return resp, err
}

// countAttempt counts one attempt of a traced request.
func countAttempt(ctx context.Context) {
	if n, ok := ctx.Value(attemptsKey{}).(*int); ok {
		*n++
	}
}

// TraceRequests makes the client report every API request to fn (nil: none). Set it before
// the client is used.
func (c *Client) TraceRequests(fn func(context.Context, APIRequest)) {
	if c.trace != nil {
		*c.trace = fn
	}
}
