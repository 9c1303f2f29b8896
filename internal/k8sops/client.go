// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The cluster client handed to every resource and data source.
package k8sops

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Client bundles the typed, dynamic and discovery clients for one cluster, and the settings
// that shape how the provider writes to it. Building it contacts nothing.
type Client struct {
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface

	// FieldManager names the provider in managedFields.
	FieldManager string
	// CalicoAPIGroup is the configured preference: CalicoAuto or one of the Calico groups.
	CalicoAPIGroup string
	// Host is the API server address.
	Host string
	// QPS is the client's rate limit (0: none known); executors size their concurrency to it.
	QPS float32

	trace  *func(context.Context, APIRequest)
	capsMu sync.Mutex
	caps   *Capabilities
	podsMu sync.Mutex
	pods   *planPods // PlanPods
}

// Capabilities probes the cluster once per Client (one provider configuration) and remembers
// a successful answer: every operation needs it, and the server does not change under a plan.
func (c *Client) Capabilities() (Capabilities, error) {
	c.capsMu.Lock()
	defer c.capsMu.Unlock()
	if c.caps != nil {
		return *c.caps, nil
	}
	caps, err := Probe(c.Discovery)
	if err != nil {
		return caps, err
	}
	c.caps = &caps
	return caps, nil
}

// NewClient builds a Client from a REST configuration. Server warnings go to the collector of
// the request's context (CollectWarnings) when it has one.
func NewClient(cfg *rest.Config, fieldManager, calicoAPIGroup string) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.WarningHandler == nil && cfg.WarningHandlerWithContext == nil {
		cfg.WarningHandlerWithContext = contextWarnings{}
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return retryHints{rt} })
	trace := new(func(context.Context, APIRequest))
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return apiTrace{rt, trace} })
	// Built-in types travel as protobuf, as kube-controller-manager and the kubelet ask for
	// them: smaller responses and less garbage decoding them (a 10,000-Service plan peaked
	// 10-15 MiB lower, bench/results/2026-11-28-plan.md). The dynamic client (Calico's types,
	// which have no protobuf form) keeps JSON.
	kcfg := rest.CopyConfig(cfg)
	kcfg.ContentType = runtime.ContentTypeProtobuf
	kcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the dynamic client: %w", err)
	}
	if fieldManager == "" {
		fieldManager = DefaultFieldManager
	}
	if calicoAPIGroup == "" {
		calicoAPIGroup = CalicoAuto
	}
	return &Client{
		Kube: kube,
		// Discovery answers are cached for the provider process: one plan asks many times.
		Discovery:      memory.NewMemCacheClient(kube.Discovery()),
		Dynamic:        dyn,
		FieldManager:   fieldManager,
		CalicoAPIGroup: calicoAPIGroup,
		QPS:            cfg.QPS,
		Host:           cfg.Host,
		trace:          trace,
	}, nil
}
