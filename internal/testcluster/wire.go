// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The wire: what clients see of the cluster's Services. In the isolated network namespace the
// test runs in (IsolatedCommand), a real kube-proxy programs Service IPs into nftables or
// iptables, a real CoreDNS serves cluster.local from the apiserver, and every Running pod's IP
// is an address there on which an HTTP server (port 80) and CoreDNS (port 53) answer.
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// The wire's links: a veth pair whose node end holds the address kube-proxy binds to (kwok
// nodes have none) and carries the default route, so that packets to any Service IP leave the
// routing decision and meet kube-proxy's DNAT; the pod end holds every pod's IP as a /32.
const (
	wireNodeLink = "k8scidr-node"
	wirePodLink  = "k8scidr-pods"
	// WireNodeIP is kube-proxy's address: TEST-NET-1, which nothing outside the namespace uses.
	WireNodeIP = "192.0.2.1"
	// WireHTTPPort is where every pod IP answers HTTP: Services of the wire target port 80.
	WireHTTPPort = 80
)

// ProxyMode is kube-proxy's mode.
type ProxyMode string

// The modes the wire runs kube-proxy in.
const (
	ProxyNFTables ProxyMode = "nftables"
	ProxyIPTables ProxyMode = "iptables"
)

// Corefile is the CoreDNS configuration a distribution ships, as a template of its server block.
type Corefile struct {
	Name string
	// TTL is the kubernetes plugin's ttl: what clients and caches may keep an answer for.
	TTL time.Duration
	// Block is the server block; %[1]s is the kubeconfig, %[2]d the ready port.
	Block string
}

// The Corefiles kubeadm and kOps ship, with the kubernetes plugin reading the test cluster's
// kubeconfig, and without the plugins that need a world outside the namespace (forward to the
// node's resolver, prometheus, loop, reload): they decide nothing about cluster.local answers.
var (
	// CorefileKubeadm is kubeadm's (cmd/kubeadm/app/phases/addons/dns/manifests.go at the
	// pinned Kubernetes): ttl 30, and since 1.32 (kubernetes/kubernetes#128359) no caching of cluster.local in CoreDNS itself.
	CorefileKubeadm = Corefile{Name: "kubeadm", TTL: 30 * time.Second, Block: `.:53 {
    errors
    ready 127.0.0.1:%[2]d
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       kubeconfig %[1]s
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loadbalance
}
`}
	// CorefileKOps is kOps' CoreDNS addon's (coredns.addons.k8s.io/k8s-1.12.yaml.template at
	// kubernetes/kops@268927e), like Kubernetes' own addon (cluster/addons/dns/coredns): ttl 30
	// and cache 30, which keeps cluster.local answers, NXDOMAIN included, for those 30 s.
	CorefileKOps = Corefile{Name: "kops", TTL: 30 * time.Second, Block: `.:53 {
    errors
    ready 127.0.0.1:%[2]d
    kubernetes cluster.local. in-addr.arpa ip6.arpa {
      kubeconfig %[1]s
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
      ttl 30
    }
    cache 30
    loadbalance
}
`}
)

// WireOptions shape the wire.
type WireOptions struct {
	// Mode is kube-proxy's; default nftables.
	Mode ProxyMode
	// Corefile is CoreDNS's; default kOps'.
	Corefile Corefile
	// Node is the node kube-proxy runs as; default the first kwok node.
	Node string
}

// Wire is the running wire of a cluster.
type Wire struct {
	Options WireOptions
	c       *Cluster
	addrs   *podAddresses
	procs   []*process
	http    *http.Server
	stop    chan struct{}
}

// StartWire sets up the wire in the namespace this process runs in, which must be one
// IsolatedCommand made, and waits until kube-proxy and CoreDNS are ready. Stop ends it; the
// cluster's Stop does too.
func (c *Cluster) StartWire(ctx context.Context, o WireOptions) (*Wire, error) {
	if ok, err := Isolated(); err != nil {
		return nil, err
	} else if !ok {
		return nil, errors.New("the wire runs only in a network namespace of its own: run the test through IsolatedCommand")
	}
	if o.Mode == "" {
		o.Mode = ProxyNFTables
	}
	if o.Corefile.Block == "" {
		o.Corefile = CorefileKOps
	}
	if o.Node == "" {
		o.Node = "kwok-node-0"
		if len(c.nodeTemplates) > 0 {
			o.Node = c.nodeTemplates[0].Name
		}
	}
	w := &Wire{Options: o, c: c, stop: make(chan struct{})}
	c.stopHooks = append(c.stopHooks, w.Stop)
	if err := w.start(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

func (w *Wire) start(ctx context.Context) error {
	for _, args := range [][]string{
		{"link", "add", wireNodeLink, "type", "veth", "peer", "name", wirePodLink},
		{"link", "set", wireNodeLink, "up"},
		{"link", "set", wirePodLink, "up"},
		{"addr", "add", WireNodeIP + "/24", "dev", wireNodeLink},
		{"route", "add", "default", "dev", wireNodeLink},
	} {
		if err := ipCommand(args...); err != nil {
			return fmt.Errorf("setting up the wire's links: %w", err)
		}
	}
	var err error
	if w.addrs, err = w.watchPodAddresses(ctx); err != nil {
		return err
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(WireHTTPPort))
	if err != nil {
		return fmt.Errorf("the pods' HTTP server: %w", err)
	}
	w.http = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// The pod IP the request reached: a client can tell which Service's backend answered.
		_, _ = fmt.Fprintln(rw, r.Context().Value(http.LocalAddrContextKey))
	})}
	go func() { _ = w.http.Serve(l) }()
	if err := w.startCoreDNS(ctx); err != nil {
		return err
	}
	return w.startKubeProxy(ctx)
}

func (w *Wire) startCoreDNS(ctx context.Context) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	corefile := filepath.Join(w.c.Dir, "Corefile")
	if err := os.WriteFile(corefile, fmt.Appendf(nil, w.Options.Corefile.Block, w.c.Kubeconfig, ports[0]), 0o600); err != nil {
		return err
	}
	p, err := w.c.run(w.c.opts, "coredns", "-conf", corefile)
	if err != nil {
		return err
	}
	w.procs = append(w.procs, p)
	ready := fmt.Sprintf("http://127.0.0.1:%d/ready", ports[0])
	return waitFor(ctx, "CoreDNS to be ready", []*process{p}, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, ready), nil
	})
}

// kubeProxyConfig is kube-proxy's configuration on the wire: bound to the node link's address,
// told not to set the conntrack table size (a global sysctl, not the namespace's), and with
// the defaults of a kubeadm or kOps cluster for everything that decides when rules change.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: %s
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: ["primary"]
conntrack:
  maxPerCore: 0
`

func (w *Wire) startKubeProxy(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	cfg := filepath.Join(w.c.Dir, "kube-proxy.yaml")
	data := fmt.Appendf(nil, kubeProxyConfig, w.c.Kubeconfig, w.Options.Mode, w.Options.Node, WireNodeIP,
		w.c.opts.PodCIDR, ports[0], ports[1])
	if err := os.WriteFile(cfg, data, 0o600); err != nil {
		return err
	}
	p, err := w.c.run(w.c.opts, "kube-proxy", "--config="+cfg)
	if err != nil {
		return err
	}
	w.procs = append(w.procs, p)
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0])
	return waitFor(ctx, "kube-proxy's first sync", []*process{p}, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, healthz), nil
	})
}

// StopKubeProxy ends kube-proxy and removes the rules it wrote, as on a node whose kube-proxy
// is gone: no Service IP is served any more (the harness's own tests).
func (w *Wire) StopKubeProxy() error {
	for _, p := range w.procs {
		if p.Name == "kube-proxy" {
			p.stop(5 * time.Second)
		}
	}
	// iptables-nft's tables are nftables tables too: one flush takes both modes' rules.
	if out, err := exec.Command("nft", "flush", "ruleset").CombinedOutput(); err != nil {
		return fmt.Errorf("nft flush ruleset: %w: %s (install nftables)", err, out)
	}
	return nil
}

// Stop ends kube-proxy, CoreDNS and the servers. The links go with the namespace.
func (w *Wire) Stop() {
	select {
	case <-w.stop:
		return
	default:
		close(w.stop)
	}
	if w.http != nil {
		_ = w.http.Close()
	}
	for _, p := range w.procs {
		p.stop(5 * time.Second)
	}
}

// podAddresses keeps every Running pod's IP an address of the pod link: kube-proxy's DNAT to
// a pod then lands on the wire's listeners. A pod that is being deleted answers until it is gone
// (Options.PodTermination). An IP leaves when no pod holds it any more.
type podAddresses struct {
	mu      sync.Mutex
	holders map[string]map[string]bool // IP → pods holding it
	gone    []podGone                  // in the order seen
	errs    []error
}

// podGone is a pod's last address leaving the wire: it stopped running, or was deleted.
type podGone struct {
	key string // namespace/name
	at  time.Time
	// routed: kube-proxy's rules still sent connections to the address as it left. A client
	// whose connection kube-proxy sends there then waits in vain until kube-proxy's next sync.
	routed bool
}

func (w *Wire) watchPodAddresses(ctx context.Context) (*podAddresses, error) {
	a := &podAddresses{holders: map[string]map[string]bool{}}
	f := informers.NewSharedInformerFactory(w.c.Kube, 0)
	inf := f.Core().V1().Pods().Informer()
	held := map[string][]string{} // pod → the IPs it was given; only the informer's goroutine writes it
	onPod := func(obj any) {
		key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		var ips []string
		if pod, ok := obj.(*corev1.Pod); ok && pod.Status.Phase == corev1.PodRunning && !pod.Spec.HostNetwork {
			for _, ip := range pod.Status.PodIPs {
				ips = append(ips, ip.IP)
			}
		}
		a.update(key, held[key], ips)
		if len(ips) == 0 {
			delete(held, key)
		} else {
			held[key] = ips
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) },
		DeleteFunc: func(obj any) {
			key := keyOf(obj)
			a.update(key, held[key], nil)
			delete(held, key)
		},
	}); err != nil {
		return nil, err
	}
	f.Start(w.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("watching pods for their addresses: %w", context.Cause(ctx))
	}
	return a, nil
}

func keyOf(obj any) string {
	key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return key
}

func (a *podAddresses) update(pod string, old, now []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ip := range now {
		if a.holders[ip] == nil {
			a.holders[ip] = map[string]bool{}
			a.record(ipCommand("addr", "add", ip+"/32", "dev", wirePodLink))
		}
		a.holders[ip][pod] = true
	}
	for _, ip := range old {
		if slices.Contains(now, ip) || a.holders[ip] == nil {
			continue
		}
		delete(a.holders[ip], pod)
		if len(a.holders[ip]) == 0 {
			delete(a.holders, ip)
			a.gone = append(a.gone, podGone{key: pod, at: time.Now()})
			a.record(ipCommand("addr", "del", ip+"/32", "dev", wirePodLink))
			// Off the informer's goroutine, which adds new pods' addresses: kube-proxy's rules
			// change only at its syncs, so a moment later they tell the same.
			go func(i int) {
				routed, err := proxyRoutesTo(ip)
				a.mu.Lock()
				defer a.mu.Unlock()
				a.gone[i].routed = routed
				a.record(err)
			}(len(a.gone) - 1)
		}
	}
}

// proxyRoutesTo says whether kube-proxy's rules send connections to ip now: an endpoint's DNAT
// ("dnat to IP:port" in nftables mode with one endpoint and in iptables-nft mode, "IP . port" in
// nftables mode's endpoint maps). iptables-nft's tables are nftables tables too: one listing
// reads both modes' rules.
func proxyRoutesTo(ip string) (bool, error) {
	out, err := exec.Command("nft", "list", "ruleset").Output()
	if err != nil {
		return false, fmt.Errorf("nft list ruleset: %w (install nftables)", err)
	}
	rules := string(out)
	return strings.Contains(rules, " "+net.JoinHostPort(ip, "")) || strings.Contains(rules, " "+ip+" . "), nil
}

func (a *podAddresses) record(err error) {
	if err != nil {
		a.errs = append(a.errs, err)
	}
}

// GoneWhileRouted is when each pod whose namespace/name begins with prefix left the wire while
// kube-proxy's rules still sent connections to it, in order: a pod whose termination ended
// before kube-proxy's sync dropped its endpoint (a grace period shorter than the time its
// EndpointSlice change takes to reach kube-proxy's rules), or one removed without any.
func (w *Wire) GoneWhileRouted(prefix string) []time.Time {
	return w.gone(prefix, true)
}

// Has says whether ip is a pod address on the wire now.
func (w *Wire) Has(ip string) bool {
	w.addrs.mu.Lock()
	defer w.addrs.mu.Unlock()
	return w.addrs.holders[ip] != nil
}

// Gone is when each pod whose namespace/name begins with prefix stopped answering: its address
// left the wire (it stopped running, or was deleted), in order. kube-proxy removes its endpoint,
// and the conntrack entries bound to it, at its next sync after the endpoint leaves the API.
func (w *Wire) Gone(prefix string) []time.Time {
	return w.gone(prefix, false)
}

func (w *Wire) gone(prefix string, routedOnly bool) []time.Time {
	w.addrs.mu.Lock()
	defer w.addrs.mu.Unlock()
	var out []time.Time
	for _, d := range w.addrs.gone {
		if strings.HasPrefix(d.key, prefix) && (d.routed || !routedOnly) {
			out = append(out, d.at)
		}
	}
	return out
}

// Err is the first error keeping pod addresses, if any.
func (w *Wire) Err() error {
	w.addrs.mu.Lock()
	defer w.addrs.mu.Unlock()
	return errors.Join(w.addrs.errs...)
}
