// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// poolCase is one IPPool spec of the validation corpus, written both as a k8scidr_calico_ippool
// and as the projectcalico.org/v3 IPPool calicoctl creates.
type poolCase struct {
	name, cidr, ipip, vxlan, selector, assignment string
	blockSize                                     int
	uses                                          []string
	why                                           string
	// stricter says why the provider refuses a spec calicoctl accepts, on purpose; the test
	// checks that both still hold.
	stricter string
}

func (c poolCase) hcl(key string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resource \"k8scidr_calico_ippool\" %q {\n  name = %q\n  cidr = %q\n", key, c.name, c.cidr)
	if c.blockSize != 0 {
		fmt.Fprintf(&b, "  block_size = %d\n", c.blockSize)
	}
	for attr, v := range map[string]string{"ipip_mode": c.ipip, "vxlan_mode": c.vxlan, "node_selector": c.selector, "assignment_mode": c.assignment} {
		if v != "" {
			fmt.Fprintf(&b, "  %s = %q\n", attr, v)
		}
	}
	if c.uses != nil {
		q := make([]string, len(c.uses))
		for i, u := range c.uses {
			q[i] = fmt.Sprintf("%q", u)
		}
		fmt.Fprintf(&b, "  allowed_uses = [%s]\n", strings.Join(q, ", "))
	}
	return b.String() + "}\n"
}

func (c poolCase) yaml(t *testing.T) []byte {
	spec := map[string]any{"cidr": c.cidr}
	if c.blockSize != 0 {
		spec["blockSize"] = c.blockSize
	}
	for field, v := range map[string]string{"ipipMode": c.ipip, "vxlanMode": c.vxlan, "nodeSelector": c.selector, "assignmentMode": c.assignment} {
		if v != "" {
			spec[field] = v
		}
	}
	if c.uses != nil {
		spec["allowedUses"] = c.uses
	}
	out, err := yaml.Marshal(map[string]any{"apiVersion": "projectcalico.org/v3", "kind": "IPPool", "metadata": map[string]any{"name": c.name}, "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// poolCorpus: valid and invalid pool specs (CIDRs, block sizes, modes, selectors, allowed uses,
// assignment modes), the FuzzValidateIPPool seeds among them. Valid ones are disjoint from each
// other and from the cluster's pool (10.10.0.0/18).
var poolCorpus = []poolCase{
	{name: "v4-defaults", cidr: "10.30.0.0/16", why: "defaults"},
	{name: "v4-bs28", cidr: "10.31.0.0/24", blockSize: 28, why: "kubeadm-sized"},
	{name: "v4-bs20", cidr: "10.32.0.0/16", blockSize: 20, why: "smallest block prefix"},
	{name: "v4-bs32", cidr: "10.33.0.0/24", blockSize: 32, why: "one-address blocks"},
	{name: "v4-bs-pool", cidr: "10.34.0.0/26", blockSize: 26, why: "block as large as the pool"},
	{name: "v6-vxlan", cidr: "fd00:20::/64", blockSize: 122, vxlan: "CrossSubnet", ipip: "Never", why: "IPv6 with VXLAN (fuzz seed)"},
	{name: "v4-vxlan", cidr: "10.35.0.0/16", vxlan: "Always", ipip: "Never", why: "VXLAN"},
	{name: "v4-ipip-cross", cidr: "10.36.0.0/16", ipip: "CrossSubnet", why: "IPIP CrossSubnet"},
	{name: "v4-selector", cidr: "10.37.0.0/16", selector: "zone == 'a' && has(gpu)", why: "node selector"},
	{name: "v4-selector-none", cidr: "10.38.0.0/16", selector: "!all()", why: "no node"},
	{name: "v4-tunnel-only", cidr: "10.39.0.0/16", uses: []string{"Tunnel"}, why: "tunnel addresses only"},
	{name: "v4-lb", cidr: "10.40.0.0/16", uses: []string{"LoadBalancer"}, why: "LoadBalancer addresses"},
	{name: "v4-manual", cidr: "10.41.0.0/16", assignment: "Manual", why: "manual assignment"},

	{name: "bad-host-bits", cidr: "10.42.0.1/16", why: "host bits set (fuzz seed)"},
	{name: "bad-mode-case", cidr: "10.43.0.0/16", ipip: "always", why: "lower-case mode (fuzz seed)"},
	{name: "bad-bs-big", cidr: "10.44.0.0/24", blockSize: 22, why: "block larger than the pool (fuzz seed)"},
	{name: "bad-bs19", cidr: "10.45.0.0/16", blockSize: 19, why: "block prefix below 20"},
	{name: "bad-bs33", cidr: "10.46.0.0/16", blockSize: 33, why: "block prefix above 32"},
	{name: "bad-v6-bs115", cidr: "fd00:21::/64", blockSize: 115, why: "IPv6 block prefix below 116"},
	{name: "bad-both-encap", cidr: "10.47.0.0/16", ipip: "Always", vxlan: "Always", why: "two encapsulations"},
	{name: "bad-v6-ipip", cidr: "fd00:22::/64", ipip: "Always", why: "IPIP on IPv6"},
	{name: "bad-link-local", cidr: "169.254.0.0/16", why: "link-local"},
	{name: "bad-mode", cidr: "10.48.0.0/16", vxlan: "Sometimes", why: "unknown mode"},
	{name: "bad-selector", cidr: "10.49.0.0/16", selector: "zone = a", why: "selector syntax"},
	{name: "bad-use", cidr: "10.50.0.0/16", uses: []string{"Pods"}, why: "unknown use"},
	{name: "bad-assignment", cidr: "10.51.0.0/16", assignment: "Auto", why: "unknown assignment mode"},
	{name: "bad-overlap", cidr: "10.10.8.0/24", why: "overlaps the cluster's pool"},
	{name: "Bad-Name", cidr: "10.52.0.0/16", why: "not a DNS subdomain"},
	{name: "bad-cidr", cidr: "10.53.0.0", why: "not a CIDR"},
	{name: "bad-lb-workload", cidr: "10.54.0.0/16", uses: []string{"LoadBalancer", "Workload"}, why: "LoadBalancer with Workload"},
	{name: "no-uses", cidr: "10.55.0.0/16", uses: []string{}, why: "no allowed use",
		stricter: "Calico stores [] as [Workload, Tunnel], so every plan would show the change again: the provider asks to leave it unset"},
}

// TestAccCalicoIPPool_calicoctlVerdicts holds the provider's plan verdict on every corpus spec
// against calicoctl's (Calico's own client-side validation, then the datastore), on the
// crd.projectcalico.org/v1 CRDs of a manifest install: each is accepted by both or refused by
// both. The provider's verdict is the one `terraform plan` gives on the test cluster (static
// checks, then the checks against the cluster's pools).
func TestAccCalicoIPPool_calicoctlVerdicts(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	checkVerdicts(t, poolCorpus, e.providerVerdicts(poolCorpus), map[string]map[string]bool{"calicoctl": e.calicoctlVerdicts(poolCorpus)})
}

// TestAccCalicoIPPool_apiServerVerdicts is the same with Calico's API server serving
// projectcalico.org/v3: the provider (which picks v3 there), calicoctl and the API server's own
// defaulting and validation give one verdict on every spec.
func TestAccCalicoIPPool_apiServerVerdicts(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoV3Group)
	checkVerdicts(t, poolCorpus, e.providerVerdicts(poolCorpus), map[string]map[string]bool{
		"calicoctl": e.calicoctlVerdicts(poolCorpus), "Calico's API server": e.apiServerVerdicts(poolCorpus),
	})
}

// checkVerdicts compares the provider's refusals (corpus key → why) with each oracle's
// acceptances (pool name → accepted).
func checkVerdicts(t *testing.T, corpus []poolCase, refused map[string][]string, oracles map[string]map[string]bool) {
	t.Helper()
	for i, c := range corpus {
		key := fmt.Sprintf("c%d", i)
		provider := refused[key] == nil
		for name, accepted := range oracles {
			calico := accepted[c.name]
			if c.stricter != "" {
				if provider || !calico {
					t.Errorf("%s (%s): the provider %s, %s %s; want only the provider to refuse it: %s", c.name, c.why,
						verdict(provider, refused[key]), name, verdict(calico, nil), c.stricter)
				}
				continue
			}
			if provider != calico {
				t.Errorf("%s (%s): the provider %s, %s %s", c.name, c.why, verdict(provider, refused[key]), name, verdict(calico, nil))
			}
		}
	}
}

// calicoctlVerdicts creates each spec with calicoctl and deletes what it accepted.
func (e *calicoEnv) calicoctlVerdicts(corpus []poolCase) map[string]bool {
	t, ctx := e.t, context.Background()
	dir := t.TempDir()
	accepted := map[string]bool{}
	for i, c := range corpus {
		file := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
		if err := os.WriteFile(file, c.yaml(t), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := e.c.Calicoctl(ctx, "create", "-f", file)
		accepted[c.name] = err == nil
		if err != nil {
			t.Logf("calicoctl refuses %s (%s): %s", c.name, c.why, lastLine(out))
			continue
		}
		if _, err := e.c.Calicoctl(ctx, "delete", "ippool", c.name); err != nil {
			t.Fatal(err)
		}
	}
	return accepted
}

// apiServerVerdicts creates each spec through projectcalico.org/v3 and deletes what was accepted.
func (e *calicoEnv) apiServerVerdicts(corpus []poolCase) map[string]bool {
	t, ctx := e.t, context.Background()
	accepted := map[string]bool{}
	for _, c := range corpus {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(c.yaml(t), &obj.Object); err != nil {
			t.Fatal(err)
		}
		_, err := e.api.Pools.Create(ctx, &obj, metav1.CreateOptions{})
		accepted[c.name] = err == nil
		if err != nil {
			t.Logf("Calico's API server refuses %s (%s): %v", c.name, c.why, err)
			continue
		}
		if err := e.api.Pools.Delete(ctx, c.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return accepted
}

// providerVerdicts plans every corpus spec (resource "c<i>") and returns the error summaries
// of the refused ones. Static checks come first (terraform stops a plan at the first invalid
// resource), then a plan of the statically valid ones.
func (e *calicoEnv) providerVerdicts(corpus []poolCase) map[string][]string {
	t := e.t
	var config strings.Builder
	config.WriteString(e.provider())
	for i, c := range corpus {
		config.WriteString(c.hcl(fmt.Sprintf("c%d", i)))
	}
	w := newCLIWorkspace(t, config.String())
	refused := map[string][]string{}
	collect := func(d tfDiagnostic) {
		if d.Severity != "error" {
			return
		}
		key, ok := strings.CutPrefix(d.Snippet.Context, `resource "k8scidr_calico_ippool" "`)
		if !ok {
			t.Errorf("an error outside the corpus resources: %s: %s", d.Summary, d.Detail)
			return
		}
		key = strings.TrimSuffix(key, `"`)
		refused[key] = append(refused[key], d.Summary)
	}
	out := w.stdout("validate", "-json")
	var v struct {
		Diagnostics []tfDiagnostic `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("terraform validate -json: %v\n%s", err, out)
	}
	for _, d := range v.Diagnostics {
		collect(d)
	}
	config.Reset()
	config.WriteString(e.provider())
	for i, c := range corpus {
		if key := fmt.Sprintf("c%d", i); refused[key] == nil {
			config.WriteString(c.hcl(key))
		}
	}
	w.write(config.String())
	out = w.stdout("plan", "-json", "-input=false")
	for line := range strings.Lines(out) {
		var m struct {
			Type       string       `json:"type"`
			Diagnostic tfDiagnostic `json:"diagnostic"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Type == "diagnostic" {
			collect(m.Diagnostic)
		}
	}
	return refused
}

// stdout runs terraform to completion and returns its standard output, whatever its exit.
func (w *cliWorkspace) stdout(args ...string) string {
	out, _ := w.command(nil, append(args, "-no-color")...).Output()
	return string(out)
}

// tfDiagnostic is a diagnostic of terraform's JSON output.
type tfDiagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail"`
	Snippet  struct {
		Context string `json:"context"`
	} `json:"snippet"`
}

func verdict(accepted bool, why []string) string {
	if accepted {
		return "accepts it"
	}
	if why == nil {
		return "refuses it"
	}
	return fmt.Sprintf("refuses it (%s)", strings.Join(why, "; "))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
