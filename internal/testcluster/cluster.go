// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Package testcluster starts a real Kubernetes control plane on loopback for tests and the demo:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with fake nodes.
package testcluster

import (
	"bytes"
	"context"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

//go:embed stages/*.yaml
var stages embed.FS

// Node labelling that kwok is told to manage.
const (
	kwokAnnotation = "kwok.x-k8s.io/node"
	// NodeLabel marks the fake nodes; tests select on it.
	NodeLabel = "k8scidr.io/test-node"
)

// Options shape the cluster. The zero value is a usable single-stack cluster.
type Options struct {
	// ServiceCIDRs become --service-cluster-ip-range (one per family). Default 100.64.0.0/13,
	// kOps' default, which collides with Tailscale's 100.64.0.0/10.
	ServiceCIDRs []string
	// Nodes is the number of fake nodes. Default 2.
	Nodes int
	// PodCIDR is split into one /24 per node (IPv4) for spec.podCIDR. Default 100.96.0.0/11.
	PodCIDR string
	// NodePodCIDRs overrides the per-node pod ranges (one entry per node, comma-separated for dual-stack).
	NodePodCIDRs []string
	// NodeTemplates, when set, are the nodes: each registered under its own name with its labels,
	// taints, addresses, capacity and pod ranges (a rehearsal's copy of a real cluster's nodes),
	// managed by kwok like the others. Nodes and NodePodCIDRs then follow from them.
	NodeTemplates []corev1.Node
	// ServingCertIPs are IP SANs of kube-apiserver's serving certificate beside loopback's, as
	// kubeadm gives it its serviceSubnet's first address (the in-cluster kubernetes Service's).
	ServingCertIPs []string
	// APIServerFlags are appended to kube-apiserver's command line, e.g. --runtime-config=….
	APIServerFlags []string
	// ControllerManagerFlags are appended to kube-controller-manager's command line.
	ControllerManagerFlags []string
	// SchedulerFlags are appended to kube-scheduler's command line, e.g. --kube-api-qps=500.
	SchedulerFlags []string
	// BinDir holds the binaries; default $K8SCIDR_TESTBIN, else the repository's bin/.
	BinDir string
	// Dir is the work directory; default a new temporary directory, removed by Stop.
	Dir string
	// Detached processes outlive the caller (make cluster-up); stop them with StopDir.
	Detached bool
	// StartTimeout bounds Start. Default 90 s.
	StartTimeout time.Duration
	// Calico, a release such as Calico331, installs that release's crd.projectcalico.org/v1
	// CRDs and makes pods wait for an address from Calico's IPAM (StartCalicoIPAM) instead of
	// taking one from kwok.
	Calico string
	// CalicoAPIServer also runs Calico's API server (of the newest release, on the Calico CRDs),
	// so that projectcalico.org/v3 is served as in an install with the API server.
	CalicoAPIServer bool
	// PodTermination is how long a deleted pod stays Terminating (Running, Ready, and a serving
	// terminating endpoint of its Services) before kwok removes it, as a kubelet takes the
	// pod's grace period while its application drains (a preStop sleep, as the Kubernetes
	// documentation advises for rolling updates without errors). Default 0: kwok removes it
	// at once, and a roll's EndpointSlices may for a moment hold no endpoint at all.
	PodTermination time.Duration
}

// Cluster is a running control plane.
type Cluster struct {
	Dir          string
	Kubeconfig   string
	Host         string
	Token        string
	CACert       []byte
	ClientCert   []byte
	ClientKey    []byte
	ServiceCIDRs []string
	NodePodCIDRs []string
	RESTConfig   *rest.Config
	Kube         kubernetes.Interface
	// BinDir holds the binaries and data (e.g. calico-crds-<release>/) the cluster was started from.
	BinDir string

	procs         []*process
	nodeTemplates []corev1.Node
	ownDir        bool
	stopHooks     []func()
	opts          Options  // as started, for restarts
	apiArgs       []string // kube-apiserver's command line, for restarts
}

// state is what a detached cluster leaves in its directory for StopDir.
type state struct {
	Kubeconfig string    `json:"kubeconfig"`
	Processes  []process `json:"processes"`
}

const stateFile = "cluster.json"

// Start brings up the cluster and waits until nodes are Ready and the default ServiceCIDR is
// Ready. On error, everything already started is stopped.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	o.defaults()
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	podCIDRs, err := o.nodePodCIDRs()
	if err != nil {
		return nil, err
	}
	c := &Cluster{ServiceCIDRs: o.ServiceCIDRs, NodePodCIDRs: podCIDRs, Dir: o.Dir, BinDir: o.BinDir, nodeTemplates: o.NodeTemplates}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "k8scidr-cluster-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	}
	if err := c.start(ctx, o); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (o *Options) defaults() {
	if len(o.ServiceCIDRs) == 0 {
		o.ServiceCIDRs = []string{"100.64.0.0/13"}
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "100.96.0.0/11"
	}
	if o.BinDir == "" {
		o.BinDir = DefaultBinDir()
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
	}
}

// DefaultBinDir is $K8SCIDR_TESTBIN, else the bin/ of the repository holding the working directory.
func DefaultBinDir() string {
	if d := os.Getenv("K8SCIDR_TESTBIN"); d != "" {
		return d
	}
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "bin", "kube-apiserver")); err == nil {
			return filepath.Join(dir, "bin")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "bin"
		}
		dir = parent
	}
}

func (o *Options) nodePodCIDRs() ([]string, error) {
	if o.NodeTemplates != nil {
		out := make([]string, len(o.NodeTemplates))
		for i, n := range o.NodeTemplates {
			out[i] = strings.Join(n.Spec.PodCIDRs, ",")
		}
		return out, nil
	}
	if o.NodePodCIDRs != nil {
		if len(o.NodePodCIDRs) != o.Nodes {
			return nil, fmt.Errorf("NodePodCIDRs has %d entries for %d nodes", len(o.NodePodCIDRs), o.Nodes)
		}
		return o.NodePodCIDRs, nil
	}
	prefix, err := netip.ParsePrefix(o.PodCIDR)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 24 || o.Nodes > 1<<(24-prefix.Bits()) {
		return nil, fmt.Errorf("PodCIDR %q must be an IPv4 prefix of /24 or wider with room for %d /24s", o.PodCIDR, o.Nodes)
	}
	out := make([]string, o.Nodes)
	base := prefix.Masked().Addr().As4()
	for i := range out {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(base[:])+uint32(i)<<8)
		out[i] = netip.PrefixFrom(netip.AddrFrom4(a), 24).String()
	}
	return out, nil
}

func (c *Cluster) start(ctx context.Context, o Options) error {
	for _, d := range []string{"pki", "logs", "etcd", "stages"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}
	creds, err := newPKI(o.ServingCertIPs)
	if err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	files, err := creds.writeFiles(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c.Host = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	c.Token, c.CACert, c.ClientCert, c.ClientKey = creds.token, creds.caCert, creds.adminCert, creds.adminKey
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*creds.kubeconfig(c.Host), c.Kubeconfig); err != nil {
		return err
	}
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	c.RESTConfig.QPS, c.RESTConfig.Burst = 100, 200
	if c.Kube, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return err
	}

	etcd, err := c.run(o, "etcd", "--name=test", "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--initial-cluster=test=http://127.0.0.1:%d", ports[1]),
		"--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "etcd to be healthy", []*process{etcd}, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, etcdURL+"/health"), nil
	}); err != nil {
		return err
	}

	c.opts = o
	c.apiArgs = append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + filepath.Join(c.Dir, "pki"),
		"--tls-cert-file=" + files["server.crt"], "--tls-private-key-file=" + files["server.key"],
		"--client-ca-file=" + files["ca.crt"],
		"--token-auth-file=" + files["tokens.csv"], "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + files["sa.key"], "--service-account-signing-key-file=" + files["sa.key"],
		"--service-cluster-ip-range=" + strings.Join(c.ServiceCIDRs, ","),
		// 127.0.0.1 is not a valid endpoint for the kubernetes Service.
		"--endpoint-reconciler-type=none",
		// Fake pods need no token; without the plugin a pod in a brand-new namespace is not
		// rejected while the controller-manager has yet to create its default ServiceAccount.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true", "--profiling=false",
		// The aggregation layer, as kubeadm sets it up: an aggregated API server (Calico's,
		// Options.CalicoAPIServer) trusts the user kube-apiserver names in these headers when the
		// request comes with the front proxy's client certificate.
		"--requestheader-client-ca-file=" + files["front-proxy-ca.crt"], "--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + files["front-proxy-client.crt"], "--proxy-client-key-file=" + files["front-proxy-client.key"],
	}, o.APIServerFlags...)
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}

	if o.Calico != "" {
		if err := c.InstallCalicoCRDs(ctx, o.Calico); err != nil {
			return err
		}
	}
	calicoAPIServed := func() error { return nil }
	if o.CalicoAPIServer {
		if o.Calico == "" {
			return errors.New("Options.CalicoAPIServer needs Options.Calico: the API server stores in Calico's CRDs")
		}
		if calicoAPIServed, err = c.startCalicoAPIServer(ctx, o, files); err != nil {
			return err
		}
	}
	others, err := c.startAgents(o, files)
	if err != nil {
		return err
	}
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if err := c.waitSettled(ctx, others); err != nil {
		return err
	}
	return calicoAPIServed()
}

// startAPIServer runs kube-apiserver with c.apiArgs and waits until it is ready.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	apiserver, err := c.run(c.opts, "kube-apiserver", c.apiArgs...)
	if err != nil {
		return err
	}
	return waitFor(ctx, "kube-apiserver to be ready", []*process{apiserver}, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
}

// podDeleteStage is the kwok stage that removes a deleted pod.
const podDeleteStage = "pod-delete.yaml"

// delayed is a kwok stage that waits d before its next step.
func delayed(stage []byte, d time.Duration) []byte {
	return bytes.Replace(stage, []byte("\n  next:"), fmt.Appendf(nil, "\n  delay:\n    durationMilliseconds: %d\n  next:", d.Milliseconds()), 1)
}

// startAgents starts the components that talk only to the apiserver.
func (c *Cluster) startAgents(o Options, files map[string]string) ([]*process, error) {
	var stageArgs []string
	err := fs.WalkDir(stages, "stages", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := stages.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(c.Dir, path)
		if o.Calico != "" && filepath.Base(path) == podReadyStage {
			data = calicoPodReady(data)
		}
		if o.PodTermination > 0 && filepath.Base(path) == podDeleteStage {
			data = delayed(data, o.PodTermination)
		}
		stageArgs = append(stageArgs, "--config="+dst)
		return os.WriteFile(dst, data, 0o600)
	})
	if err != nil {
		return nil, err
	}
	kc := "--kubeconfig=" + c.Kubeconfig
	specs := []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", append([]string{kc, "--secure-port=0", "--leader-elect=false", "--controllers=*",
			"--service-account-private-key-file=" + files["sa.key"], "--root-ca-file=" + files["ca.crt"],
			"--allocate-node-cidrs=false"}, o.ControllerManagerFlags...)},
		{"kube-scheduler", append([]string{kc, "--secure-port=0", "--leader-elect=false"}, o.SchedulerFlags...)},
		{"kwok", append([]string{kc, "--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake",
			"--node-lease-duration-seconds=40"}, stageArgs...)},
	}
	var started []*process
	for _, s := range specs {
		p, err := c.run(o, s.name, s.args...)
		if err != nil {
			return nil, err
		}
		started = append(started, p)
	}
	return started, nil
}

// waitSettled waits for every node to be Ready (kwok works) and the default ServiceCIDR to be
// Ready (the controller-manager works).
func (c *Cluster) waitSettled(ctx context.Context, procs []*process) error {
	err := waitFor(ctx, "nodes to be Ready", procs, func(ctx context.Context) (bool, error) {
		nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeLabel})
		// Errors are retried: the cluster is still coming up.
		return err == nil && len(nodes.Items) == len(c.NodePodCIDRs) && !slices.ContainsFunc(nodes.Items, notReady), nil
	})
	if err != nil {
		return err
	}
	caps, err := k8sops.Probe(c.Kube.Discovery())
	if err != nil {
		return err
	}
	if caps.ServiceCIDRVersion == "" {
		return nil // An old or restricted apiserver: nothing to wait for.
	}
	gvr, err := caps.ServiceCIDRResource()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	return waitFor(ctx, "the default ServiceCIDR to be Ready", procs, func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(gvr).Get(ctx, k8sops.DefaultServiceCIDRName, metav1.GetOptions{})
		return err == nil && k8sops.ConditionTrue(obj, "Ready"), nil
	})
}

func (c *Cluster) run(o Options, name string, args ...string) (*process, error) {
	return c.runEnv(o, name, nil, args...)
}

// runEnv is run with env added to the process's environment.
func (c *Cluster) runEnv(o Options, name string, env []string, args ...string) (*process, error) {
	p, err := startProcess(name, filepath.Join(o.BinDir, name), args, env, filepath.Join(c.Dir, "logs"), o.Detached)
	if err != nil {
		return nil, fmt.Errorf("%w (run `make testbin` to build the test binaries)", err)
	}
	c.procs = append(c.procs, p)
	if o.Detached {
		return p, c.writeState()
	}
	return p, nil
}

// waitFor polls cond until it holds, failing early (with the log tail) if a watched process exits.
func waitFor(ctx context.Context, what string, procs []*process, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range procs {
			if p.exited() {
				return false, fmt.Errorf("%s exited; last lines of %s:\n%s", p.Name, p.Log, logTail(p.Log, 20))
			}
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		addr, err := netip.ParseAddrPort(l.Addr().String())
		if err != nil {
			return nil, err
		}
		ports = append(ports, int(addr.Port()))
	}
	return ports, nil
}

// Stop ends the processes this cluster started and removes its directory if it made it.
func (c *Cluster) Stop() {
	for _, hook := range slices.Backward(c.stopHooks) {
		hook()
	}
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Go(func() { p.stop(5 * time.Second) })
	}
	wg.Wait()
	if c.ownDir && os.Getenv("K8SCIDR_KEEP_CLUSTER_DIR") == "" {
		_ = os.RemoveAll(c.Dir)
	}
}

func (c *Cluster) writeState() error {
	s := state{Kubeconfig: c.Kubeconfig}
	for _, p := range c.procs {
		s.Processes = append(s.Processes, *p)
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, stateFile), data, 0o600)
}

// StopDir stops a detached cluster started in dir, by the PIDs it recorded, and removes dir.
func StopDir(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("reading %s: %w", stateFile, err)
	}
	var errs []error
	for i := len(s.Processes) - 1; i >= 0; i-- {
		errs = append(errs, stopByPID(s.Processes[i], 10*time.Second))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
