// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccCalicoIPPool_lastEnabledPool: taking the last enabled pool of a family out of service
// leaves Calico's own IPAM with no address to give, and no pod starts. Refused at plan when the
// configuration disables it alone; planned fine when the new pool is created first in the same
// run; refused again at apply when, after the plan, the pool it counted on was disabled by
// hand; deleting the old pool while pods hold addresses in it is refused at plan or warned of, as
// its deletion_policy says; and destroying the workspace, which would delete the pool every pod
// lives in, is refused at plan.
func TestAccCalicoIPPool_lastEnabledPool(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	newPool := poolBlock("new", "10.20.0.0/16", "  ipip_mode    = \"Always\"\n  nat_outgoing = true\n")
	oldPool := func(extra string) string {
		return strings.Replace(poolBlock("old", oldPoolCIDR, "  disabled = true\n"+extra), `name = "old"`, `name = "`+oldPoolName+`"`, 1)
	}
	importOld := "import {\n  to = k8scidr_calico_ippool.old\n  id = \"" + oldPoolName + "\"\n}\n"

	e.deployment("web", 2) // two live pods in the old pool, for the delete below

	w := newCLIWorkspace(t, e.provider()+importOld+oldPool(""))
	if out, err := w.run("plan"); err == nil || !diagRE("Error: Last Enabled Pool of Its Family", "disabled = true",
		"IPPool default-ipv4-ippool (10.10.0.0/18) is the last enabled IPv4 pool", "depends_on").MatchString(out) {
		t.Errorf("disabling the only pool passed plan (%v):\n%s", err, out)
	} else {
		logDiag(t, out, "Error: Last Enabled Pool of Its Family")
	}

	// The new pool first, in the same run: the plan counts it.
	w.write(e.provider() + importOld + newPool + oldPool("  depends_on = [k8scidr_calico_ippool.new]\n"))
	if out, err := w.run("plan"); err != nil {
		t.Errorf("with the new pool created first the plan fails: %v\n%s", err, out)
	}

	// A saved plan disables the old pool while the new one exists; before it is applied, the
	// new one is disabled by hand. The apply re-checks live and leaves the old pool enabled.
	w.write(e.provider() + newPool)
	w.planFile()
	w.applyFile()
	w.write(e.provider() + importOld + newPool + oldPool("  depends_on = [k8scidr_calico_ippool.new]\n"))
	w.planFile()
	setDisabled := func(name string, disabled bool) {
		t.Helper()
		if _, err := e.api.UpdateIPPool(ctx, "test", name, calico.PoolSettings{Disabled: disabled}, []string{"disabled"}); err != nil {
			t.Fatal(err)
		}
	}
	setDisabled("new", true)
	out, err := w.run("apply", "tfplan")
	if err == nil || !diagRE("Error: Last Enabled Pool of Its Family", "IPPool default-ipv4-ippool").MatchString(out) {
		t.Errorf("the apply disabled the last enabled pool (%v):\n%s", err, out)
	}
	if p, err := e.api.GetIPPool(ctx, oldPoolName); err != nil || p == nil || p.Settings.Disabled {
		t.Fatalf("the old pool after the refused apply: %+v (%v)", p, err)
	}
	setDisabled("new", false)
	w.planFile()
	w.applyFile()
	w.converged()

	// Deleting the old pool, which the two pods still hold addresses in: refused at plan with
	// refuse_if_allocated (its apply would refuse), a warning naming them with wait_for_drain.
	for _, c := range []struct{ policy, want string }{
		{"refuse_if_allocated", "Error: IPPool Holds Live Pods"},
		{"wait_for_drain", "Warning: Delete Waits for Live Pods"},
	} {
		w.write(e.provider() + importOld + newPool + oldPool("  depends_on = [k8scidr_calico_ippool.new]\n  deletion_policy = \""+c.policy+"\"\n"))
		w.planFile()
		w.applyFile()
		w.write(e.provider() + newPool)
		out, err := w.run("plan")
		if !diagRE(c.want, "IPPool "+oldPoolName, "live pod: 2", "k8scidr_workload_roll").MatchString(out) || (err == nil) != (c.policy == "wait_for_drain") {
			t.Errorf("deleting the old pool with deletion_policy = %s while two pods hold addresses there (%v), want %q:\n%s", c.policy, err, c.want, out)
		} else {
			logDiag(t, out, c.want)
		}
	}
	// deletion_policy = "force" "deletes anyway (their addresses stay in orphaned blocks)": the
	// delete does not wait for the two pods, and says what it left.
	w.write(e.provider() + importOld + newPool + oldPool("  depends_on = [k8scidr_calico_ippool.new]\n  deletion_policy = \"force\"\n"))
	w.planFile()
	w.applyFile()
	w.write(e.provider() + newPool)
	w.planFile()
	if out := w.applyFile(); !diagRE("Warning: Addresses Left in the Deleted Pool's Blocks", "IPPool "+oldPoolName, "live pod: 2").MatchString(out) {
		t.Errorf("the forced delete does not say what it left:\n%s", out)
	}
	if p, err := e.api.GetIPPool(ctx, oldPoolName); err != nil || p != nil {
		t.Errorf("the old pool after the forced delete: %+v (%v)", p, err)
	}
	for _, p := range e.waitPods("web", 2) {
		if !netip.MustParsePrefix(oldPoolCIDR).Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Errorf("pod %s at %s: a forced delete leaves pods where they are", p.Name, p.Status.PodIP)
		}
	}

	// Destroying the workspace would delete the pool every new pod takes its address from.
	if out, err := w.run("plan", "-destroy"); err == nil || !diagRE("Error: Last Enabled Pool of Its Family",
		"IPPool new (10.20.0.0/16)", "terraform state rm").MatchString(out) {
		t.Errorf("destroying the last enabled pool passed plan (%v):\n%s", err, out)
	} else {
		logDiag(t, out, "Error: Last Enabled Pool of Its Family")
	}
	if p, err := e.api.GetIPPool(ctx, "new"); err != nil || p == nil || p.Settings.Disabled {
		t.Errorf("the new pool: %+v (%v)", p, err)
	}
}

// TestAccCalicoIPPool_nodeCoverage: disabling the old pool when the new one selects only some
// nodes is refused at plan, naming the nodes left without a pool. Calico's own IPAM is the
// oracle: with the old pool disabled by hand, it gives a pod address on the covered node and
// none on the other. A selector that covers both nodes plans.
func TestAccCalicoIPPool_nodeCoverage(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	for node, zone := range map[string]string{"kwok-node-0": "a", "kwok-node-1": "b"} {
		n, err := e.c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["zone"] = zone
		if _, err := e.c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	newPool := func(sel string) string {
		return poolBlock("new", "10.20.0.0/16", fmt.Sprintf("  ipip_mode     = \"Always\"\n  nat_outgoing  = true\n  node_selector = %q\n", sel))
	}
	oldPool := "import {\n  to = k8scidr_calico_ippool.old\n  id = \"" + oldPoolName + "\"\n}\n" +
		strings.Replace(poolBlock("old", oldPoolCIDR, "  disabled = true\n  depends_on = [k8scidr_calico_ippool.new]\n"), `name = "old"`, `name = "`+oldPoolName+`"`, 1)

	w := newCLIWorkspace(t, e.provider()+newPool("zone == 'a'")+oldPool)
	if out, err := w.run("plan"); err == nil || !diagRE("Error: Nodes No Other Pool Selects", "IPPool "+oldPoolName,
		"1 of the 2 nodes (kwok-node-1)", "new: zone == 'a'", `node_selector = "all()"`).MatchString(out) {
		t.Errorf("disabling the old pool with the new one selecting zone a only passed plan (%v):\n%s", err, out)
	} else {
		logDiag(t, out, "Error: Nodes No Other Pool Selects")
	}

	// What that plan would have done, by hand: Calico's IPAM finds no pool for kwok-node-1.
	w.write(e.provider() + newPool("zone == 'a'"))
	w.planFile()
	w.applyFile()
	if _, err := e.api.UpdateIPPool(ctx, "test", oldPoolName, calico.PoolSettings{Disabled: true}, []string{"disabled"}); err != nil {
		t.Fatal(err)
	}
	if ip, err := e.ipam.AssignLeaked(ctx, "default", "probe-a", "kwok-node-0"); err != nil || !netip.MustParsePrefix("10.20.0.0/16").Contains(ip) {
		t.Errorf("Calico's IPAM on kwok-node-0 (zone a): %v, %v; want an address in the new pool", ip, err)
	}
	if ip, err := e.ipam.AssignLeaked(ctx, "default", "probe-b", "kwok-node-1"); err == nil || !strings.Contains(err.Error(), "no configured Calico pools for node kwok-node-1") {
		t.Errorf("Calico's IPAM on kwok-node-1 (zone b) with only the zone-a pool enabled: %v, %v; want no configured pool", ip, err)
	}
	if _, err := e.api.UpdateIPPool(ctx, "test", oldPoolName, calico.PoolSettings{}, []string{"disabled"}); err != nil {
		t.Fatal(err)
	}

	w.write(e.provider() + newPool("zone in {'a', 'b'}") + oldPool)
	if out, err := w.run("plan"); err != nil || strings.Contains(out, "Nodes No Other Pool Selects") || strings.Contains(out, "Node Coverage") {
		t.Errorf("with the new pool selecting both zones the plan fails or warns (%v):\n%s", err, out)
	}
}

// TestAccCalicoIPPool_replaced: "Changing it replaces the pool" for cidr and for block_size: the
// plan shows a replacement, and the apply leaves one pool of that name with the new value.
func TestAccCalicoIPPool_replaced(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	w := newCLIWorkspace(t, e.provider()+poolBlock("x", "10.40.0.0/16", "  block_size = 26\n"))
	w.planFile()
	w.applyFile()
	for _, c := range []struct {
		cidr  string
		block int
	}{{"10.41.0.0/16", 26}, {"10.41.0.0/16", 28}} {
		w.write(e.provider() + poolBlock("x", c.cidr, fmt.Sprintf("  block_size = %d\n", c.block)))
		w.planFile()
		if got := w.plannedActions("k8scidr_calico_ippool.x"); !slices.Equal(got, []string{"delete", "create"}) {
			t.Errorf("cidr %s, block_size %d: planned %v, want the pool replaced [delete create]", c.cidr, c.block, got)
		}
		w.applyFile()
		p, err := e.api.GetIPPool(ctx, "x")
		if err != nil || p == nil || p.Spec.CIDR != c.cidr || p.Spec.BlockSize != c.block {
			t.Errorf("pool x after the replacement: %+v (%v); want cidr %s, block size %d", p, err, c.cidr, c.block)
		}
		w.converged()
	}
}

// TestAccCalicoIPPool_twoAtOnce: pools taken out of service in one run count each other out,
// and a Manual pool counts for nothing. Two enabled pools disabled together, with no order
// between them, are refused at plan; a Manual pool beside the last automatic one does not make
// disabling it pass. A saved plan that disables two pools of three, applied after the third was
// disabled by hand, disables one and refuses the other: Terraform applies both at once, and each
// re-checks live only after the other's write. Calico's own IPAM is the oracle: it gives no
// address from the Manual pool alone, and one after the refused apply.
func TestAccCalicoIPPool_twoAtOnce(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	importOld := "import {\n  to = k8scidr_calico_ippool.old\n  id = \"" + oldPoolName + "\"\n}\n"
	oldPool := func(disabled bool) string {
		return importOld + strings.Replace(poolBlock("old", oldPoolCIDR, fmt.Sprintf("  disabled = %t\n", disabled)), `name = "old"`, `name = "`+oldPoolName+`"`, 1)
	}
	pool := func(name, cidr string, disabled bool, extra string) string {
		return poolBlock(name, cidr, fmt.Sprintf("  ipip_mode    = \"Always\"\n  nat_outgoing = true\n  disabled     = %t\n%s", disabled, extra))
	}
	w := newCLIWorkspace(t, e.provider()+oldPool(false)+pool("b", "10.30.0.0/16", false, ""))
	w.planFile()
	w.applyFile()

	// Both disabled in one run: each alone would leave the other.
	w.write(e.provider() + oldPool(true) + pool("b", "10.30.0.0/16", true, ""))
	if out, err := w.run("plan"); err == nil || !diagRE("Error: Last Enabled Pool of Its Family", "is the last enabled IPv4 pool",
		"this run also disables or deletes").MatchString(out) {
		t.Errorf("disabling both enabled pools in one run passed plan (%v):\n%s", err, out)
	} else {
		logDiag(t, out, "Error: Last Enabled Pool of Its Family")
	}

	// Only a Manual pool beside the old one: Calico assigns nothing from it to a new pod.
	w.write(e.provider() + oldPool(false) + pool("b", "10.30.0.0/16", true, "") + pool("manual", "10.50.0.0/16", false, "  assignment_mode = \"Manual\"\n"))
	w.planFile()
	w.applyFile()
	w.write(e.provider() + oldPool(true) + pool("b", "10.30.0.0/16", true, "") + pool("manual", "10.50.0.0/16", false, "  assignment_mode = \"Manual\"\n"))
	if out, err := w.run("plan"); err == nil || !diagRE("Error: Last Enabled Pool of Its Family", "IPPool "+oldPoolName, "a Manual pool").MatchString(out) {
		t.Errorf("disabling the old pool with only a Manual pool left passed plan (%v):\n%s", err, out)
	}
	setDisabled := func(name string, disabled bool) {
		t.Helper()
		if _, err := e.api.UpdateIPPool(ctx, "test", name, calico.PoolSettings{Disabled: disabled}, []string{"disabled"}); err != nil {
			t.Fatal(err)
		}
	}
	setDisabled(oldPoolName, true) // what that plan would have done, by hand
	if ip, err := e.ipam.AssignLeaked(ctx, "default", "probe-manual", "kwok-node-0"); err == nil {
		t.Errorf("Calico's IPAM with only the Manual pool enabled gave %v; the check counts it out because Calico does", ip)
	}
	setDisabled(oldPoolName, false)

	// Three automatic pools; a saved plan disables two of them, then the third goes by hand.
	third := pool("c", "10.40.0.0/16", false, "")
	w.write(e.provider() + oldPool(false) + pool("b", "10.30.0.0/16", false, "") + third)
	w.planFile()
	w.applyFile()
	w.write(e.provider() + oldPool(true) + pool("b", "10.30.0.0/16", true, "") + third)
	w.planFile()
	setDisabled("c", true)
	out, err := w.run("apply", "tfplan")
	if err == nil || !diagRE("Error: Last Enabled Pool of Its Family").MatchString(out) {
		t.Errorf("the apply disabled both pools with the third gone (%v):\n%s", err, out)
	}
	var enabled []string
	for _, name := range []string{oldPoolName, "b"} {
		if p, err := e.api.GetIPPool(ctx, name); err != nil || p == nil {
			t.Fatalf("pool %s: %+v (%v)", name, p, err)
		} else if !p.Settings.Disabled {
			enabled = append(enabled, name)
		}
	}
	if len(enabled) != 1 {
		t.Errorf("after the apply, enabled of the two: %v; want exactly one (the other disabled, this one refused)", enabled)
	}
	if ip, err := e.ipam.AssignLeaked(ctx, "default", "probe-after", "kwok-node-0"); err != nil {
		t.Errorf("Calico's IPAM after the apply gives no address: %v (%v)", err, ip)
	} else {
		t.Logf("Calico's IPAM after the apply: %v from the pool left, %v", ip, enabled)
	}
}
