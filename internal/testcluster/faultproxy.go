// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Fault is one kind of failure FaultProxy injects.
type Fault string

const (
	FaultThrottled   Fault = "429"  // 429 Too Many Requests with Retry-After: 1
	FaultInternal    Fault = "500"  // 500 Internal Server Error
	FaultUnavailable Fault = "503"  // 503 Service Unavailable, without Retry-After
	FaultConflict    Fault = "409"  // 409 Conflict, on updates (PUT) only
	FaultDrop        Fault = "drop" // the connection is closed before the request is forwarded
	FaultLost        Fault = "lost" // the request is carried out, then the connection is closed unanswered
	FaultSlow        Fault = "slow" // the request is held 2 s, then forwarded
	slowFaultDelay         = 2 * time.Second
)

// AllFaults is every Fault.
var AllFaults = []Fault{FaultThrottled, FaultInternal, FaultUnavailable, FaultConflict, FaultDrop, FaultLost, FaultSlow}

// FaultProxy is a loopback reverse proxy to the apiserver that holds the cluster's admin
// credentials and fails a share of the requests passing through, as an overloaded or
// restarting control plane and a flaky network do. Clients reach it without credentials
// (Kubeconfig). Faults are drawn from a seeded source, so a run can be replayed.
type FaultProxy struct {
	URL string

	srv *http.Server
	rp  *httputil.ReverseProxy

	mu     sync.Mutex
	rate   float64
	kinds  []Fault
	rng    *rand.Rand
	counts map[Fault]int
	total  atomic.Int64
}

// StartFaultProxy starts a proxy to cfg's apiserver that injects no faults until SetFaults.
func StartFaultProxy(cfg *rest.Config, seed uint64) (*FaultProxy, error) {
	rp, err := ReverseProxy(cfg)
	if err != nil {
		return nil, err
	}
	rp.ErrorLog = log.New(io.Discard, "", 0) // injected hang-ups are not news
	p := &FaultProxy{rp: rp, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), counts: map[Fault]int{}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.URL = "http://" + ln.Addr().String()
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// SetFaults makes a share rate (0 to 1) of the requests fail with one of kinds (all when none).
func (p *FaultProxy) SetFaults(rate float64, kinds ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = rate
	p.kinds = kinds
	if len(kinds) == 0 {
		p.kinds = AllFaults
	}
}

// Injected returns how many requests passed and how many faults of each kind were injected.
func (p *FaultProxy) Injected() (requests int64, faults map[Fault]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Fault]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return p.total.Load(), out
}

// Close stops the proxy and drops its connections.
func (p *FaultProxy) Close() { _ = p.srv.Close() }

// draw picks the fault for r, if any.
func (p *FaultProxy) draw(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rate <= 0 || p.rng.Float64() >= p.rate {
		return ""
	}
	kinds := p.kinds
	if r.Method != http.MethodPut {
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(f Fault) bool { return f == FaultConflict })
	}
	if len(kinds) == 0 {
		return ""
	}
	f := kinds[p.rng.IntN(len(kinds))]
	p.counts[f]++
	return f
}

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.total.Add(1)
	watch := r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"
	switch p.draw(r) {
	case FaultThrottled:
		w.Header().Set("Retry-After", "1")
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "injected: too many requests, please try again later")
	case FaultInternal:
		writeStatus(w, http.StatusInternalServerError, "InternalError", "injected: Internal error occurred: etcdserver: request timed out")
	case FaultUnavailable:
		writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "injected: the server is currently unable to handle the request")
	case FaultConflict:
		writeStatus(w, http.StatusConflict, "Conflict", "injected: Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again")
	case FaultDrop:
		hangUp(w)
	case FaultLost:
		if watch {
			hangUp(w)
			return
		}
		p.rp.ServeHTTP(httptest.NewRecorder(), r)
		hangUp(w)
	case FaultSlow:
		select {
		case <-time.After(slowFaultDelay):
			p.rp.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// writeStatus answers with a metav1.Status, as the apiserver does.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	details := ""
	if code == http.StatusTooManyRequests {
		details = `,"details":{"retryAfterSeconds":1}`
	}
	_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d%s}`,
		msg, reason, code, details)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // net/http closes the connection
}

// Kubeconfig writes a kubeconfig that reaches the cluster through the proxy.
func (p *FaultProxy) Kubeconfig(path string) error { return ProxyKubeconfig(p.URL, path) }

// ReverseProxy forwards requests to cfg's apiserver with cfg's credentials, streaming watches.
func ReverseProxy(cfg *rest.Config) (*httputil.ReverseProxy, error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	return &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     rt,
		FlushInterval: -1, // watches stream
	}, nil
}

// ProxyKubeconfig writes a kubeconfig for a loopback proxy at server that holds the
// credentials itself: it has none.
func ProxyKubeconfig(server, path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing the proxy's kubeconfig: %w", err)
	}
	return os.Chmod(path, 0o600)
}

// String summarizes what was injected, for test logs.
func (p *FaultProxy) String() string {
	total, counts := p.Injected()
	var parts []string
	for _, f := range AllFaults {
		if counts[f] > 0 {
			parts = append(parts, fmt.Sprintf("%s×%d", f, counts[f]))
		}
	}
	return fmt.Sprintf("%d requests, faults: %s", total, strings.Join(parts, " "))
}
