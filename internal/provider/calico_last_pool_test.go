package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
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
		"IPPool default-ipv4-ippool (10.10.0.0/18) is the only enabled IPv4 pool", "depends_on").MatchString(out) {
		t.Errorf("disabling the only pool passed plan (%v):\n%s", err, out)
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
		if _, err := e.api.UpdateIPPool(ctx, "test", name, k8sops.PoolSettings{Disabled: disabled}, []string{"disabled"}); err != nil {
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
		}
	}
	w.write(e.provider() + importOld + newPool + oldPool("  depends_on = [k8scidr_calico_ippool.new]\n"))
	w.planFile()
	w.applyFile()

	// Destroying the workspace would delete the pool every new pod takes its address from.
	if out, err := w.run("plan", "-destroy"); err == nil || !diagRE("Error: Last Enabled Pool of Its Family",
		"IPPool new (10.20.0.0/16)", "terraform state rm").MatchString(out) {
		t.Errorf("destroying the last enabled pool passed plan (%v):\n%s", err, out)
	}
	if p, err := e.api.GetIPPool(ctx, "new"); err != nil || p == nil || p.Settings.Disabled {
		t.Errorf("the new pool: %+v (%v)", p, err)
	}
}
