// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The hand-over settings of k8scidr_service_recreation: what the move must know of the
// cluster's data path (DNS zone and cache, kube-proxy's sync), which the API does not tell.
package provider

import (
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
)

func handOverAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"hand_over": schema.BoolAttribute{Optional: true,
			MarkdownDescription: "Move each ClusterIP Service with a selector by the hand-over, never deleting it: a " +
				"carrier Service takes its new IPs (with the old ones as external IPs), the Service turns ExternalName for " +
				"the carrier and back to ClusterIP on its new IPs, and a bridge keeps its old IPs, so that no kube-proxy " +
				"sync finds an IP a client may use unrouted and its name never goes missing from the cluster DNS " +
				"(guides/zero-downtime). Services it cannot move (NodePort, LoadBalancer, selector-less, with external " +
				"IPs of their own, or whose carrier or ExternalName form admission refuses) move by delete and create, " +
				"escorted by a Service that serves their old and new IPs meanwhile and times the delete to reach kube-proxy " +
				"with the create (their node ports stay open). Set `false` to move every Service by delete and create, " +
				"without escorts. Default `true`.",
		},
		"cluster_domain": schema.StringAttribute{Optional: true,
			MarkdownDescription: "The cluster's DNS zone (kubelet `clusterDomain`): mid-hand-over the Service is an " +
				"ExternalName for `<carrier>.<namespace>.svc.<cluster_domain>`, which the cluster DNS must answer. " +
				"Default `" + recreation.DefaultClusterDomain + "`.",
			Validators: []validator.String{stringvalidator.RegexMatches(dnsSubdomainRegexp,
				"must be a DNS name such as cluster.local (lowercase letters, digits, '-' and '.')")}},
		"proxy_sync_wait": schema.StringAttribute{Optional: true,
			MarkdownDescription: "How long after a Service change kube-proxy has programmed it on every node, as a Go " +
				"duration: its `--min-sync-period` (1 s by default) and the time one sync takes. The hand-over waits it " +
				"three times per batch of Services. Raise it for a larger `--min-sync-period` or slow syncs. Default `" +
				recreation.DefaultProxySync.String() + "`.",
			Validators: []validator.String{durationBetween(10*time.Millisecond, 10*time.Minute)}},
		"dns_ttl": schema.StringAttribute{Optional: true,
			MarkdownDescription: "How long the cluster DNS's answers may be cached: the Corefile's `kubernetes` plugin " +
				"`ttl` (kubeadm and the Kubernetes DNS addon: 30 s; kOps: the plugin's default, 5 s), plus any longer " +
				"cache in between (NodeLocal DNSCache). With `old_ip_bridges = \"dns\"`, the hand-over's bridge on a " +
				"Service's old IPs stays this long after the Service took its new IPs, then the apply removes it. Default `" +
				recreation.DefaultDNSTTL.String() + "`.",
			Validators: []validator.String{durationBetween(time.Second, time.Hour)}},
	}
}

// handOver is the hand-over settings as the recreation takes them (validated at plan; unset:
// the defaults).
func (m *serviceRecreationModel) handOver() recreation.HandOverOptions {
	return recreation.HandOverOptions{Off: !m.HandOver.IsNull() && !m.HandOver.ValueBool(),
		ClusterDomain: m.ClusterDomain.ValueString(), ProxySync: durationOf(m.ProxySyncWait), DNSTTL: durationOf(m.DNSTTL)}
}

// durationOf is a duration attribute validated at plan; 0 when unset.
func durationOf(s types.String) time.Duration {
	v, _ := time.ParseDuration(s.ValueString())
	return v
}

// dnsSubdomainRegexp is a DNS-1123 subdomain, as kubelet's clusterDomain is.
var dnsSubdomainRegexp = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
