// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Certificates, keys, tokens and kubeconfigs for the loopback test cluster.
package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki holds the generated credentials, as PEM.
type pki struct {
	caCert, caKey         []byte
	serverCert, serverKey []byte
	adminCert, adminKey   []byte
	// The aggregation layer: the client certificate kube-apiserver proxies with, and the serving
	// certificate of Calico's API server (named as the aggregator dials it).
	frontProxyCA                  []byte
	frontProxyCert, frontProxyKey []byte
	calicoAPICert, calicoAPIKey   []byte
	serviceAccountKey             []byte
	token                         string
	oidcToken                     string
}

func newPKI(servingIPs []string) (*pki, error) {
	ca, caKey, err := newCert(nil, nil, pkix.Name{CommonName: "k8scidr-test-ca"}, true, nil)
	if err != nil {
		return nil, err
	}
	caX509, err := x509.ParseCertificate(ca)
	if err != nil {
		return nil, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	for _, s := range servingIPs {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("serving certificate IP %q is not an IP address", s)
		}
		ips = append(ips, ip)
	}
	server, serverKey, err := newCert(caX509, caKey, pkix.Name{CommonName: "kube-apiserver"}, false, ips)
	if err != nil {
		return nil, err
	}
	admin, adminKey, err := newCert(caX509, caKey, pkix.Name{CommonName: "admin-cert", Organization: []string{"system:masters"}}, false, nil)
	if err != nil {
		return nil, err
	}
	// A CA of its own, as kubeadm has: a client certificate of the cluster CA is not accepted as
	// the front proxy.
	frontProxyCA, frontProxyCAKey, err := newCert(nil, nil, pkix.Name{CommonName: "k8scidr-test-front-proxy-ca"}, true, nil)
	if err != nil {
		return nil, err
	}
	frontProxyCAX509, err := x509.ParseCertificate(frontProxyCA)
	if err != nil {
		return nil, err
	}
	frontProxy, frontProxyKey, err := newCert(frontProxyCAX509, frontProxyCAKey, pkix.Name{CommonName: frontProxyClient}, false, nil)
	if err != nil {
		return nil, err
	}
	calicoAPI, calicoAPIKey, err := newCert(caX509, caKey, pkix.Name{CommonName: calicoAPIHost}, false,
		[]net.IP{net.ParseIP("127.0.0.1")}, calicoAPIHost)
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	return &pki{
		caCert: pemBlock("CERTIFICATE", ca), caKey: keyPEM(caKey),
		serverCert: pemBlock("CERTIFICATE", server), serverKey: keyPEM(serverKey),
		adminCert: pemBlock("CERTIFICATE", admin), adminKey: keyPEM(adminKey),
		frontProxyCA:   pemBlock("CERTIFICATE", frontProxyCA),
		frontProxyCert: pemBlock("CERTIFICATE", frontProxy), frontProxyKey: keyPEM(frontProxyKey),
		calicoAPICert: pemBlock("CERTIFICATE", calicoAPI), calicoAPIKey: keyPEM(calicoAPIKey),
		serviceAccountKey: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
		token:             hex.EncodeToString(tok),
		oidcToken:         oidcShapedToken(hex.EncodeToString(tok[:8])),
	}, nil
}

// newCert makes a certificate signed by parent (self-signed when parent is nil); a leaf is valid
// for localhost, ips and dnsNames.
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, subject pkix.Name, isCA bool, ips []net.IP, dnsNames ...string) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		IPAddresses:  ips,
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = append([]string{"localhost"}, dnsNames...)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	return der, key, err
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func keyPEM(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err) // Only fails for unsupported curves; P-256 is supported.
	}
	return pemBlock("EC PRIVATE KEY", der)
}

// writeFiles writes the credentials the control plane reads, and returns their paths.
func (p *pki) writeFiles(dir string) (map[string]string, error) {
	files := map[string][]byte{
		"ca.crt":                 p.caCert,
		"server.crt":             p.serverCert,
		"server.key":             p.serverKey,
		"sa.key":                 p.serviceAccountKey,
		"front-proxy-ca.crt":     p.frontProxyCA,
		"front-proxy-client.crt": p.frontProxyCert,
		"front-proxy-client.key": p.frontProxyKey,
		"calico-api.crt":         p.calicoAPICert,
		"calico-api.key":         p.calicoAPIKey,
		"tokens.csv":             []byte(fmt.Sprintf("%s,admin,admin-uid,system:masters\n%s,oidc-admin,oidc-uid,system:masters\n", p.token, p.oidcToken)),
	}
	paths := map[string]string{}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
		paths[name] = path
	}
	return paths, nil
}

// Kubeconfig contexts written by the test cluster.
const (
	ContextToken = "k8scidr-test"      // bearer token user
	ContextCert  = "k8scidr-test-cert" // client certificate user
	ContextOIDC  = "k8scidr-test-oidc" // kubeconfig auth-provider oidc user
)

// oidcShapedToken is a JWT-shaped static token: the oidc auth-provider plugin sends an unexpired
// id-token as it is, and the apiserver's token file accepts it, so a kubeconfig with an oidc user
// works without an identity provider.
func oidcShapedToken(nonce string) string {
	enc := base64.RawURLEncoding.EncodeToString
	payload := fmt.Sprintf(`{"iss":"https://127.0.0.1:1","sub":"oidc-admin","nonce":%q,"exp":%d}`, nonce, time.Now().AddDate(10, 0, 0).Unix())
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc([]byte(payload)) + ".k8scidr"
}

// kubeconfig has three contexts on the same cluster: one authenticating with the token (the
// current context), one with the client certificate, one through the oidc auth-provider.
func (p *pki) kubeconfig(server string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k8scidr-test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.caCert}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: p.token}
	cfg.AuthInfos["admin-cert"] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminCert, ClientKeyData: p.adminKey}
	cfg.Contexts[ContextToken] = &clientcmdapi.Context{Cluster: "k8scidr-test", AuthInfo: "admin"}
	cfg.Contexts[ContextCert] = &clientcmdapi.Context{Cluster: "k8scidr-test", AuthInfo: "admin-cert"}
	cfg.AuthInfos["admin-oidc"] = &clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc",
		Config: map[string]string{"id-token": p.oidcToken, "client-id": "k8scidr-test", "idp-issuer-url": "https://127.0.0.1:1"}}}
	cfg.Contexts[ContextOIDC] = &clientcmdapi.Context{Cluster: "k8scidr-test", AuthInfo: "admin-oidc"}
	cfg.CurrentContext = ContextToken
	return cfg
}
