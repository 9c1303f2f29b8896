// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

var dns1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

func TestOldIPBridgeName(t *testing.T) {
	long := "a" + strings.Repeat("b", 61) + "c" // 63 characters: the longest Service name
	cases := map[string]string{"app/web": "web", "other/web": "web", "app/" + long: long, "app/" + long[:62] + "d": long[:62] + "d",
		"app/x-": "x-"}
	seen := map[string]string{}
	for key, name := range cases {
		ns, _, _ := strings.Cut(key, "/")
		got := OldIPBridgeName(ns, name, []string{"100.64.0.7"})
		if len(got) > 63 || !dns1035.MatchString(got) {
			t.Errorf("%s: %q (%d characters) is not a Service name", key, got, len(got))
		}
		if !strings.HasPrefix(got, name[:min(len(name), bridgeNamePrefixMax)]) {
			t.Errorf("%s: %q does not start with the Service's name", key, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s share the bridge name %q", key, other, got)
		}
		seen[got] = key
		if again := OldIPBridgeName(ns, name, []string{"100.64.0.7"}); again != got {
			t.Errorf("%s: %q, then %q", key, got, again)
		}
		if second := OldIPBridgeName(ns, name, []string{"172.24.0.7"}); second == got {
			t.Errorf("%s: the bridges of two moves (other old IPs) share the name %q", key, got)
		}
	}
}

func TestOldIPBridgeService(t *testing.T) {
	svc := rsvc("app/api", "NodePort", "100.64.1.5", "fd00::5")
	svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}}
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc.Spec.PublishNotReadyAddresses = true
	svc.Spec.ExternalIPs = []string{"203.0.113.9"}
	b := oldIPBridgeService(&svc, []string{"100.64.1.5"}, "g1")
	switch {
	case b.Namespace != "app" || b.Name != OldIPBridgeName("app", "api", []string{"100.64.1.5"}):
		t.Errorf("bridge %s/%s", b.Namespace, b.Name)
	case b.Spec.Type != corev1.ServiceTypeClusterIP || b.Spec.ClusterIP != "100.64.1.5" || len(b.Spec.ClusterIPs) != 1 ||
		*b.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack || b.Spec.IPFamilies[0] != corev1.IPv4Protocol:
		t.Errorf("bridge spec %+v: want a single-stack ClusterIP Service on the IP that moves", b.Spec)
	case b.Spec.Ports[0].NodePort != 0 || b.Spec.Ports[0].Port != 80 || b.Spec.Ports[0].TargetPort.IntValue() != 8080:
		t.Errorf("ports %+v: want the Service's, without node ports", b.Spec.Ports)
	case b.Spec.Selector["app"] != "api" || b.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || !b.Spec.PublishNotReadyAddresses:
		t.Errorf("bridge %+v: want the Service's selector, affinity and publishNotReadyAddresses", b.Spec)
	case len(b.Spec.ExternalIPs) > 0:
		t.Errorf("externalIPs %v belong to the Service, not its bridge", b.Spec.ExternalIPs)
	case b.Labels[k8sops.OldIPBridgeLabel] != "true" || b.Labels[k8sops.OldIPBridgeForLabel] != "api" || b.Labels[JournalGroupLabel] != "g1" ||
		b.Annotations[k8sops.BridgeForAnnotation] != "app/api":
		t.Errorf("labels %v annotations %v", b.Labels, b.Annotations)
	}
	got, ok := oldIPBridgeOf(b, "g1")
	if !ok || got.For != "app/api" || got.Key() != "app/"+b.Name || got.Group != "g1" {
		t.Errorf("read back as %+v, %t", got, ok)
	}
	if _, ok := oldIPBridgeOf(b, "other"); ok {
		t.Error("a bridge of group g1 read as one of group other")
	}
}

func TestPrepareRecreationOldIPBridges(t *testing.T) {
	snap := mixedSnapshot()
	taken := rsvc("app/"+OldIPBridgeName("app", "np", []string{"100.64.1.5"}), "ClusterIP", "100.64.1.99")
	snap.Services = append(snap.Services, taken)
	p := PlanRecreation(snap, defaultOpts())
	s, errs := PrepareRecreation(snap, planned(p), BridgeOptions{Enabled: true, OldIPs: BridgesAll, Group: "default"})
	if len(errs) != 1 || errs[0].Summary != "Bridge Name Taken" || !strings.Contains(errs[0].Detail, "app/np") {
		t.Fatalf("findings %v: want the taken name of app/np's bridge", errs)
	}
	if s.OldIPBridges["kube-system/kube-dns"] != nil {
		t.Error("the cluster DNS Service got an old-IP bridge; the DNS bridge keeps its IP")
	}
	web := s.OldIPBridges["app/web"]
	if web == nil || web.Spec.ClusterIP != "100.64.7.200" || web.Namespace != "app" {
		t.Fatalf("app/web's bridge: %+v", web)
	}
	for _, m := range s.Moves {
		if _, ok := s.OldIPBridges[m.Key]; !ok && m.Key != "kube-system/kube-dns" && m.Key != "app/np" {
			t.Errorf("move %s has no old-IP bridge", m.Key)
		}
	}

	// "dns": none; a bridge IP outside every Ready range refuses the apply.
	if s, _ := PrepareRecreation(snap, planned(p), BridgeOptions{Enabled: true, OldIPs: BridgesDNS}); len(s.OldIPBridges) > 0 {
		t.Errorf("old_ip_bridges = dns made bridges %v", s.OldIPBridges)
	}
	snap.Services = snap.Services[:len(snap.Services)-1]
	snap.Ranges = []k8sops.ServiceCIDR{readyRange("new", "172.24.0.0/15"), readyRange("keep", "100.64.0.0/24")}
	_, errs = PrepareRecreation(snap, planned(p), BridgeOptions{Enabled: true, OldIPs: BridgesAll})
	if len(errs) != 1 || errs[0].Summary != "Old-IP Bridge IPs Outside a Ready Range" || !strings.Contains(errs[0].Detail, "app/web 100.64.7.200") {
		t.Errorf("findings %v: want the bridge IPs outside a Ready range", errs)
	}
}

func TestPlanRecreationLeavesBridgesAlone(t *testing.T) {
	snap := mixedSnapshot()
	web := snap.Services[1]
	b := oldIPBridgeService(&web, []string{"100.64.7.201"}, "default")
	snap.Services = append(snap.Services, *b)
	p := PlanRecreation(snap, defaultOpts())
	key := "app/" + b.Name
	for _, m := range p.Moves {
		if m.Key == key {
			t.Fatalf("the bridge %s is planned to move", key)
		}
	}
	if _, ok := p.Skipped[key]; ok {
		t.Errorf("the bridge %s is listed as skipped: bridges are reported apart", key)
	}
	if len(p.OldIPBridges) != 1 || p.OldIPBridges[0].For != "app/web" || p.OldIPBridges[0].IPs[0] != "100.64.7.201" {
		t.Errorf("bridges %+v", p.OldIPBridges)
	}
	// No keep-range for it: a Ready range there would give new Services old-range IPs.
	if strings.Contains(fmtAddrs(p.Staying), "100.64.7.201") {
		t.Errorf("staying %v: the old-IP bridge's IP gets no keep-range", p.Staying)
	}
}

func TestPlanRecreationRestoresMissingOldIPBridge(t *testing.T) {
	snap := mixedSnapshot()
	web := snap.Services[1]
	// An apply killed before it reached app/web: the Service holds its old IP, the bridge is not due.
	unmoved := JournalEntry{Key: "app/web", OldIPs: []string{"100.64.7.200"}, Service: *recreationCopy(&web, []string{"172.24.7.200"}),
		Bridge: oldIPBridgeService(&web, []string{"100.64.7.200"}, "default"), Object: "j0"}
	snap.Journal = []JournalEntry{unmoved}
	if p := PlanRecreation(snap, defaultOpts()); len(p.Restore) != 0 {
		t.Errorf("restore %+v for a Service not moved yet: its bridge comes with its move", p.Restore)
	} else if s, _ := PrepareRecreation(snap, planned(p), BridgeOptions{}); !s.Settled["j0 app/web"] {
		t.Errorf("settled %v: want the entry of a Service not moved yet settled", s.Settled)
	}
	moved := web.DeepCopy()
	moved.Spec.ClusterIPs, moved.Spec.ClusterIP = []string{"172.24.7.200"}, "172.24.7.200"
	snap.Services[1] = *moved
	entry := JournalEntry{Key: "app/web", OldIPs: []string{"100.64.7.200"}, Service: *recreationCopy(moved, moved.Spec.ClusterIPs),
		Bridge: oldIPBridgeService(&web, []string{"100.64.7.200"}, "default"), Object: "j1"}
	snap.Journal = []JournalEntry{entry}
	p := PlanRecreation(snap, defaultOpts())
	if len(p.Restore) != 1 || p.Restore[0].Key != "app/web" || p.Restore[0].NewIPs[0] != "172.24.7.200" {
		t.Fatalf("restore %+v: want app/web, whose bridge is missing, restored at the IPs it has", p.Restore)
	}
	snap.Services = append(snap.Services, *entry.Bridge)
	if p := PlanRecreation(snap, defaultOpts()); len(p.Restore) != 0 {
		t.Errorf("restore %+v with the bridge there: want nothing", p.Restore)
	}
	s, _ := PrepareRecreation(snap, planned(PlanRecreation(snap, defaultOpts())), BridgeOptions{})
	if !s.Settled["j1 app/web"] {
		t.Errorf("settled %v: want the entry settled once its bridge exists", s.Settled)
	}
}

func fmtAddrs(ips []netip.Addr) string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return strings.Join(out, ",")
}

// Removal is refused while a pod that may hold an old IP runs: one started before the bridge that
// resolves through the cluster DNS, or one of the bridge's namespace with Service links.
func TestCheckOldIPBridgeRemoval(t *testing.T) {
	moved := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	pod := func(ns, name string, started time.Time, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: started}}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	noLinks := func(p *corev1.Pod) { p.Spec.EnableServiceLinks = new(bool) }
	hostDefault := func(p *corev1.Pod) { noLinks(p); p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSDefault }
	bridges := []OldIPBridge{{Name: "web-old-1", For: "app/web", Created: moved}}
	for _, c := range []struct {
		name string
		pods []*corev1.Pod
		want string
	}{
		{"no pods", nil, ""},
		{"a resolver started after", []*corev1.Pod{pod("other", "late", moved.Add(time.Minute), nil)}, ""},
		{"a resolver started before", []*corev1.Pod{pod("other", "early", moved.Add(-time.Minute), noLinks)}, "other/early"},
		{"host network, node resolver, other namespace", []*corev1.Pod{pod("other", "node", moved.Add(-time.Hour), hostDefault)}, ""},
		{"host network, Service links in the namespace", []*corev1.Pod{pod("app", "node", moved.Add(-time.Hour), func(p *corev1.Pod) {
			p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSDefault
		})}, "app/node"},
		{"finished before", []*corev1.Pod{pod("app", "job", moved.Add(-time.Hour), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}, ""},
	} {
		client := fake.NewClientset()
		for _, p := range c.pods {
			if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		findings, err := CheckOldIPBridgeRemoval(context.Background(), &k8sops.Client{Kube: client}, bridges)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.want == "" && len(findings) > 0:
			t.Errorf("%s: refused: %v", c.name, findings)
		case c.want != "" && (len(findings) != 1 || !strings.Contains(findings[0].Detail, c.want) || !strings.Contains(findings[0].Detail, "app/web")):
			t.Errorf("%s: findings %v, want a refusal naming %s and app/web", c.name, findings, c.want)
		}
	}
}
