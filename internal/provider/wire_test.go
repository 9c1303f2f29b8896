package provider

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// wireServices is how many Services (besides the cluster DNS) the wire tests move.
const wireServices = 20

// TestAccWire_recreation moves the cluster DNS Service and 20 Services while one client of each
// kind sends a request to each Service every 100 ms through a real kube-proxy (nftables) and
// CoreDNS: with the default configuration (the moves data source whole, nothing else set) and
// kubeadm's Corefile, and with old_ip_bridges = "all" and kOps' Corefile. It logs what each
// kind of client saw, and fails on any failure of a client kind the configuration promises to
// keep: clients that resolve names (on the old DNS IP or the new) always; clients that keep
// the IP they resolved once, or use <SVC>_SERVICE_HOST, with old_ip_bridges = "all" (with
// "dns" the old IPs are freed dns_ttl after each move, and such clients fail from then on:
// their failures must not start earlier).
func TestAccWire_recreation(t *testing.T) {
	testAccPreCheck(t)
	wireCases(t, testcluster.ProxyNFTables)
}

// TestAccWire_recreationIPTables is TestAccWire_recreation's moves with kube-proxy in iptables mode.
func TestAccWire_recreationIPTables(t *testing.T) {
	testAccPreCheck(t)
	wireCases(t, testcluster.ProxyIPTables)
}

func wireCases(t *testing.T, mode testcluster.ProxyMode) {
	cases := []struct {
		corefile testcluster.Corefile
		bridges  string // old_ip_bridges; "" the default
	}{{testcluster.CorefileKubeadm, ""}, {testcluster.CorefileKOps, recreation.BridgesAll}}
	for _, c := range cases {
		name := c.corefile.Name + "-" + cmp.Or(c.bridges, "defaults")
		t.Run(name, func(t *testing.T) {
			wireRecreation(t, testcluster.WireOptions{Mode: mode, Corefile: c.corefile}, c.bridges)
		})
	}
}

func wireRecreation(t *testing.T, o testcluster.WireOptions, bridges string) {
	if testcluster.RerunIsolated(t) {
		return
	}
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: 1})
	wire, err := c.StartWire(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := wire.Seed(ctx, "wire", wireServices, "100.64.0.10")
	if err != nil {
		t.Fatal(err)
	}
	// Only now: the apiserver would give some of the Services an IP in it (any Ready range).
	if _, err := servicecidr.CreateServiceCIDR(ctx, clientFor(c), "new", []string{faultTarget.String()}); err != nil {
		t.Fatal(err)
	}
	cl, err := wire.StartClients(ctx, testcluster.ClientOptions{Services: seed.Services})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	time.Sleep(2 * time.Second)
	if r := cl.Report(); r.Failed(testcluster.ClientKinds...) != 0 {
		t.Fatalf("clients failed before the move:\n%s", r)
	}

	settings := ""
	if bridges != "" {
		settings = fmt.Sprintf("  old_ip_bridges = %q\n", bridges)
	}
	w := newCLIWorkspace(t, providerBlock(c.Kubeconfig)+recreationHCLWith("", `  target_cidrs = ["`+faultTarget.String()+`"]`, settings))
	w.planFile()
	start := time.Now()
	w.applyFile()
	applied := time.Now()
	// Clients that cached an answer from before the move ask again once the Corefile's TTL ran out.
	time.Sleep(o.Corefile.TTL + 3*time.Second)
	settled := time.Now()
	time.Sleep(2 * time.Second)
	r := cl.Stop()
	t.Logf("kube-proxy %s, %s's Corefile, old_ip_bridges %q: %d Services and the cluster DNS moved in %s; what the clients saw:\n%s",
		o.Mode, o.Corefile.Name, cmp.Or(bridges, recreation.BridgesDNS), wireServices, applied.Sub(start).Round(time.Millisecond), r)
	promised := []testcluster.ClientKind{testcluster.ClientOldResolver, testcluster.ClientNewResolver}
	if bridges == recreation.BridgesAll {
		promised = testcluster.ClientKinds
	}
	if n := r.Failed(promised...); n > 0 {
		t.Errorf("%d failed queries or requests of the client kinds %v during the move: zero wanted", n, promised)
	}
	for _, k := range testcluster.ClientKinds {
		if slices.Contains(promised, k) {
			continue
		}
		// Not promised: the old IPs go with their bridges, dns_ttl after each Service's move.
		for _, f := range r.Kinds[k].Failures {
			if f.Since < recreation.DefaultDNSTTL {
				t.Errorf("%s: %s failed %s after its move, before its old IPs' bridge was due to go (%s): %s", k, f.Service, f.Since, recreation.DefaultDNSTTL, f.Reason)
				break
			}
		}
	}

	// Failures after the TTL are logged; a Service that does not answer again is an error.
	late := 0
	for _, k := range []testcluster.ClientKind{testcluster.ClientOldResolver, testcluster.ClientNewResolver} {
		kr := r.Kinds[k]
		if kr.Requests == 0 {
			t.Errorf("%s: no request sent", k)
		}
		for _, f := range kr.Failures {
			if f.At.After(settled) {
				late++
				t.Logf("%s: %s failed %s after the move, past the Corefile's TTL: %s", k, f.Service, f.At.Sub(applied).Round(time.Millisecond), f.Reason)
			}
		}
		for _, svc := range seed.Services {
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				return cl.Reach(ctx, k, svc, "") == nil, nil
			})
			if err != nil {
				t.Errorf("%s: %s does not answer through its name after the move and the Corefile's TTL: %v", k, svc, cl.Reach(ctx, k, svc, ""))
			}
		}
	}
}
