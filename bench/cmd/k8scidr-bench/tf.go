// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// providerBlock starts every benchmark configuration: the locally built provider, given the
// same client budget as every other contender.
var providerBlock = fmt.Sprintf(`terraform {
  required_providers {
    k8scidr = { source = "k8scidr/k8scidr" }
  }
}

provider "k8scidr" {
  qps   = %d
  burst = %d
}
`, clientQPS, clientBurst)

// workspace is a terraform working directory using the locally built provider (dev override)
// through a wrapper that records each provider process's peak RSS.
type workspace struct {
	dir, terraform, rssFile string
	env                     []string
	// applyStarted is when the last run printed a resource's "Creating..." or "Modifying...":
	// where Terraform's apply of it begins, after the plan (zero: it printed none).
	applyStarted time.Time
	// onApplyStart, when set, is told applyStarted the moment it is seen.
	onApplyStart func(time.Time)
}

// startWatch is terraform's output, noting when the first resource apply line comes.
type startWatch struct {
	out     bytes.Buffer
	started *time.Time
	tell    func(time.Time)
}

func (s *startWatch) Write(p []byte) (int, error) {
	if s.started.IsZero() && (bytes.Contains(p, []byte(": Creating...")) || bytes.Contains(p, []byte(": Modifying..."))) {
		*s.started = time.Now()
		if s.tell != nil {
			s.tell(*s.started)
		}
	}
	return s.out.Write(p)
}

func newWorkspace(bin, self, kubeconfig, config string) (*workspace, error) {
	dir, err := os.MkdirTemp("", "k8scidr-bench-tf-")
	if err != nil {
		return nil, err
	}
	w := &workspace{dir: dir, terraform: filepath.Join(bin, "terraform"), rssFile: filepath.Join(dir, "rss")}
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		return nil, err
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %q rss-wrap %q %q \"$@\"\n", self, w.rssFile, filepath.Join(bin, "terraform-provider-k8scidr"))
	if err := os.WriteFile(filepath.Join(plugins, "terraform-provider-k8scidr"), []byte(wrapper), 0o755); err != nil { //nolint:gosec // an executable wrapper
		return nil, err
	}
	rc := filepath.Join(dir, ".terraformrc")
	text := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"k8scidr/k8scidr\" = %q\n  }\n  direct {}\n}\n", plugins)
	if err := os.WriteFile(rc, []byte(text), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o600); err != nil {
		return nil, err
	}
	w.env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"KUBE_CONFIG_PATH="+kubeconfig)
	return w, nil
}

// run runs terraform and returns its wall time and the peak RSS (MiB) of the provider
// processes it started.
func (w *workspace) run(args ...string) (time.Duration, float64, error) {
	_ = os.Remove(w.rssFile)
	cmd := exec.Command(w.terraform, append([]string{"-chdir=" + w.dir}, args...)...)
	w.applyStarted = time.Time{}
	out := &startWatch{started: &w.applyStarted, tell: w.onApplyStart}
	cmd.Env, cmd.Stdout, cmd.Stderr = w.env, out, out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return wall, 0, fmt.Errorf("terraform %s: %w\n%s", strings.Join(args, " "), err, tail(out.out.String(), 40))
	}
	return wall, peakRSS(w.rssFile), nil
}

func (w *workspace) close() { _ = os.RemoveAll(w.dir) }

// rewrite replaces the workspace's configuration.
func (w *workspace) rewrite(config string) error {
	return os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(config), 0o600)
}

func peakRSS(file string) float64 {
	data, _ := os.ReadFile(file)
	peak := 0.0
	for _, l := range strings.Fields(string(data)) {
		if kib, err := strconv.ParseFloat(l, 64); err == nil {
			peak = max(peak, kib/1024)
		}
	}
	return peak
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// rssWrap runs a provider binary as terraform would (same stdio, environment and signals) and
// appends the child's peak RSS in KiB to file when it exits.
func rssWrap(file, bin string, args []string) int {
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	_ = cmd.Wait()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		if f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			_, _ = fmt.Fprintf(f, "%d\n", ru.Maxrss)
			_ = f.Close()
		}
	}
	return cmd.ProcessState.ExitCode()
}
