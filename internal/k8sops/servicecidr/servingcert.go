// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package servicecidr

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// servingCertTimeout bounds the TLS handshake that reads kube-apiserver's serving certificate.
const servingCertTimeout = 10 * time.Second

// CheckServingCertificate asks, before default/kubernetes is deleted, whether kube-apiserver's
// serving certificate names its new IPs. Pods reach the API at kubernetes.default's ClusterIP
// (KUBERNETES_SERVICE_HOST) and verify the certificate against that IP: one that names only the
// old IP fails every in-cluster client once the Service moves (kubeadm issues it with the first
// address of its serviceSubnet; kOps with serviceClusterIPRange's). The certificate is read
// with a TLS handshake to the configured API endpoint, its names only (trust is the
// kubeconfig's business). It is judged kube-apiserver's own when it names an old IP; one that
// names none (a proxy's or load balancer's in front of it) cannot be judged, and the note says
// so. It returns the refusal, or a note when the certificate could not be judged.
func CheckServingCertificate(ctx context.Context, c *k8sops.Client, oldIPs, newIPs []string) (note string, err error) {
	u, err := url.Parse(c.Host)
	if err != nil || u.Scheme != "https" {
		return fmt.Sprintf("kube-apiserver's serving certificate was not checked for default/kubernetes's new IPs %s: the "+
			"API is not reached over HTTPS here (%q). Check that it names them before pods use them.", strings.Join(newIPs, ", "), c.Host), nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	dctx, cancel := context.WithTimeout(ctx, servingCertTimeout)
	defer cancel()
	// Only the certificate's names are read: whether it is trusted is the kubeconfig's to say,
	// and every request the provider makes says it.
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // names read, not trust
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return fmt.Sprintf("kube-apiserver's serving certificate could not be read at %s (%v) to check that it names "+
			"default/kubernetes's new IPs %s: check it before pods use them.", addr, err, strings.Join(newIPs, ", ")), nil
	}
	defer func() { _ = conn.Close() }() // read only: nothing was written that a close could lose
	var certs []*x509.Certificate
	if tc, ok := conn.(*tls.Conn); ok {
		certs = tc.ConnectionState().PeerCertificates
	}
	if len(certs) == 0 {
		return "", fmt.Errorf("the API endpoint %s presented no certificate", addr)
	}
	leaf := certs[0]
	names := func(ip string) bool { return leaf.VerifyHostname(ip) == nil }
	if !slices.ContainsFunc(oldIPs, names) {
		return fmt.Sprintf("The certificate served at %s names none of default/kubernetes's IPs %s: a proxy's or load "+
			"balancer's, not kube-apiserver's own, so whether kube-apiserver's names the new IPs %s was not judged. "+
			"Check it before pods use them.", addr, strings.Join(oldIPs, ", "), strings.Join(newIPs, ", ")), nil
	}
	missing := slices.DeleteFunc(slices.Clone(newIPs), names)
	if len(missing) == 0 {
		return "", nil
	}
	return "", fmt.Errorf("kube-apiserver's serving certificate (at %s) names default/kubernetes's IP %s but not its new IP %s: "+
		"every pod that reaches the API at kubernetes.default would fail to verify it once the Service moves, so it was "+
		"not moved. Issue the certificate with the new IP first, then apply again. kubeadm: set networking.serviceSubnet "+
		"in the kubeadm-config ConfigMap, move apiserver.crt and apiserver.key out of /etc/kubernetes/pki and run "+
		"`kubeadm init phase certs apiserver --config <that config>` on each control-plane node, then restart "+
		"kube-apiserver. kOps: set spec.networking.serviceClusterIPRange (provider::k8scidr::kops_networking), then "+
		"`kops update cluster --yes` and `kops rolling-update cluster --instance-group-roles=control-plane --yes`. "+
		"Managed control planes (EKS, GKE, AKS) issue it themselves: their Service range cannot be moved this way",
		addr, strings.Join(slices.DeleteFunc(slices.Clone(oldIPs), func(ip string) bool { return !names(ip) }), ", "), strings.Join(missing, ", "))
}
