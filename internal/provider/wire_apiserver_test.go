// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	o := testcluster.Options{Nodes: 1, APIServerFlags: apiServerEndpointFlags}
	onTheWire(&o)
	c := startCluster(t, o)
	wire, err := c.StartWire(ctx, testcluster.WireOptions{Mode: testcluster.ProxyNFTables, Corefile: testcluster.CorefileKubeadm})
	if err != nil {
		t.Fatal(err)
	}
	w := onNewRange(t, c)
	w.write(apiServerConfig(c.Kubeconfig, ""))

	cl, err := wire.StartClients(ctx, testcluster.ClientOptions{APIServerCA: c.CACert, Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	out, err := w.run("apply", "-auto-approve")
	time.Sleep(5 * time.Second)
	r := cl.Stop()
	if err != nil {
		t.Fatalf("the move: %v\n%s", err, out)
	}
	if strings.Contains(out, "without a carrier") {
		t.Errorf("the move went without its carrier:\n%s", out)
	}
	if _, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes-moving", metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		t.Errorf("the carrier default/kubernetes-moving after the move: %v, want it removed", err)
	}
	t.Logf("what the in-cluster API clients saw (failures timed from default/kubernetes's delete):\n%s", r)
	if r.Kinds[testcluster.ClientAPINew].Requests == 0 {
		t.Errorf("no request to the new IP: the clients never saw default/kubernetes move")
	}
	if n := r.Failed(testcluster.APIClientKinds...); n > 0 {
		t.Errorf("%d in-cluster API connections failed during default/kubernetes's move: zero wanted", n)
	}
}
