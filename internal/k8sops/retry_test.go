// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

func quickBackoff(t *testing.T) {
	t.Helper()
	saved := writeBackoff
	writeBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 4}
	t.Cleanup(func() { writeBackoff = saved })
}

func TestRetryWrite(t *testing.T) {
	quickBackoff(t)
	ctx := context.Background()
	internal := apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	t.Run("transient failures are retried, and later attempts know", func(t *testing.T) {
		var seen []bool
		err := RetryWrite(ctx, func(again bool) error {
			seen = append(seen, again)
			if len(seen) < 3 {
				return internal
			}
			return nil
		})
		if err != nil || fmt.Sprint(seen) != "[false true true]" {
			t.Errorf("err %v, attempts %v", err, seen)
		}
	})
	t.Run("answers are not retried", func(t *testing.T) {
		calls := 0
		err := RetryWrite(ctx, func(bool) error {
			calls++
			return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "services"}, "a")
		})
		if !apierrors.IsAlreadyExists(err) || calls != 1 {
			t.Errorf("err %v after %d calls", err, calls)
		}
	})
	t.Run("also widens what is retried", func(t *testing.T) {
		calls := 0
		conflict := apierrors.NewConflict(schema.GroupResource{Resource: "endpoints"}, "a", errors.New("modified"))
		err := RetryWrite(ctx, func(bool) error {
			if calls++; calls == 1 {
				return conflict
			}
			return nil
		}, apierrors.IsConflict)
		if err != nil || calls != 2 {
			t.Errorf("err %v after %d calls", err, calls)
		}
	})
	t.Run("giving up names the last error and the attempts", func(t *testing.T) {
		calls := 0
		err := RetryWrite(ctx, func(bool) error { calls++; return fmt.Errorf("attempt %d: %w", calls, io.ErrUnexpectedEOF) })
		if calls != 4 || err == nil || !strings.Contains(err.Error(), "attempt 4: unexpected EOF (gave up after 4 attempts") {
			t.Errorf("err %v after %d calls", err, calls)
		}
	})
	t.Run("the context ends the retries", func(t *testing.T) {
		writeBackoff = wait.Backoff{Duration: time.Hour, Steps: 4}
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := RetryWrite(ctx, func(bool) error { return internal })
		if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "timeout ended") {
			t.Errorf("err %v", err)
		}
	})
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewInternalError(errors.New("x")), true},
		{apierrors.NewServiceUnavailable("x"), true},
		{apierrors.NewTimeoutError("x", 1), true},
		{apierrors.NewServerTimeout(gr, "create", 1), true},
		{io.ErrUnexpectedEOF, true},
		{&url.Error{Op: "Post", URL: "http://x", Err: io.EOF}, true},
		{&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, true},
		{apierrors.NewNotFound(gr, "a"), false},
		{apierrors.NewForbidden(gr, "a", errors.New("no")), false},
		{apierrors.NewTooManyRequests("PDB", 0), false}, // client-go retries the ones with Retry-After itself
		{context.DeadlineExceeded, false},
		{nil, false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}

// retryHints makes client-go retry a failed read, retries any request over a refused
// connection (replaying its body), and leaves a write whose outcome is unknown to the caller.
func TestRetryHints(t *testing.T) {
	var gets, posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet || gets.Add(1) < 3 {
			posts.Add(map[bool]int32{true: 0, false: 1}[r.Method == http.MethodGet])
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":"InternalError","code":500}`)
			return
		}
		_, _ = fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"x"}}`)
	}))
	defer srv.Close()
	c, err := NewClient(&rest.Config{Host: srv.URL}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().ConfigMaps("x").Get(ctx, "a", metav1.GetOptions{}); err != nil || gets.Load() != 3 {
		t.Errorf("GET after two 500s: %v (%d requests)", err, gets.Load())
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	if _, err := c.Kube.CoreV1().ConfigMaps("x").Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsInternalError(err) || posts.Load() != 1 {
		t.Errorf("a POST answered 500 must come back as it is: %v (%d requests)", err, posts.Load())
	}

	refusals := 0
	refused := retryHints{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if body, _ := io.ReadAll(r.Body); string(body) != "{}" {
			t.Errorf("attempt %d sent body %q", refusals+1, body)
		}
		if refusals++; refusals < 3 {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody}, nil
	})}
	saved := refusedBackoff
	refusedBackoff = wait.Backoff{Duration: time.Millisecond, Steps: 5}
	defer func() { refusedBackoff = saved }()
	req, _ := http.NewRequest(http.MethodPost, "https://127.0.0.1:1/api/v1/namespaces/x/configmaps", strings.NewReader("{}"))
	resp, err := refused.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusCreated || refusals != 3 {
		t.Errorf("a POST over refused connections: %v, %+v after %d attempts", err, resp, refusals)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
