// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Command k8scidr-demo is `make demo`: the migration of write-ups 000/001 on a loopback cluster.
// It starts the cluster in the conflicted state (kOps' default ranges inside Tailscale's
// 100.64.0.0/10), then walks examples/migration stage by stage with terraform plan and apply
// and the locally built provider, doing the steps outside the Kubernetes API where they fall,
// and prints where Services, pods and node podCIDRs stand before and after. The screen shows each
// stage as its reviewer would see it (the pull-request summary of the saved plan, then what the
// apply did); terraform's full output goes to the log file it names (bin/demo.log).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/preflight"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/workloadroll"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/plansummary"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

var (
	oldServices = netip.MustParsePrefix("100.64.0.0/13")
	newServices = netip.MustParsePrefix("172.24.0.0/15")
	oldPods     = netip.MustParsePrefix("100.96.0.0/11")
	newPods     = netip.MustParsePrefix("172.16.0.0/13")
	tailscale   = netip.MustParsePrefix("100.64.0.0/10")
)

func main() {
	root := flag.String("root", ".", "repository root")
	groups := flag.Int("groups", 4, "namespaces of ten Services and four workloads each")
	flag.Parse()
	onWire, err := isolate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	if err := run(*root, *groups, onWire); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// isolate runs the demo again in a network namespace of its own (testcluster.Reexec), where
// the wire shows what clients see, and exits with it; it returns whether this process is that
// run. Only root can make the namespace: otherwise the demo runs here and says why it counts
// nothing on the wire.
func isolate() (bool, error) {
	ok, err := testcluster.Reexec()
	if !ok && err == nil {
		fmt.Println("The wire (a real kube-proxy and CoreDNS, and clients of every kind, in a network namespace of the demo's own) " +
			"needs root to make that namespace: this run moves everything as usual but counts no request on the wire.")
	}
	return ok, err
}

func say(format string, args ...any) { fmt.Printf("\n== "+format+"\n", args...) }

func run(root string, groups int, onWire bool) error {
	ctx := context.Background()
	root, _ = filepath.Abs(root)
	bin := filepath.Join(root, "bin")
	say("Starting a loopback cluster as kOps sets one up: Services in %s, Calico pool %s", oldServices, oldPods)
	o := testcluster.Options{Nodes: 3, Calico: testcluster.Calico331, BinDir: bin,
		// kube-apiserver's endpoints for default/kubernetes (the test clusters turn them off: they
		// advertise 127.0.0.1), so stage 2's bridge has endpoints to copy: the wire's node address.
		APIServerFlags: []string{"--advertise-address=" + testcluster.WireNodeIP, "--endpoint-reconciler-type=lease"}}
	if onWire {
		// In the demo's own network namespace, kube-apiserver listens there too, with a
		// certificate for default/kubernetes's old and new IPs: in-cluster clients reach it.
		o.APIServerFlags = append(o.APIServerFlags, "--bind-address=0.0.0.0")
		o.ServingCertIPs = []string{"100.64.0.1", "172.24.0.1"}
		// A deleted pod serves while it terminates, as a real one drains: the rolls' failures
		// are then the migration's, not kwok's (which removes a pod at once).
		o.PodTermination = 3 * time.Second
	}
	c, err := testcluster.Start(ctx, o)
	if err != nil {
		return err
	}
	defer c.Stop()
	if _, err := c.StartCalicoIPAM(ctx); err != nil {
		return err
	}
	seeded, err := c.Seed(ctx, groups)
	if err != nil {
		return err
	}
	client, err := k8sops.NewClient(c.RESTConfig, "k8scidr-demo", k8sops.CalicoAuto)
	if err != nil {
		return err
	}
	before, err := census(ctx, c, client)
	if err != nil {
		return err
	}
	all, err := c.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("%d Services (%d with a ClusterIP besides default/kubernetes, %d of them LoadBalancer; the rest headless or ExternalName), %d workloads with %d pods, %d nodes.\n",
		len(all.Items), len(seeded.ServiceIPs), len(seeded.LoadBalancers), len(seeded.Workloads), seeded.Pods, len(c.NodePodCIDRs))
	say("What collides with Tailscale's %s", tailscale)
	if err := overlaps(ctx, client); err != nil {
		return err
	}

	var wire *wireWatch
	if onWire {
		if wire, err = startWireWatch(ctx, c, seeded.WebServices()); err != nil {
			return err
		}
		defer wire.cl.Stop()
	}
	w, err := newWorkspace(root, bin, c.Kubeconfig)
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(w.dir) }()
	defer w.log.Close()
	fmt.Printf("terraform's full output goes to %s\n", w.logPath)
	// examples/migration keeps its state in the cluster (the kubernetes backend), in the
	// namespace examples/rbac/k8scidr-state.yaml makes.
	if err := c.NamespacedRoles(ctx, filepath.Join(root, "examples", "rbac", "k8scidr-state.yaml"), nil); err != nil {
		return err
	}
	if err := w.tf(nil, "init", "-input=false", "-no-color"); err != nil {
		return err
	}
	stages := []struct {
		n      int
		title  string
		before func() error
	}{
		{1, "Stage 1: new Service ranges (and a keep-range for each group of LoadBalancer IPs), then every Service moves, kube-dns first; bridges keep every old IP answering (100.64.0.10 and each Service's)", nil},
		{2, "Stage 2: default/kubernetes moves to 172.24.0.1; a bridge keeps 100.64.0.1 answering with the apiserver's endpoints; the old default range is retired", func() error {
			say("Outside the API (kOps, the output kops_steps' service_range): serviceClusterIPRange = %s, kubeDNS.serverIP and "+
				"clusterDNS = 172.24.0.10, additionalSans += 100.64.0.1; control plane rolled", newServices)
			if err := c.RestartAPIServer(ctx, []string{newServices.String()}); err != nil {
				return err
			}
			fmt.Println("kube-apiserver restarted with --service-cluster-ip-range=" + newServices.String())
			if err := wire.apiBack(ctx); err != nil {
				return err
			}
			// kwok nodes run no kubelet: the kubelets' clusterDNS is written where kubeadm keeps
			// it, which stage 4's removal of the DNS bridge reads.
			if err := c.SetKubeletClusterDNS(ctx, "172.24.0.10"); err != nil {
				return err
			}
			fmt.Println("kube-system/kubelet-config: clusterDNS 172.24.0.10 (as kubeadm keeps it; kwok nodes run no kubelet)")
			return nil
		}},
		{3, "Stage 3: restart every pod started before default/kubernetes (and kube-dns) moved", func() error {
			say("Outside the API (kOps): the nodes rolled, so kubelets hand out clusterDNS 172.24.0.10. (kwok nodes run no kubelet: kube-system/kubelet-config says so since stage 2.)")
			return nil
		}},
		{4, "Stage 4: the bridges go (DNS, apiserver, old IPs); kube-apiserver recreates the default range on 172.24.0.0/15", nil},
		{5, "Stage 5: new pod pool 172.16.0.0/13, the old pool imported and disabled, every workload with a pod in it restarted", nil},
		{6, "Stage 6: the old pool is destroyed once drained", nil},
	}
	for _, st := range stages {
		if st.before != nil {
			if err := st.before(); err != nil {
				return err
			}
		}
		say("%s", st.title)
		wire.between()
		if err := w.plan(fmt.Sprintf("Stage %d: the plan a reviewer sees", st.n), fmt.Sprintf("-var=stage=%d", st.n)); err != nil {
			return err
		}
		if err := w.apply(); err != nil {
			return err
		}
		wire.stage(st.n)
		if st.n == 3 {
			// Every pod started before the migration has restarted: the clients are those of
			// the pods running now (resolver on 172.24.0.10, the new IPs kept, KUBERNETES_SERVICE_HOST 172.24.0.1).
			if err := wire.restart(ctx); err != nil {
				return err
			}
		}
	}
	wire.stop()
	say("Outside the API (kOps): nonMasqueradeCIDR/podCIDR changed, allocateNodeCIDRs: false, rolling update replaces the nodes")
	if err := c.ReplaceNodes(ctx); err != nil {
		return err
	}
	if _, err := c.WaitPods(ctx, "", "app", seeded.Pods, func(p corev1.Pod) bool { return p.Status.PodIP != "" }); err != nil {
		return err
	}
	// Terraform reads the new node list on the next refresh.
	if err := w.tf(nil, "apply", "-refresh-only", "-auto-approve", "-input=false", "-no-color", "-var=stage=6"); err != nil {
		return err
	}
	after, err := census(ctx, c, client)
	if err != nil {
		return err
	}
	say("Before and after")
	printTable(before, after)
	say("What still collides with Tailscale's %s", tailscale)
	if err := overlaps(ctx, client); err != nil {
		return err
	}
	say("A last plan finds nothing to do")
	if err := w.tf(nil, "plan", "-input=false", "-no-color", "-var=stage=6", "-detailed-exitcode"); err != nil {
		return fmt.Errorf("the last plan is not empty (exit 2 means changes): %w", err)
	}
	fmt.Printf("No changes: the cluster matches the configuration.\n\nThe migration is done. terraform's full output: %s\n", w.logPath)
	return nil
}

// counts is where things stand: Services, pods and node podCIDRs per range.
type counts struct {
	services, pods, nodes map[string]int
}

func rangeOf(ip netip.Addr, ranges ...netip.Prefix) string {
	for _, r := range ranges {
		if r.Contains(ip) {
			return r.String()
		}
	}
	return "elsewhere"
}

func census(ctx context.Context, c *testcluster.Cluster, client *k8sops.Client) (counts, error) {
	out := counts{services: map[string]int{}, pods: map[string]int{}, nodes: map[string]int{}}
	svcs, err := c.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, err
	}
	for _, s := range svcs.Items {
		if ip, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil {
			out.services[rangeOf(ip, oldServices, newServices)]++
		}
	}
	a, err := workloadroll.ListPodAllocations(ctx, client, []netip.Prefix{oldPods, newPods}, nil)
	if err != nil {
		return out, err
	}
	for _, r := range a.Ranges {
		out.pods[r.CIDR] = r.Pods
	}
	for _, n := range a.Outside {
		out.pods["elsewhere"] += n
	}
	for _, n := range a.Nodes {
		if len(n.PodCIDRs) == 0 {
			out.nodes["none"]++
		}
		for _, s := range n.PodCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				out.nodes[rangeOf(p.Addr(), oldPods, newPods)]++
			}
		}
	}
	return out, nil
}

func printTable(before, after counts) {
	fmt.Println("| | range | before | after |")
	fmt.Println("|---|---|---:|---:|")
	row := func(what string, b, a map[string]int, keys ...string) {
		for _, k := range keys {
			if b[k] != 0 || a[k] != 0 {
				fmt.Printf("| %s | %s | %d | %d |\n", what, k, b[k], a[k])
			}
		}
	}
	row("Service ClusterIPs", before.services, after.services, oldServices.String(), newServices.String(), "elsewhere")
	row("pod IPs", before.pods, after.pods, oldPods.String(), newPods.String(), "elsewhere")
	row("node podCIDRs", before.nodes, after.nodes, oldPods.String(), newPods.String(), "elsewhere", "none")
}

func overlaps(ctx context.Context, client *k8sops.Client) error {
	ranges, err := preflight.GatherRanges(ctx, client)
	if err != nil {
		return err
	}
	ranges = append(ranges, preflight.NamedRange{Kind: preflight.RangeReserved, Name: "tailscale", CIDR: tailscale})
	conflicts := preflight.FindConflicts(ranges)
	onPurpose := 0
	for _, cf := range conflicts {
		fmt.Printf("  %-14s %-28s %-18s overlaps %s %s in %s\n", cf.A.Kind, cf.A.Name, cf.A.CIDR, cf.B.Kind, cf.B.Name, cf.Overlap)
		if keepRange(cf.A) || keepRange(cf.B) {
			onPurpose++
		}
	}
	switch {
	case len(conflicts) == 0:
		fmt.Println("Nothing overlaps.")
	case onPurpose == len(conflicts):
		fmt.Println("Only the keep-ranges overlap, on purpose: the LoadBalancer Services keep their ClusterIPs (and cloud load balancers) until you recreate them.")
	default:
		fmt.Printf("%d overlap(s).\n", len(conflicts))
	}
	return nil
}

// keepRange says whether r is a keep-range of examples/migration (a ServiceCIDR keep-…).
func keepRange(r preflight.NamedRange) bool {
	return r.Kind == preflight.RangeServiceCIDR && strings.HasPrefix(r.Name, "keep-")
}

// workspace runs the built terraform on examples/migration (its .tf files linked, not copied) with
// the locally built provider from a filesystem mirror; terraform's output goes to log.
type workspace struct {
	dir, terraform, logPath string
	env                     []string
	log                     *os.File
	lastSummary             string // services_summary as the last apply printed it
}

func newWorkspace(root, bin, kubeconfig string) (*workspace, error) {
	dir, err := os.MkdirTemp("", "k8scidr-demo-")
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"main.tf", "stack.tf"} {
		if err := os.Symlink(filepath.Join(root, "examples", "migration", f), filepath.Join(dir, f)); err != nil {
			return nil, err
		}
	}
	// The built provider installed as a release is, from a mirror: init then honours the
	// example's version constraint and writes the lock file, as it does for users.
	rc, err := testcluster.ProviderMirror(filepath.Join(bin, "terraform"), filepath.Join(bin, "terraform-provider-k8scidr"),
		filepath.Join(dir, "mirror"), "0.1.0", false)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(bin, "demo.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	return &workspace{dir: dir, terraform: filepath.Join(bin, "terraform"), logPath: logPath, log: log,
		env: append(append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "KUBE_CONFIG_PATH="+kubeconfig),
			testcluster.MigrationVars...)}, nil
}

// tf runs terraform with its output in the log; with capture (for -json commands) the output
// goes there, and the log gets each record's message and diagnostic detail. On failure the
// screen gets the end of the log.
func (w *workspace) tf(capture *bytes.Buffer, args ...string) error {
	line := "$ terraform " + strings.Join(args, " ")
	fmt.Println(line)
	if _, err := fmt.Fprintf(w.log, "\n%s\n", line); err != nil {
		return err
	}
	var text bytes.Buffer
	cmd := exec.Command(w.terraform, append([]string{"-chdir=" + w.dir}, args...)...)
	cmd.Env, cmd.Stdout, cmd.Stderr = w.env, io.MultiWriter(w.log, &text), io.MultiWriter(w.log, &text)
	if capture != nil {
		cmd.Stdout = capture
	}
	err := cmd.Run()
	if capture != nil {
		records := readable(capture.Bytes())
		text.WriteString(records)
		if _, werr := io.WriteString(w.log, records); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		lines := strings.Split(strings.TrimSpace(text.String()), "\n")
		fmt.Printf("%s\n(the end of terraform's output; all of it is in %s)\n", strings.Join(lines[max(0, len(lines)-40):], "\n"), w.logPath)
		return fmt.Errorf("terraform %s: %w", args[0], err)
	}
	return nil
}

// readable renders terraform's -json records as text: each message, and a diagnostic's detail.
func readable(records []byte) string {
	var out strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(records))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var r struct {
			Message    string `json:"@message"`
			Diagnostic *struct {
				Detail string `json:"detail"`
			} `json:"diagnostic"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			out.WriteString(sc.Text() + "\n")
			continue
		}
		out.WriteString(r.Message + "\n")
		if r.Diagnostic != nil && r.Diagnostic.Detail != "" {
			out.WriteString("  " + strings.ReplaceAll(r.Diagnostic.Detail, "\n", "\n  ") + "\n")
		}
	}
	return out.String()
}

// plan saves the plan of the stage to stage.tfplan and prints its pull-request summary: the
// moves, restarts and changes a reviewer approves, with the warnings. The log gets the plan as
// terraform shows it.
func (w *workspace) plan(title string, args ...string) error {
	var jsonLog bytes.Buffer
	err := w.tf(&jsonLog, append([]string{"plan", "-input=false", "-json", "-out=stage.tfplan"}, args...)...)
	if err != nil {
		return err
	}
	var planJSON bytes.Buffer
	if err := w.tf(nil, "show", "-no-color", "stage.tfplan"); err != nil {
		return err
	}
	cmd := exec.Command(w.terraform, "-chdir="+w.dir, "show", "-json", "stage.tfplan")
	cmd.Env, cmd.Stdout, cmd.Stderr = w.env, &planJSON, w.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("terraform show -json: %w", err)
	}
	p, err := plansummary.ReadPlan(&planJSON)
	if err != nil {
		return err
	}
	diags, err := plansummary.ReadLog(&jsonLog)
	if err != nil {
		return err
	}
	fmt.Print(plansummary.Summarize(p, demoDiagnostics(diags), plansummary.Options{Title: title, Entries: 6}))
	return nil
}

// apply applies stage.tfplan and prints its outcome: terraform's last line and each warning's
// summary (their details are in the log).
func (w *workspace) apply() error {
	var jsonLog bytes.Buffer
	if err := w.tf(&jsonLog, "apply", "-input=false", "-json", "stage.tfplan"); err != nil {
		return err
	}
	diags, err := plansummary.ReadLog(bytes.NewReader(jsonLog.Bytes()))
	if err != nil {
		return err
	}
	if line := plansummary.ChangeSummary(jsonLog.Bytes()); line != "" {
		fmt.Println(line)
	}
	for _, d := range demoDiagnostics(diags) {
		fmt.Printf("  %s: %s\n", d.Severity, d.Summary)
	}
	// What the recreation did and left to do: outputs, not warnings; shown when they change.
	outputs := plansummary.Outputs(jsonLog.Bytes())
	var summary string
	var next []string
	_ = json.Unmarshal(outputs["services_summary"], &summary)
	_ = json.Unmarshal(outputs["next_steps"], &next)
	if summary != "" && summary != w.lastSummary {
		fmt.Printf("  services_summary: %s\n", summary)
		for _, n := range next {
			fmt.Printf("  next step: %s\n", n)
		}
	}
	w.lastSummary = summary
	return nil
}

// demoDiagnostics drops the warning the demo's own dev override causes on every command.
func demoDiagnostics(diags []plansummary.Diagnostic) []plansummary.Diagnostic {
	return slices.DeleteFunc(diags, func(d plansummary.Diagnostic) bool {
		return strings.Contains(d.Summary, "development overrides")
	})
}
