// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The wire's clients: one of each kind a real cluster has, sending real DNS queries and HTTP
// requests through kube-proxy's rules, recording every failure with the Service and the time
// relative to that Service's move.
package testcluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// ClientKind is what a client does to reach a Service.
type ClientKind string

// The kinds of client the wire runs.
const (
	// ClientOldResolver is a pod not restarted since the cluster DNS moved: it resolves each
	// request's name through the DNS Service's old IP (its resolv.conf), then connects.
	ClientOldResolver ClientKind = "old-resolver"
	// ClientNewResolver is a pod (re)started after the cluster DNS moved: its resolver is the
	// DNS Service's new IP. It exists from the moment the API shows that IP.
	ClientNewResolver ClientKind = "new-resolver"
	// ClientKeptIP resolved the name once when it started and keeps the answer (nginx and
	// Envoy upstreams, JVM caches).
	ClientKeptIP ClientKind = "kept-ip"
	// ClientServiceHost connects to <SVC>_SERVICE_HOST: the ClusterIP when the pod started.
	ClientServiceHost ClientKind = "service-host"
	// ClientAPIOld is an in-cluster API client (client-go's in-cluster configuration) of a pod
	// not restarted since default/kubernetes moved: it connects to KUBERNETES_SERVICE_HOST, the
	// Service's ClusterIP when the pod started, port 443, and verifies the apiserver's
	// certificate against that IP.
	ClientAPIOld ClientKind = "api-old-host"
	// ClientAPINew is the same client in a pod started after default/kubernetes moved: it
	// exists from the moment the API shows the Service's new ClusterIP.
	ClientAPINew ClientKind = "api-new-host"
)

// ClientKinds are every kind of client of the Services, in report order.
var ClientKinds = []ClientKind{ClientOldResolver, ClientNewResolver, ClientKeptIP, ClientServiceHost}

// APIClientKinds are the kinds of in-cluster API client (ClientOptions.APIServerCA).
var APIClientKinds = []ClientKind{ClientAPIOld, ClientAPINew}

// ClientNodePort reaches a Service that had node ports when the clients started through the
// first of them on the node's address (WireNodeIP), as a load balancer in front of the nodes
// does: it runs for those Services only.
const ClientNodePort ClientKind = "node-port"

// allKinds are every kind, each one's index its client's address.
var allKinds = append(append(slices.Clone(ClientKinds), APIClientKinds...), ClientNodePort)

// apiServerService is the Service in-cluster API clients reach.
const apiServerService = "default/kubernetes"

// Clients are the wire's clients of a set of Services.
type Clients struct {
	o        ClientOptions
	kinds    []ClientKind // the kinds running, in report order
	mu       sync.Mutex
	requests map[ClientKind]map[string]int
	failures []Failure
	moves    map[string][]time.Time // Service → the times it lost its ClusterIP (deleted or changed)
	svcs     cache.Store
	oldDNS   string            // the DNS Service's IP when the clients started
	ctStart  map[string]uint64 // the namespace's conntrack counters when the clients started
	tcpStart map[string]uint64 // and its TCP counters
	http     map[ClientKind]*http.Client
	local    map[ClientKind]net.IP // each kind's source address: its own pod's IP
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// ClientOptions shape the clients.
type ClientOptions struct {
	// Services are "namespace/name" of the Services to reach, on port 80 (WireHTTPPort).
	Services []string
	// DNS is the cluster DNS Service, "namespace/name"; default kube-system/kube-dns.
	DNS string
	// Interval is how often each client reaches each Service; default 100 ms.
	Interval time.Duration
	// Timeout bounds each query and each request; default 2 s, so that a machine busy with the
	// rest of the suite does not pass for a dropped packet. A real resolver whose query is
	// dropped waits 5 s before it asks again: a failure here stands for at least that.
	Timeout time.Duration
	// APIServerCA, when set, adds the in-cluster API clients (APIClientKinds) of
	// default/kubernetes, verifying the apiserver's certificate with it. kube-apiserver must
	// then be reached on the wire: its endpoints' address (--advertise-address WireNodeIP)
	// listening, and its certificate naming the Service's IPs.
	APIServerCA []byte
}

// Failure is one failed query or request.
type Failure struct {
	Kind    ClientKind
	Service string
	At      time.Time
	// Since is At relative to the Service's last move before it (or its first move after it,
	// negative), zero when the Service never moved.
	Since  time.Duration
	Reason string
}

// DefaultClientTimeout bounds each query and each request of the clients by default
// (ClientOptions.Timeout).
const DefaultClientTimeout = 2 * time.Second

// StartClients starts one client of each kind for each Service, after reading each Service's
// ClusterIP (ClientServiceHost) and resolving each name once (ClientKeptIP) through the DNS
// Service's current IP: both must work when the clients start. With APIServerCA it starts the
// in-cluster API clients too, once default/kubernetes's ClusterIP answers.
func (w *Wire) StartClients(ctx context.Context, o ClientOptions) (*Clients, error) {
	if o.DNS == "" {
		o.DNS = "kube-system/kube-dns"
	}
	if o.Interval == 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultClientTimeout
	}
	cl := &Clients{o: o, requests: map[ClientKind]map[string]int{}, moves: map[string][]time.Time{},
		http: map[ClientKind]*http.Client{"": noKeepAlive(nil, nil)}, local: map[ClientKind]net.IP{}}
	if len(o.Services) > 0 {
		cl.kinds = slices.Clone(ClientKinds)
	}
	var roots *x509.CertPool
	if o.APIServerCA != nil {
		if roots = x509.NewCertPool(); !roots.AppendCertsFromPEM(o.APIServerCA) {
			return nil, errors.New("the apiserver's CA does not parse")
		}
		cl.kinds = append(cl.kinds, APIClientKinds...)
		cl.http[""] = noKeepAlive(nil, roots)
	}
	for _, k := range cl.kinds {
		if err := cl.addKind(k, roots); err != nil {
			return nil, err
		}
	}
	f := informers.NewSharedInformerFactory(w.c.Kube, 0)
	inf := f.Core().V1().Services().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Service)
			n, ok2 := obj.(*corev1.Service)
			if ok1 && ok2 && o.Spec.ClusterIP != n.Spec.ClusterIP {
				cl.moved(keyOf(obj))
			}
		},
		DeleteFunc: func(obj any) { cl.moved(keyOf(obj)) },
	}); err != nil {
		return nil, err
	}
	ctx, cl.cancel = context.WithCancel(context.WithoutCancel(ctx))
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cl.cancel()
		return nil, errors.New("watching Services for the wire's clients: caches did not sync")
	}
	cl.svcs = inf.GetStore()
	cl.ctStart, cl.tcpStart = conntrackStats(), tcpStats()
	if err := cl.startAPIClients(ctx); err != nil {
		cl.cancel()
		return nil, err
	}
	if len(o.Services) == 0 {
		return cl, nil
	}
	for _, svc := range o.Services {
		if nodePort(cl.service(svc)) != 0 && !slices.Contains(cl.kinds, ClientNodePort) {
			cl.kinds = append(cl.kinds, ClientNodePort)
			if err := cl.addKind(ClientNodePort, roots); err != nil {
				cl.cancel()
				return nil, err
			}
		}
	}
	oldDNS := cl.clusterIP(o.DNS)
	cl.oldDNS = oldDNS
	if oldDNS == "" {
		cl.cancel()
		return nil, fmt.Errorf("the cluster DNS Service %s has no ClusterIP", o.DNS)
	}
	for _, svc := range o.Services {
		start := cl.clusterIP(svc)
		var kept string
		// A Service just made is served once kube-proxy's next sync has programmed it.
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			if kept, err = cl.resolve(ctx, "", oldDNS, svc); err == nil {
				err = cl.get(ctx, "", start)
			}
			return err == nil, nil
		})
		if err != nil || start == "" {
			cl.cancel()
			return nil, fmt.Errorf("the Service %s is not served on the wire before the clients start (ClusterIP %q, DNS %s): %v", svc, start, oldDNS, err)
		}
		cl.loop(ctx, ClientOldResolver, svc, func(ctx context.Context) error { return cl.byName(ctx, ClientOldResolver, oldDNS, svc) })
		cl.loop(ctx, ClientNewResolver, svc, func(ctx context.Context) error {
			newDNS := cl.clusterIP(o.DNS)
			if newDNS == oldDNS || newDNS == "" {
				return errNotYet
			}
			return cl.byName(ctx, ClientNewResolver, newDNS, svc)
		})
		cl.loop(ctx, ClientKeptIP, svc, func(ctx context.Context) error { return cl.get(ctx, ClientKeptIP, kept) })
		cl.loop(ctx, ClientServiceHost, svc, func(ctx context.Context) error { return cl.get(ctx, ClientServiceHost, start) })
		if port := nodePort(cl.service(svc)); port != 0 {
			url := "http://" + net.JoinHostPort(WireNodeIP, strconv.Itoa(int(port))) + "/"
			cl.loop(ctx, ClientNodePort, svc, func(ctx context.Context) error {
				return cl.request(ctx, ClientNodePort, url, WireNodeIP, true)
			})
		}
	}
	return cl, nil
}

// addKind gives kind's client its own address. Each kind of client is a pod of its own, with
// its own IP, as in a cluster: connections of different kinds to a Service's old and new IPs
// (which kube-proxy sends to the same endpoints) never share a conntrack reply tuple, which the
// kernel would refuse. Clients started again (pods restarted) keep their kind's address.
func (cl *Clients) addKind(kind ClientKind, roots *x509.CertPool) error {
	cl.requests[kind] = map[string]int{}
	ip := net.IPv4(192, 0, 2, byte(11+slices.Index(allKinds, kind)))
	if err := ipCommand("addr", "replace", ip.String()+"/32", "dev", wireNodeLink); err != nil {
		return fmt.Errorf("the address of the %s client: %w", kind, err)
	}
	cl.local[kind], cl.http[kind] = ip, noKeepAlive(ip, roots)
	return nil
}

// nodePort is svc's first node port, 0 when it has none (or svc is nil).
func nodePort(svc *corev1.Service) int32 {
	if svc != nil {
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				return p.NodePort
			}
		}
	}
	return 0
}

// startAPIClients starts the in-cluster API clients, if asked for, once kube-apiserver answers
// at default/kubernetes's ClusterIP.
func (cl *Clients) startAPIClients(ctx context.Context) error {
	if cl.o.APIServerCA == nil {
		return nil
	}
	start := cl.clusterIP(apiServerService)
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return start != "" && cl.api(ctx, "", start) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver does not answer on the wire at %s's ClusterIP %q before the clients start: %v", apiServerService, start, cl.api(ctx, "", start))
	}
	cl.loop(ctx, ClientAPIOld, apiServerService, func(ctx context.Context) error { return cl.api(ctx, ClientAPIOld, start) })
	cl.loop(ctx, ClientAPINew, apiServerService, func(ctx context.Context) error {
		ip := cl.clusterIP(apiServerService)
		if ip == start || ip == "" {
			return errNotYet
		}
		return cl.api(ctx, ClientAPINew, ip)
	})
	return nil
}

// Reach tries once what a client of kind does to reach svc (ClientKeptIP, ClientServiceHost
// and ClientAPIOld: the IP given), outside the clients' loops and records.
func (cl *Clients) Reach(ctx context.Context, kind ClientKind, svc, ip string) error {
	switch kind {
	case ClientOldResolver, ClientNewResolver:
		dns := cl.clusterIP(cl.o.DNS)
		if kind == ClientOldResolver {
			dns = cl.oldDNS
		}
		return cl.byName(ctx, kind, dns, svc)
	case ClientAPIOld, ClientAPINew:
		return cl.api(ctx, kind, cmp.Or(ip, cl.clusterIP(apiServerService)))
	default:
		return cl.get(ctx, kind, ip)
	}
}

// errNotYet says a client does not exist yet (a restarted pod before the DNS move).
var errNotYet = errors.New("not yet")

func (cl *Clients) loop(ctx context.Context, kind ClientKind, svc string, try func(context.Context) error) {
	cl.wg.Go(func() {
		// Spread the clients over the interval, so that together they sample it evenly.
		t := time.NewTimer(rand.N(cl.o.Interval))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			at := time.Now()
			err := try(ctx)
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, errNotYet) {
				cl.record(kind, svc, at, err)
			}
			t.Reset(max(0, cl.o.Interval-time.Since(at)))
		}
	})
}

func (cl *Clients) clusterIP(key string) string {
	if svc := cl.service(key); svc != nil {
		return svc.Spec.ClusterIP
	}
	return ""
}

// service is the Service key as the clients' watch last saw it, nil when there is none.
func (cl *Clients) service(key string) *corev1.Service {
	obj, _, _ := cl.svcs.GetByKey(key)
	svc, _ := obj.(*corev1.Service)
	return svc
}

func (cl *Clients) moved(svc string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.moves[svc] = append(cl.moves[svc], time.Now())
}

func (cl *Clients) record(kind ClientKind, svc string, at time.Time, err error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.requests[kind][svc]++
	if err != nil {
		cl.failures = append(cl.failures, Failure{Kind: kind, Service: svc, At: at, Reason: err.Error()})
	}
}

// byName resolves svc through the resolver at dnsIP, then sends a request to the answer.
func (cl *Clients) byName(ctx context.Context, kind ClientKind, dnsIP, svc string) error {
	ip, err := cl.resolve(ctx, kind, dnsIP, svc)
	if err != nil {
		return err
	}
	return cl.get(ctx, kind, ip)
}

// resolve asks the resolver at dnsIP for svc's A record over UDP, as a pod's resolver does.
func (cl *Clients) resolve(ctx context.Context, kind ClientKind, dnsIP, svc string) (string, error) {
	ns, name, _ := strings.Cut(svc, "/")
	qname, err := dnsmessage.NewName(name + "." + ns + ".svc.cluster.local.")
	if err != nil {
		return "", err
	}
	id := uint16(rand.Uint32())
	query, err := (&dnsmessage.Message{Header: dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: qname, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}}}).Pack()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, cl.o.Timeout)
	defer cancel()
	d := net.Dialer{}
	if ip := cl.local[kind]; ip != nil {
		d.LocalAddr = &net.UDPAddr{IP: ip}
	}
	conn, err := d.DialContext(ctx, "udp", net.JoinHostPort(dnsIP, "53"))
	if err != nil {
		return "", fmt.Errorf("dns: %w", err)
	}
	defer func() { _ = conn.Close() }()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(query); err != nil {
		return "", fmt.Errorf("dns: %w", shortNetErr(err))
	}
	buf := make([]byte, 1500)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return "", fmt.Errorf("dns: %w", shortNetErr(err))
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) != nil || m.ID != id {
			continue
		}
		if m.RCode != dnsmessage.RCodeSuccess {
			return "", fmt.Errorf("dns: %s", strings.TrimPrefix(m.RCode.String(), "RCode"))
		}
		for _, a := range m.Answers {
			if r, ok := a.Body.(*dnsmessage.AResource); ok {
				return netip.AddrFrom4(r.A).String(), nil
			}
		}
		return "", errors.New("dns: no A record")
	}
}

// get sends an HTTP request to ip on the wire's port, on a new connection.
func (cl *Clients) get(ctx context.Context, kind ClientKind, ip string) error {
	return cl.request(ctx, kind, "http://"+net.JoinHostPort(ip, strconv.Itoa(WireHTTPPort))+"/", ip, true)
}

// api asks kube-apiserver at ip, port 443, for its version on a new connection, verifying its
// certificate against ip: any answer is an answer (an in-cluster client reached the apiserver).
func (cl *Clients) api(ctx context.Context, kind ClientKind, ip string) error {
	return cl.request(ctx, kind, "https://"+net.JoinHostPort(ip, "443")+"/version", ip, false)
}

// request sends a GET to url as kind does; wantOK: any status but 200 is a failure.
func (cl *Clients) request(ctx context.Context, kind ClientKind, url, ip string, wantOK bool) error {
	ctx, cancel := context.WithTimeout(ctx, cl.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	var connected atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }}))
	resp, err := cl.http[kind].Do(req)
	if err != nil {
		var uerr interface{ Unwrap() error }
		if errors.As(err, &uerr) {
			err = uerr.Unwrap()
		}
		err = shortNetErr(err)
		if err.Error() == "timeout" && !connected.Load() {
			err = errors.New("connect timeout") // its SYNs went unanswered
		}
		return fmt.Errorf("%s %s: %w", req.URL.Scheme, ip, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if wantOK && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("http %s: %s", ip, resp.Status)
	}
	return nil
}

// noKeepAlive opens a connection per request, from local (any address when nil): each one
// meets kube-proxy's rules as they are. HTTPS verifies the server with roots.
func noKeepAlive(local net.IP, roots *x509.CertPool) *http.Client {
	d := &net.Dialer{}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
}

// shortNetErr keeps what a failure was (refused, timed out, unreachable), not the addresses.
func shortNetErr(err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return errors.New("timeout")
	case strings.Contains(err.Error(), "connection refused"):
		return errors.New("refused")
	case strings.Contains(err.Error(), "network is unreachable"), strings.Contains(err.Error(), "no route"):
		return errors.New("unreachable")
	case strings.Contains(err.Error(), "operation not permitted"):
		return errors.New("rejected")
	}
	return err
}

// Stop ends the clients and returns what they saw.
func (cl *Clients) Stop() *WireReport {
	cl.cancel()
	cl.wg.Wait()
	return cl.Report()
}

// Report is what the clients saw so far.
func (cl *Clients) Report() *WireReport {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	r := &WireReport{Kinds: map[ClientKind]*KindReport{}, Conntrack: map[string]uint64{}, TCP: map[string]uint64{}, order: cl.kinds}
	for k, n := range conntrackStats() {
		r.Conntrack[k] = n - cl.ctStart[k]
	}
	for k, n := range tcpStats() {
		if n > cl.tcpStart[k] {
			r.TCP[k] = n - cl.tcpStart[k]
		}
	}
	for _, k := range cl.kinds {
		kr := &KindReport{Windows: map[string][]Window{}}
		for _, n := range cl.requests[k] {
			kr.Requests += n
		}
		r.Kinds[k] = kr
	}
	fails := slices.Clone(cl.failures)
	sort.Slice(fails, func(i, j int) bool { return fails[i].At.Before(fails[j].At) })
	// Two failures of a client further apart than a few intervals are separate windows.
	gap := 3*cl.o.Interval + cl.o.Timeout
	for i := range fails {
		f := &fails[i]
		f.Since = sinceMove(cl.moves[f.Service], f.At)
		kr := r.Kinds[f.Kind]
		kr.Failures = append(kr.Failures, *f)
		ws := kr.Windows[f.Service]
		if n := len(ws); n > 0 && f.At.Sub(ws[n-1].To) <= gap {
			ws[n-1].To, ws[n-1].Failures = f.At, ws[n-1].Failures+1
			ws[n-1].addReason(f.Reason)
		} else {
			w := Window{From: f.At, To: f.At, Since: f.Since, Failures: 1}
			w.addReason(f.Reason)
			ws = append(ws, w)
		}
		kr.Windows[f.Service] = ws
	}
	return r
}

// sinceMove is at relative to the last move at or before it, else to the first one after it.
func sinceMove(moves []time.Time, at time.Time) time.Duration {
	i := sort.Search(len(moves), func(i int) bool { return moves[i].After(at) })
	switch {
	case i > 0:
		return at.Sub(moves[i-1])
	case i < len(moves):
		return at.Sub(moves[i])
	}
	return 0
}

// WireReport is what each kind of client saw.
type WireReport struct {
	// Kinds are the kinds that ran.
	Kinds map[ClientKind]*KindReport
	order []ClientKind
	// Conntrack are the namespace's conntrack counters (/proc/net/stat/nf_conntrack, summed
	// over CPUs) since the clients started: a connection whose entry clashed with another's
	// (insert_failed, drop) fails whatever kube-proxy's rules say.
	Conntrack map[string]uint64
	// TCP are the namespace's TCP counters that grew since the clients started, of those that
	// tell why a connection was refused or reset (tcpCounters).
	TCP map[string]uint64
}

// KindReport is what one kind of client saw.
type KindReport struct {
	Requests int
	Failures []Failure
	// Windows are each Service's failure windows, in time order.
	Windows map[string][]Window
}

// Window is a run of failures of one client at one Service.
type Window struct {
	From, To time.Time
	// Since is From relative to the Service's move (see Failure.Since).
	Since    time.Duration
	Failures int
	Reasons  []string
}

func (w *Window) addReason(r string) {
	if !slices.Contains(w.Reasons, r) {
		w.Reasons = append(w.Reasons, r)
	}
}

// Duration is the window's length: from its first failure to its last.
func (w Window) Duration() time.Duration { return w.To.Sub(w.From) }

// Longest is the kind's longest window, and the Service it was at.
func (k *KindReport) Longest() (Window, string) {
	var longest Window
	var at string
	for svc, ws := range k.Windows {
		for _, w := range ws {
			if at == "" || w.Duration() > longest.Duration() {
				longest, at = w, svc
			}
		}
	}
	return longest, at
}

// Failed is the number of failures of the given kinds (none for a kind that did not run).
func (r *WireReport) Failed(kinds ...ClientKind) int {
	n := 0
	for _, k := range kinds {
		if kr := r.Kinds[k]; kr != nil {
			n += len(kr.Failures)
		}
	}
	return n
}

// String is a table of the kinds (requests, failures, Services with a failure, longest window)
// followed by every window.
func (r *WireReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %9s %9s %9s %s\n", "client", "requests", "failures", "services", "longest window")
	for _, k := range r.order {
		kr := r.Kinds[k]
		longest := "-"
		if w, svc := kr.Longest(); svc != "" {
			longest = fmt.Sprintf("%v at %s (%+v from its move: %s)", w.Duration().Round(time.Millisecond), svc,
				w.Since.Round(time.Millisecond), strings.Join(w.Reasons, ", "))
		}
		fmt.Fprintf(&b, "%-14s %9d %9d %9d %s\n", k, kr.Requests, len(kr.Failures), len(kr.Windows), longest)
	}
	if len(r.Conntrack) > 0 {
		fmt.Fprintf(&b, "conntrack meanwhile: insert_failed %d, drop %d, clashres %d, invalid %d, early_drop %d\n",
			r.Conntrack["insert_failed"], r.Conntrack["drop"], r.Conntrack["clashres"], r.Conntrack["invalid"], r.Conntrack["early_drop"])
	}
	if len(r.TCP) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.TCP)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.TCP[k]))
		}
		fmt.Fprintf(&b, "tcp meanwhile: %s\n", strings.Join(parts, ", "))
	}
	for _, k := range r.order {
		kr := r.Kinds[k]
		for _, svc := range slices.Sorted(maps.Keys(kr.Windows)) {
			for _, w := range kr.Windows[svc] {
				// The wall-clock time, to find the moment in the components' logs.
				fmt.Fprintf(&b, "  %s %s: %d failures over %v from %+v after its move, at %s (%s)\n", k, svc, w.Failures,
					w.Duration().Round(time.Millisecond), w.Since.Round(time.Millisecond), w.From.UTC().Format("15:04:05.000"),
					strings.Join(w.Reasons, ", "))
			}
		}
	}
	return b.String()
}

// conntrackStats are the counters of /proc/net/stat/nf_conntrack (the calling process's network
// namespace), each summed over the CPUs; nil where the file cannot be read.
func conntrackStats() map[string]uint64 {
	data, err := os.ReadFile("/proc/net/stat/nf_conntrack")
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	names := strings.Fields(lines[0])
	out := map[string]uint64{}
	for _, line := range lines[1:] {
		for i, f := range strings.Fields(line) {
			if n, err := strconv.ParseUint(f, 16, 64); err == nil && i < len(names) {
				out[names[i]] += n
			}
		}
	}
	return out
}

// tcpCounters are the TCP counters (/proc/net/snmp's Tcp, /proc/net/netstat's TcpExt) that say
// why a connection was refused or reset: a SYN met a socket in TIME_WAIT (TWRecycled,
// PAWS*), a reset was sent or taken (OutRsts, AttemptFails, EstabResets, TCPAbort*), a segment
// fell outside its window (TCPChallengeACK, TCPSYNChallenge), a listen queue was full.
var tcpCounters = []string{"AttemptFails", "EstabResets", "OutRsts", "InErrs", "TWRecycled", "PAWSActive", "PAWSEstab",
	"TCPChallengeACK", "TCPSYNChallenge", "TCPAbortOnData", "TCPAbortOnClose", "TCPAbortOnTimeout", "ListenOverflows",
	"ListenDrops", "TCPTimeWaitOverflow", "TCPACKSkippedSynRecv", "TCPACKSkippedTimeWait"}

// tcpStats are the calling process's network namespace's tcpCounters; nil where the files
// cannot be read.
func tcpStats() map[string]uint64 {
	out := map[string]uint64{}
	for _, file := range []string{"/proc/net/snmp", "/proc/net/netstat"} {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		// Each group is a line of names and a line of values, both led by the group's name.
		for i := 0; i+1 < len(lines); i += 2 {
			names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			if len(names) == 0 || (names[0] != "Tcp:" && names[0] != "TcpExt:") {
				continue
			}
			for j := 1; j < min(len(names), len(values)); j++ {
				if n, err := strconv.ParseUint(values[j], 10, 64); err == nil && slices.Contains(tcpCounters, names[j]) {
					out[names[j]] = n
				}
			}
		}
	}
	return out
}
