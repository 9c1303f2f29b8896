// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Command k8scidr-rehearse rehearses a migration on a twin of the cluster before the cluster is
// touched.
//
//	k8scidr-rehearse export -out DIR [-kubeconfig PATH] [-context NAME]
//
// writes, read-only (the plan role of examples/rbac suffices), a snapshot of what the migration
// touches or is touched by: a directory of YAML a reviewer can read, with snapshot.yaml its table
// of contents. Secrets never; ConfigMaps only those the provider reads.
//
//	k8scidr-rehearse run -snapshot DIR -config DIR [-stages 1,2,3] [-var-file FILE] [-report FILE]
//
// starts a local control plane of the snapshot's Kubernetes minor (built by the provider
// repository's `make testbin testbin-matrix`; -bin names that bin/), with kwok nodes named and
// labelled as the real ones and Calico's IPAM where the snapshot has Calico pools, loads the
// objects with their IPs, and applies the configuration stage by stage as the pipeline would
// (plan to a file, apply the saved plan), restarting kube-apiserver on the new Service range
// where the guide does. The report (Markdown, the pull-request comment's format) says per stage
// what was planned, what the apply did, refused and why, and what it could not rehearse. The exit
// code is 1 when a stage failed or the journal is not empty at the end, 2 when the rehearsal
// itself could not run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/rehearse"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	failed := false
	switch os.Args[1] {
	case "export":
		err = export(ctx, os.Args[2:])
	case "run":
		failed, err = run(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8scidr-rehearse:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: k8scidr-rehearse export -out DIR [-kubeconfig PATH] [-context NAME]\n"+
		"       k8scidr-rehearse run -snapshot DIR -config DIR [flags]   (run -h for the flags)")
	os.Exit(2)
}

func export(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("export", flag.ExitOnError)
	out := fs.String("out", "", "directory to write the snapshot to (required)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	_ = fs.Parse(args)
	if *out == "" {
		return fmt.Errorf("export: -out DIR is required")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if *kubeconfig != "" {
		rules.ExplicitPath = *kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kubeContext}).ClientConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = "k8scidr-rehearse"
	m, err := rehearse.Export(ctx, cfg, *out)
	if err != nil {
		return err
	}
	fmt.Printf("Snapshot of %s (Kubernetes %s) in %s, %.1f s\n", cfg.Host, m.Server.GitVersion, *out, m.Seconds)
	var table strings.Builder
	table.WriteString("file\tobjects\tbytes\t\n")
	var objects int
	var size int64
	for _, f := range m.Files {
		if f.Missing != "" {
			fmt.Fprintf(&table, "%s\t-\t%s\t\n", f.Name, f.Missing)
			continue
		}
		fmt.Fprintf(&table, "%s\t%d\t%d\t\n", f.Name, f.Objects, f.Bytes)
		objects, size = objects+f.Objects, size+f.Bytes
	}
	fmt.Fprintf(&table, "total\t%d\t%d\t\n", objects, size)
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
	if _, err := io.WriteString(tw, table.String()); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("Service ranges: %s (%s)\nkube-controller-manager: %s\n", strings.Join(m.ServiceClusterIPRanges, ","), m.RangesSource, m.ControllerManagerSource)
	return nil
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func run(ctx context.Context, args []string) (bool, error) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	snapshot := fs.String("snapshot", "", "snapshot directory (k8scidr-rehearse export)")
	config := fs.String("config", "", "the configuration's root module directory")
	stagesFlag := fs.String("stages", "", "values of the stage variable, applied in order, e.g. 1,2,3 or 1-6 "+
		"(default: 1-6 when the configuration has a variable \"stage\", as examples/migration does; else one apply)")
	stageVar := fs.String("stage-var", "stage", "the configuration's stage variable")
	var varFiles multi
	fs.Var(&varFiles, "var-file", "a variable file for every plan (repeatable)")
	restartBefore := fs.String("restart-apiserver-before", "2", "the stage before which kube-apiserver restarts on the new Service range (\"\": never)")
	rollNodesBefore := fs.String("roll-nodes-before", "3", "the stage before which the nodes roll: kubelet-config's clusterDNS is set to the DNS Service's IP, or without it (kOps) the nodes register again; their static pods restart (\"\": never)")
	apiserverRange := fs.String("apiserver-range", "", "the new --service-cluster-ip-range (default: the output kops_steps' service_range)")
	serviceRange := fs.String("service-cluster-ip-range", "", "production's --service-cluster-ip-range, where the snapshot could not read it")
	report := fs.String("report", "", "also write the report to this file")
	jsonOut := fs.String("json", "", "write the report's data (stages, diagnostics, moves, journal) as JSON to this file")
	work := fs.String("work", "", "workspace directory, kept (default: a temporary one, removed)")
	terraform := fs.String("terraform", "terraform", "terraform or tofu binary")
	bin := fs.String("bin", "", "the provider repository's bin/ with the Kubernetes builds (default: $K8SCIDR_TESTBIN, else ./bin)")
	_ = fs.Parse(args)
	if *snapshot == "" || *config == "" {
		return false, fmt.Errorf("run: -snapshot and -config are required")
	}
	// Static mistakes first, before a control plane starts.
	snap, err := rehearse.ReadSnapshot(*snapshot)
	if err != nil {
		return false, err
	}
	info, err := rehearse.InspectConfig(*config)
	if err != nil {
		return false, err
	}
	stages, err := parseStages(*stagesFlag, slices.Contains(info.Variables, *stageVar))
	if err != nil {
		return false, err
	}
	if *bin != "" {
		abs, err := filepath.Abs(*bin)
		if err != nil {
			return false, err
		}
		if err := os.Setenv("K8SCIDR_TESTBIN", abs); err != nil {
			return false, err
		}
	}
	tf, err := exec(*terraform)
	if err != nil {
		return false, err
	}
	opts, err := snap.TwinOptions(split(*serviceRange))
	if err != nil {
		return false, err
	}
	dir := *work
	if dir == "" {
		if dir, err = os.MkdirTemp("", "k8scidr-rehearse-"); err != nil {
			return false, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "Starting the twin: Kubernetes %s, %d nodes, Service ranges %s\n", snap.Manifest.Server.Minor, len(opts.NodeTemplates), strings.Join(opts.ServiceCIDRs, ","))
	c, err := testcluster.Start(ctx, opts)
	if err != nil {
		return false, err
	}
	defer c.Stop()
	if opts.Calico != "" {
		if _, err := c.StartCalicoIPAM(ctx); err != nil {
			return false, err
		}
	}
	loaded, err := rehearse.LoadTwin(ctx, c.RESTConfig, snap)
	if err != nil {
		return false, fmt.Errorf("loading the snapshot: %w", err)
	}
	ks, err := c.Kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	version, err := c.Kube.Discovery().ServerVersion()
	if err != nil {
		return false, err
	}
	twin := &rehearse.Twin{Snapshot: snap, Version: version.GitVersion, Loaded: loaded, Setup: time.Since(start)}
	fmt.Fprintf(os.Stderr, "Twin loaded in %s: %d pods; rehearsing %s\n", twin.Setup.Round(time.Second), loaded.Pods, *config)
	log, err := os.Create(filepath.Join(dir, "terraform.log"))
	if err != nil {
		return false, err
	}
	defer log.Close()
	restart, roll := *restartBefore, *rollNodesBefore
	if len(stages) == 0 {
		restart, roll = "", ""
	}
	r, err := rehearse.Rehearse(ctx, rehearse.Target{Host: c.Host, CACert: c.CACert, Token: c.Token, ClusterID: string(ks.UID),
		Kube: c.Kube, ServiceCIDRs: c.ServiceCIDRs, RestartAPIServer: c.RestartAPIServer},
		rehearse.RunOptions{Config: *config, Work: filepath.Join(dir, "workspace"), Terraform: tf, StageVar: *stageVar, Stages: stages,
			VarFiles: absAll(varFiles), RestartBefore: restart, RollNodesBefore: roll, APIServerRanges: split(*apiserverRange), Log: log})
	if err != nil {
		return false, err
	}
	twin.Total = time.Since(start)
	text, err := r.Markdown("Rehearsal of "+*config+" on a twin", twin)
	if err != nil {
		return false, err
	}
	fmt.Print(text)
	if *report != "" {
		if err := os.WriteFile(*report, []byte(text), 0o644); err != nil { //nolint:gosec // a report
			return false, err
		}
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return false, err
		}
		if err := os.WriteFile(*jsonOut, data, 0o644); err != nil { //nolint:gosec // a report
			return false, err
		}
	}
	return r.Failed(), nil
}

func exec(name string) (string, error) {
	if strings.Contains(name, "/") {
		return filepath.Abs(name)
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if p := filepath.Join(d, name); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on PATH (-terraform names it)", name)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func absAll(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i], _ = filepath.Abs(f)
	}
	return out
}

// parseStages reads "1,2,3" or "1-6".
func parseStages(s string, hasStageVar bool) ([]string, error) {
	if s == "" {
		if !hasStageVar {
			return nil, nil
		}
		s = "1-6"
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(part, "-")
		if !isRange {
			out = append(out, strings.TrimSpace(part))
			continue
		}
		a, err1 := strconv.Atoi(from)
		b, err2 := strconv.Atoi(to)
		if err1 != nil || err2 != nil || a > b {
			return nil, fmt.Errorf("-stages: %q is not a range like 1-6", part)
		}
		for i := a; i <= b; i++ {
			out = append(out, strconv.Itoa(i))
		}
	}
	return out, nil
}
