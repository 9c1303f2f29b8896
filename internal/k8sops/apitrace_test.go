// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"context"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
)

// refusedOnce refuses the first connection and answers the next.
type refusedOnce struct{ calls int }

func (f *refusedOnce) RoundTrip(*http.Request) (*http.Response, error) {
	f.calls++
	if f.calls == 1 {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}, nil
}

// TestAPITrace: one record per request, with the transport's repeated attempts counted, the
// path without its query, and nothing recorded while no hook is set.
func TestAPITrace(t *testing.T) {
	var got []APIRequest
	hook := new(func(context.Context, APIRequest))
	rt := apiTrace{retryHints{&refusedOnce{}}, hook}
	req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1:6443/api/v1/pods?labelSelector=app%3Dweb&continue=abc", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("recorded without a hook: %v", got)
	}
	*hook = func(_ context.Context, r APIRequest) { got = append(got, r) }
	rt.next = retryHints{&refusedOnce{}}
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Verb != "GET" || got[0].Path != "/api/v1/pods" || got[0].Status != 200 || got[0].Retries != 1 || got[0].Err != "" {
		t.Fatalf("records %+v, want one GET /api/v1/pods 200 with 1 retry", got)
	}
}
