// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccWire_apiserverService is stage 2 on the wire: in-cluster API clients reach
// kube-apiserver through kube-proxy at default/kubernetes's ClusterIP, verifying its
// certificate against that IP, as client-go's in-cluster configuration does. One keeps the old
// KUBERNETES_SERVICE_HOST (a pod started before the move), one takes the new IP once the API
// shows it (a pod started after). Each opens a new connection every 50 ms (the strict case: a
// kept HTTP/2 connection outlives rule changes). k8scidr_apiserver_service moves the Service
// with its bridge on; any failed connection of either is logged with its time.
//
// Without a carrier the move failed here (2026-12-04, nftables: one connection to each IP timed
// out around the delete, of 411 to the old IP and 291 to the new): default/kubernetes was
// deleted and its bridge made after, so the old IP went unserved from kube-proxy's sync after
// the delete to the sync after the bridge, and the new IP was handed out before kube-proxy
// programmed it. The carrier serves both as external IPs from before the delete until both are
// programmed.
func TestAccWire_apiserverService(t *testing.T) {
	testAccPreCheck(t)
	if testcluster.RerunIsolated(t) {
		return
	}
	ctx := context.Background()
	// Inside the isolated namespace only: kube-apiserver listens on the wire's node address
	// too, which default/kubernetes's endpoints name.
	c := startCluster(t, testcluster.Options{Nodes: 1, APIServerFlags: append(slices.Clone(apiServerEndpointFlags), "--bind-address=0.0.0.0"),
		ServingCertIPs: []string{"100.64.0.1", "172.24.0.1"}})
	if _, err := c.StartWire(ctx, testcluster.WireOptions{Mode: testcluster.ProxyNFTables, Corefile: testcluster.CorefileKubeadm}); err != nil {
		t.Fatal(err)
	}
	w := onNewRange(t, c)
	w.write(apiServerConfig(c.Kubeconfig, ""))

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CACert) {
		t.Fatal("the cluster's CA does not parse")
	}
	reach := func(ctx context.Context, ip string) error {
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil,
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: ip, MinVersion: tls.VersionTLS12}}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ip+":443/version", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return reach(ctx, "100.64.0.1") == nil, nil
	}); err != nil {
		t.Fatalf("kube-apiserver is not reached at 100.64.0.1 on the wire before the move: %v", reach(ctx, "100.64.0.1"))
	}

	type failure struct {
		client string
		at     time.Duration
		err    string
	}
	var (
		mu       sync.Mutex
		failures []failure
		sent     = map[string]int{}
		movedAt  time.Duration
	)
	start := time.Now()
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	loop := func(name string, ip func() string) {
		wg.Go(func() {
			for tick := time.NewTicker(50 * time.Millisecond); ; {
				select {
				case <-cctx.Done():
					tick.Stop()
					return
				case <-tick.C:
				}
				target := ip()
				if target == "" {
					continue
				}
				at := time.Since(start)
				err := reach(cctx, target)
				if cctx.Err() != nil {
					return
				}
				mu.Lock()
				sent[name]++
				if err != nil {
					failures = append(failures, failure{name, at, err.Error()})
				}
				mu.Unlock()
			}
		})
	}
	loop("old KUBERNETES_SERVICE_HOST", func() string { return "100.64.0.1" })
	newIP := ""
	wg.Go(func() {
		for cctx.Err() == nil {
			s, err := c.Kube.CoreV1().Services("default").Get(cctx, "kubernetes", metav1.GetOptions{})
			if err == nil && s.Spec.ClusterIP == "172.24.0.1" {
				mu.Lock()
				newIP, movedAt = "172.24.0.1", time.Since(start)
				mu.Unlock()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	loop("new KUBERNETES_SERVICE_HOST", func() string {
		mu.Lock()
		defer mu.Unlock()
		return newIP
	})
	out, err := w.run("apply", "-auto-approve")
	applied := time.Since(start)
	time.Sleep(5 * time.Second)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("the move: %v\n%s", err, out)
	}
	if strings.Contains(out, "without a carrier") {
		t.Errorf("the move went without its carrier:\n%s", out)
	}
	if _, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes-moving", metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		t.Errorf("the carrier default/kubernetes-moving after the move: %v, want it removed", err)
	}
	var lines []string
	for _, f := range failures {
		lines = append(lines, fmt.Sprintf("%s at %s (the API showed the new IP at %s): %s", f.client, f.at.Round(time.Millisecond), movedAt.Round(time.Millisecond), f.err))
	}
	t.Logf("requests: %v; the apply ended at %s; %d failed:\n%s", sent, applied.Round(time.Millisecond), len(failures), strings.Join(lines, "\n"))
	if len(failures) > 0 {
		t.Errorf("%d in-cluster API connections failed during default/kubernetes's move: zero wanted", len(failures))
	}
}
