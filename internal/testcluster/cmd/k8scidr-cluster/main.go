// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Command k8scidr-cluster starts and stops a detached loopback test cluster for humans and the demo.
//
//	k8scidr-cluster up   -dir DIR   # starts it, prints the KUBECONFIG path
//	k8scidr-cluster down -dir DIR   # stops exactly the processes "up" started, removes DIR
//
// With `up -calico v3.31 -calico-pool CIDR`, the cluster gets that Calico release's CRDs, the
// installer's default-ipv4-ippool on CIDR (IPIP Always, NAT on, as calico-node creates it), and
// Calico's own IPAM (k8scidr-calico-ipam, built by tools/testbin.sh) as one of the cluster's
// processes. With -calico-apiserver, Calico's API server serves projectcalico.org/v3 too.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: k8scidr-cluster up|down -dir DIR [-nodes N] [-service-cidrs A,B]"))
	}
	fset := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fset.String("dir", ".cluster", "work directory of the cluster")
	nodes := fset.Int("nodes", 2, "number of fake nodes")
	serviceCIDRs := fset.String("service-cidrs", "100.64.0.0/13", "--service-cluster-ip-range, comma-separated")
	calico := fset.String("calico", "", "Calico release whose CRDs to install, with Calico's IPAM (e.g. v3.31)")
	calicoPool := fset.String("calico-pool", "100.96.0.0/11", "CIDR of the installer's default-ipv4-ippool (with -calico)")
	calicoAPIServer := fset.Bool("calico-apiserver", false, "also run Calico's API server, serving projectcalico.org/v3 (with -calico)")
	_ = fset.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "up":
		if _, err := os.Stat(filepath.Join(abs, "cluster.json")); err == nil {
			fail(fmt.Errorf("a cluster is already running in %s: run `make cluster-down` first", abs))
		}
		if err := os.MkdirAll(abs, 0o700); err != nil {
			fail(err)
		}
		start := time.Now()
		c, err := testcluster.Start(context.Background(), testcluster.Options{
			Dir: abs, Detached: true, Nodes: *nodes, ServiceCIDRs: strings.Split(*serviceCIDRs, ","), Calico: *calico,
			CalicoAPIServer: *calicoAPIServer,
		})
		if err == nil && *calico != "" {
			err = startCalico(c, *calicoPool)
		}
		if err != nil {
			_ = testcluster.StopDir(abs)
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "cluster ready in %.1fs (%s, %d nodes); stop it with `make cluster-down`\n",
			time.Since(start).Seconds(), c.Host, *nodes)
		fmt.Println(c.Kubeconfig)
	case "down":
		if err := testcluster.StopDir(abs); err != nil {
			fail(err)
		}
	default:
		fail(fmt.Errorf("unknown command %q: use up or down", os.Args[1]))
	}
}

// startCalico creates the installer's pool and starts Calico's IPAM as a process.
func startCalico(c *testcluster.Cluster, cidr string) error {
	spec := map[string]any{"cidr": cidr, "blockSize": int64(26), "ipipMode": "Always", "vxlanMode": "Never",
		"natOutgoing": true, "nodeSelector": "all()"}
	if err := c.CreateCalicoPool(context.Background(), "crd.projectcalico.org/v1", "default-ipv4-ippool", spec); err != nil {
		return err
	}
	return c.StartCalicoIPAMProcess(context.Background())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "k8scidr-cluster:", err)
	os.Exit(1)
}
