// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Restarting the control plane's parts mid-test, as the reliability suites and the KEP-1880
// steps need: kube-apiserver on a new range, kube-controller-manager stopped or with other flags,
// and any component down for a while.
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// RestartAPIServer restarts kube-apiserver with a new --service-cluster-ip-range, as an
// operator changing kOps' serviceClusterIPRange does. The other components reconnect by
// themselves. Only for clusters this process started (not detached ones).
func (c *Cluster) RestartAPIServer(ctx context.Context, serviceCIDRs []string) error {
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.Name == "kube-apiserver" })
	if i < 0 || c.opts.Detached {
		return errors.New("no attached kube-apiserver to restart")
	}
	c.procs[i].stop(10 * time.Second)
	c.procs = slices.Delete(c.procs, i, i+1)
	flag := "--service-cluster-ip-range="
	for j, a := range c.apiArgs {
		if strings.HasPrefix(a, flag) {
			c.apiArgs[j] = flag + strings.Join(serviceCIDRs, ",")
		}
	}
	c.ServiceCIDRs = serviceCIDRs
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// The old process's port can be held for a moment after it exited (seen once with clients
	// connected to it from the wire): the start is tried again then.
	for attempt := 0; ; attempt++ {
		err := c.startAPIServer(ctx)
		if err == nil || attempt == 4 || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		if i := slices.IndexFunc(c.procs, func(p *process) bool { return p.Name == "kube-apiserver" }); i >= 0 {
			c.procs = slices.Delete(c.procs, i, i+1)
		}
		time.Sleep(2 * time.Second)
	}
}

// StopControllerManager stops kube-controller-manager, as an outage of it does: no EndpointSlice,
// ReplicaSet or namespace is written until RestartControllerManager starts it again.
func (c *Cluster) StopControllerManager() error {
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.Name == "kube-controller-manager" })
	if i < 0 || c.opts.Detached {
		return errors.New("no attached kube-controller-manager to stop")
	}
	c.procs[i].stop(10 * time.Second)
	return nil
}

// RestartControllerManager restarts kube-controller-manager with flags (e.g.
// "--kube-api-qps=100") replacing the same flags of its command line or added to it, and waits
// until it serves again (also after StopControllerManager). Benchmarks use it to compare its
// client budgets on one cluster.
func (c *Cluster) RestartControllerManager(ctx context.Context, flags ...string) error {
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.Name == "kube-controller-manager" })
	if i < 0 || c.opts.Detached {
		return errors.New("no attached kube-controller-manager to restart")
	}
	old := c.procs[i]
	args := slices.Clone(old.args)
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		args = slices.DeleteFunc(args, func(a string) bool { return a == name || strings.HasPrefix(a, name+"=") })
		args = append(args, f)
	}
	old.stop(10 * time.Second)
	p, err := startProcess(old.Name, old.Bin, args, old.env, filepath.Join(c.Dir, "logs"), false)
	if err != nil {
		return err
	}
	c.procs[i] = p
	// The EndpointSlice controller is the one tests and benchmarks pace on. It logs its start at
	// the default verbosity in every release (the controller manager's own "Started controller"
	// line is gone from it since 1.37).
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return waitFor(ctx, "kube-controller-manager to start its EndpointSlice controller", []*process{p}, func(context.Context) (bool, error) {
		return strings.Contains(logTail(p.Log, 1000), `"Starting endpoint slice controller"`), nil
	})
}

// Restart stops a component (etcd or kube-apiserver) as a crash or an upgrade does, keeps it
// down for down, then starts it again with the same command line and waits until the apiserver
// serves. Reliability tests do this in the middle of an apply.
func (c *Cluster) Restart(ctx context.Context, name string, down time.Duration) error {
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.Name == name })
	if i < 0 || c.opts.Detached || (name != "etcd" && name != "kube-apiserver") {
		return fmt.Errorf("no attached etcd or kube-apiserver named %q to restart", name)
	}
	old := c.procs[i]
	old.stop(10 * time.Second)
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	p, err := startProcess(old.Name, old.Bin, old.args, old.env, filepath.Join(c.Dir, "logs"), false)
	if err != nil {
		return err
	}
	c.procs[i] = p
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return waitFor(ctx, "kube-apiserver to serve after restarting "+name, []*process{p}, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
}
