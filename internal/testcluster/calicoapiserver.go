// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Calico's API server in the test cluster: projectcalico.org/v3 served as an install with the
// API server serves it, by Calico's own aggregated API server on the crd.projectcalico.org/v1
// CRDs, with Calico's defaulting and validation on every write.
package testcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

const (
	// CalicoAPIServerProgram is Calico's API server in BinDir (tools/testbin.sh builds it).
	CalicoAPIServerProgram = "calico-apiserver"
	// The Service the APIService names. It is an ExternalName Service for localhost: an
	// EndpointSlice cannot hold a loopback address, and with aggregator routing off (the
	// default) kube-apiserver dials an ExternalName Service's host and the APIService's port.
	calicoAPINamespace   = "calico-apiserver"
	calicoAPIServiceName = "calico-api"
	// calicoAPIHost is the name kube-apiserver verifies the serving certificate against.
	calicoAPIHost = calicoAPIServiceName + "." + calicoAPINamespace + ".svc"
	// frontProxyClient is the client certificate's name kube-apiserver proxies with.
	frontProxyClient = "front-proxy-client"
)

var apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// startCalicoAPIServer runs Calico's API server on loopback as kube-apiserver's extension for
// projectcalico.org/v3, on the Kubernetes datastore, and returns a wait until kube-apiserver
// serves IPPools through it (a few seconds, spent while the rest of the cluster starts).
// Calico's CRDs must be installed.
func (c *Cluster) startCalicoAPIServer(ctx context.Context, o Options, files map[string]string) (wait func() error, err error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	kc := c.Kubeconfig
	p, err := c.runEnv(o, CalicoAPIServerProgram, []string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=" + kc},
		"--secure-port="+strconv.Itoa(ports[0]), "--bind-address=127.0.0.1",
		"--tls-cert-file="+files["calico-api.crt"], "--tls-private-key-file="+files["calico-api.key"],
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc)
	if err != nil {
		return nil, err
	}
	if err := c.registerCalicoAPIService(ctx, ports[0]); err != nil {
		return nil, err
	}
	return func() error {
		return waitFor(ctx, "kube-apiserver to serve "+k8sops.CalicoV3Group+" through Calico's API server", []*process{p}, func(context.Context) (bool, error) {
			// As the provider finds it (k8sops.Probe): in the list of groups, where kube-apiserver
			// adds an aggregated group some time after it proxies the group's own path, and ippools
			// in the group's resources.
			caps, err := k8sops.Probe(c.Kube.Discovery())
			return err == nil && slices.Contains(caps.CalicoServed, k8sops.CalicoV3Group), nil
		})
	}, nil
}

// registerCalicoAPIService makes kube-apiserver send projectcalico.org/v3 to localhost:port, as
// the Calico operator registers its API server (certificate checked against the cluster CA).
func (c *Cluster) registerCalicoAPIService(ctx context.Context, port int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: calicoAPINamespace}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: calicoAPIServiceName, Namespace: calicoAPINamespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if _, err := c.Kube.CoreV1().Services(calicoAPINamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v3.projectcalico.org"},
		"spec": map[string]any{
			"group": "projectcalico.org", "version": "v3",
			"groupPriorityMinimum": int64(1500), "versionPriority": int64(200),
			"service":  map[string]any{"namespace": calicoAPINamespace, "name": calicoAPIServiceName, "port": int64(port)},
			"caBundle": base64.StdEncoding.EncodeToString(c.CACert),
		},
	}}
	data, err := apiService.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = dyn.Resource(apiServiceResource).Patch(ctx, apiService.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "k8scidr-testcluster", Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("registering Calico's API server: %w", err)
	}
	return nil
}
