// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Calico's own IPAM in the test cluster: k8scidr-calico-ipam (tools/testbin/calico) runs
// libcalico-go's IPAM on the Kubernetes datastore, doing around it what Calico's CNI plugin
// does on a node, so the blocks, affinities, handles and pool choice the provider reads and
// drains are Calico's, not ours.
package testcluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
)

// CalicoIPAMProgram is the program in BinDir that runs Calico's IPAM (tools/testbin.sh builds it).
const CalicoIPAMProgram = "k8scidr-calico-ipam"

// podHandlePrefix is the handle prefix the Calico CNI plugin uses for pods (followed by the
// container ID; the pod UID stands in for it).
const podHandlePrefix = "k8s-pod-network."

// CalicoIPAM gives pods their addresses from Calico pools with Calico's own IPAM.
type CalicoIPAM struct {
	bin, kubeconfig string
	proc            *process
}

// StartCalicoIPAM starts assigning pod addresses. The Calico CRDs must be installed and the
// cluster started with Options.Calico so that pods wait for their address. Pools may be written
// in either API group: Calico's API server (Options.CalicoAPIServer) stores projectcalico.org/v3
// pools in the crd.projectcalico.org/v1 CRDs that Calico's IPAM reads.
func (c *Cluster) StartCalicoIPAM(ctx context.Context) (*CalicoIPAM, error) {
	bin, err := c.calicoIPAMBin()
	if err != nil {
		return nil, err
	}
	p, err := c.startCalicoIPAMProcess(ctx, bin, false)
	if err != nil {
		return nil, err
	}
	i := &CalicoIPAM{bin: bin, kubeconfig: c.Kubeconfig, proc: p}
	c.stopHooks = append(c.stopHooks, i.Stop)
	return i, nil
}

func (c *Cluster) calicoIPAMBin() (string, error) {
	bin := c.calicoPath(CalicoIPAMProgram)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no %s in %s (run make testbin): %w", CalicoIPAMProgram, filepath.Dir(bin), err)
	}
	return bin, nil
}

// startCalicoIPAMProcess starts `bin run` and waits until its pod cache has synced.
func (c *Cluster) startCalicoIPAMProcess(ctx context.Context, bin string, detached bool) (*process, error) {
	p, err := startProcess("calico-ipam", bin, []string{"run", "-kubeconfig", c.Kubeconfig}, nil, filepath.Join(c.Dir, "logs"), detached)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(logTail(p.Log, 20), "k8scidr-calico-ipam running") {
		if (!detached && p.exited()) || ctx.Err() != nil {
			p.stop(time.Second)
			return nil, fmt.Errorf("%s did not start: %v\n%s", CalicoIPAMProgram, ctx.Err(), logTail(p.Log, 20))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	return p, nil
}

// StartCalicoIPAMProcess runs Calico's IPAM as a process of a detached cluster, recorded with
// the others so that StopDir ends it (make cluster-up).
func (c *Cluster) StartCalicoIPAMProcess(ctx context.Context) error {
	bin, err := c.calicoIPAMBin()
	if err != nil {
		return err
	}
	p, err := c.startCalicoIPAMProcess(ctx, bin, true)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return c.writeState()
}

// Stop ends the IPAM.
func (i *CalicoIPAM) Stop() {
	i.proc.stop(5 * time.Second)
}

// Errors returns what the IPAM failed to do (each failure is retried; tests can assert none);
// none for a cluster without it (nil).
func (i *CalicoIPAM) Errors() []string {
	if i == nil {
		return nil
	}
	data, _ := os.ReadFile(i.proc.Log)
	var errs []string
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "error: "); ok {
			errs = append(errs, strings.TrimSpace(rest))
		}
	}
	if i.proc.exited() {
		errs = append(errs, CalicoIPAMProgram+" exited: "+logTail(i.proc.Log, 5))
	}
	return errs
}

// AssignTunnel gives a node a tunnel address from an eligible pool and records it on the node,
// as calico-node does at start (handle ipip-tunnel-addr-<node> or vxlan-tunnel-addr-<node>,
// annotation projectcalico.org/IPv4IPIPTunnelAddr or IPv4VXLANTunnelAddr).
func (i *CalicoIPAM) AssignTunnel(ctx context.Context, node, encap string) (netip.Addr, error) {
	return i.assign(ctx, "-handle", encap+"-tunnel-addr-"+node, "-node", node, "-use", "Tunnel", "-attr", "type="+encap+"TunnelAddress",
		"-node-annotation", "projectcalico.org/IPv4"+strings.ToUpper(encap)+"TunnelAddr")
}

// AssignLeaked records an allocation for a pod that does not exist, as a lost CNI DEL leaves
// behind.
func (i *CalicoIPAM) AssignLeaked(ctx context.Context, namespace, pod, node string) (netip.Addr, error) {
	return i.assign(ctx, "-handle", podHandlePrefix+"leaked-"+namespace+"-"+pod, "-node", node,
		"-attr", calico.AttrNamespace+"="+namespace, "-attr", calico.AttrPod+"="+pod)
}

func (i *CalicoIPAM) assign(ctx context.Context, args ...string) (netip.Addr, error) {
	out, err := exec.CommandContext(ctx, i.bin, append([]string{"assign", "-kubeconfig", i.kubeconfig}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return netip.Addr{}, fmt.Errorf("%s assign %v: %s", CalicoIPAMProgram, args, strings.TrimSpace(string(ee.Stderr)))
		}
		return netip.Addr{}, err
	}
	return netip.ParseAddr(strings.TrimSpace(string(out)))
}
