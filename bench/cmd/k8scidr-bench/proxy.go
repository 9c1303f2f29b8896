// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// proxy is the one door every contender talks through: a loopback HTTP proxy to the
// apiserver that counts requests and holds them all to the same client budget (a token bucket
// of qps and burst, as client-go's own limiter), so no contender is faster by asking more.
type proxy struct {
	url      string
	requests atomic.Int64
	// journalWrites counts ConfigMap creates: the provider's recreation journal objects.
	journalWrites atomic.Int64
	// firstServiceWrite is when the first Service write came since the last reset (unix ns; 0:
	// none yet): the start of the provider's moves (isServiceWrite).
	firstServiceWrite atomic.Int64
	srv               *http.Server

	mu    sync.Mutex
	kinds map[string]int // BENCH_DEBUG: requests by verb and resource
	// untilMove are the requests before the first Service write since the last reset
	// (BENCH_DEBUG): what an apply waits for before its first move.
	untilMove  []traced
	tracing    atomic.Bool
	applyBegan atomic.Int64 // unix ns of the traced apply's "Creating..." (BENCH_DEBUG)
}

// resetStart forgets the first Service write, and under BENCH_DEBUG starts tracing the
// requests until the next one.
func (p *proxy) resetStart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.untilMove = nil
	p.firstServiceWrite.Store(0)
	p.applyBegan.Store(0)
	p.tracing.Store(debug)
}

// traced is one request of the start trace: when it came, when the shared limiter let it
// through and when its response ended.
type traced struct {
	came, passed, done time.Time
	what               string
}

// trace records r's timing until the first Service write (BENCH_DEBUG).
func (p *proxy) trace(r *http.Request, came, passed time.Time) {
	if f := p.firstServiceWrite.Load(); !p.tracing.Load() || f != 0 && came.UnixNano() > f {
		return
	}
	what := r.Method + " " + r.URL.Path
	if q := r.URL.Query(); q.Get("watch") == "true" || q.Get("continue") != "" || q.Get("dryRun") != "" {
		what += " (" + strings.Join(slices.Sorted(maps.Keys(q)), ",") + ")"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.untilMove) < 5000 {
		p.untilMove = append(p.untilMove, traced{came: came, passed: passed, done: time.Now(), what: what})
	}
}

// dumpStart logs the requests of the 10 seconds before the first Service write (at first),
// each as offsets from it in seconds, and stops tracing (BENCH_DEBUG). The apply's own begin
// where the plan's requests end; "Creating..." is start seconds before first.
func (p *proxy) dumpStart(first time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.untilMove {
		if first.Sub(t.came) < 10*time.Second {
			logf("start trace: came %+.3f passed %+.3f done %+.3f  %s", t.came.Sub(first).Seconds(), t.passed.Sub(first).Seconds(), t.done.Sub(first).Seconds(), t.what)
		}
	}
	if began := p.applyBegan.Load(); began != 0 {
		logf("start trace: Terraform printed Creating... at %+.3f", time.Unix(0, began).Sub(first).Seconds())
	}
	p.untilMove = nil
	p.tracing.Store(false)
}

func (p *proxy) byKind(r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	res := parts[len(parts)-1]
	for i, s := range parts {
		if s == "namespaces" && i+2 < len(parts) {
			res = parts[i+2]
		}
	}
	if len(parts) > 2 && parts[len(parts)-2] != "namespaces" && r.Method != http.MethodGet && r.Method != http.MethodPost {
		res = parts[len(parts)-2]
	}
	if r.URL.Query().Get("watch") == "true" {
		res += " (watch)"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kinds == nil {
		p.kinds = map[string]int{}
	}
	p.kinds[r.Method+" "+res]++
}

// dumpKinds logs and resets the per-kind counts (BENCH_DEBUG).
func (p *proxy) dumpKinds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.kinds) > 0 {
		logf("requests by kind: %v", p.kinds)
	}
	p.kinds = nil
}

// isServiceWrite reports whether r writes a Service: creates one (POST
// /api/v1/namespaces/NS/services), or changes or deletes one (.../services/NAME), not as a dry
// run. A move's first write starts it: its carrier created (a hand-over), its escort created (a
// delete and create with an escort), or, without either, the delete. An apply that finds an
// earlier one's leftovers writes them first; the bench's namespaces are new, so it finds none.
func isServiceWrite(r *http.Request) bool {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 5 || parts[0] != "api" || parts[2] != "namespaces" || parts[4] != "services" || r.URL.Query().Has("dryRun") {
		return false
	}
	switch r.Method {
	case http.MethodPost:
		return len(parts) == 5
	case http.MethodPut, http.MethodPatch, http.MethodDelete:
		return len(parts) == 6
	}
	return false
}

func startProxy(cfg *rest.Config, qps float32, burst int) (*proxy, error) {
	rp, err := testcluster.ReverseProxy(cfg)
	if err != nil {
		return nil, err
	}
	limiter := flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	p := &proxy{}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		came := time.Now()
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/configmaps") {
			p.journalWrites.Add(1)
		}
		if isServiceWrite(r) {
			p.firstServiceWrite.CompareAndSwap(0, time.Now().UnixNano())
		}
		if debug {
			p.byKind(r)
		}
		if err := limiter.Wait(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		passed := time.Now()
		rp.ServeHTTP(w, r)
		if debug {
			p.trace(r, came, passed)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.url = "http://" + ln.Addr().String()
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// kubeconfig writes a kubeconfig for the proxy (no credentials: the proxy holds them).
func (p *proxy) kubeconfig(path string) error { return testcluster.ProxyKubeconfig(p.url, path) }

// restConfig is a client config through the proxy with the shared budget.
func (p *proxy) restConfig(qps float32, burst int) *rest.Config {
	return &rest.Config{Host: p.url, QPS: qps, Burst: burst}
}
