// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/calico"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// calicoEnv is a cluster with Calico's CRDs, Calico's IPAM, and the pool the installer made:
// default-ipv4-ippool, 10.10.0.0/18, IPIP Always, NAT on (seed 003's range). With group
// projectcalico.org/v3, Calico's API server serves the pools.
type calicoEnv struct {
	t     *testing.T
	c     *testcluster.Cluster
	ipam  *testcluster.CalicoIPAM
	api   *calico.CalicoAPI
	group string
}

const (
	oldPoolName = "default-ipv4-ippool"
	oldPoolCIDR = "10.10.0.0/18"
)

// newCalicoEnv starts the cluster. release picks the v1 CRDs' Calico release; group is the
// API group the provider and the installer use for IPPools (the v3 group runs Calico's API
// server).
func newCalicoEnv(t *testing.T, release, group string) *calicoEnv {
	t.Helper()
	return newCalicoEnvPool(t, release, group, 2, oldPoolCIDR, 26)
}

// newCalicoEnvPool is newCalicoEnv with that many nodes and the installer's pool on cidr with
// blockSize.
func newCalicoEnvPool(t *testing.T, release, group string, nodes int, cidr string, blockSize int64) *calicoEnv {
	t.Helper()
	testAccPreCheck(t)
	requireOwnCluster(t)
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{Nodes: nodes, Calico: release, CalicoAPIServer: group == k8sops.CalicoV3Group})
	// As calico-node writes the default pool: every field explicit, allowedUses where known.
	spec := map[string]any{"cidr": cidr, "blockSize": blockSize, "ipipMode": "Always", "vxlanMode": "Never",
		"natOutgoing": true, "nodeSelector": "all()"}
	if release != testcluster.Calico328 {
		spec["allowedUses"] = []any{"Workload", "Tunnel"}
	}
	if err := c.CreateCalicoPool(ctx, group, oldPoolName, spec); err != nil {
		t.Fatal(err)
	}
	ipam, err := c.StartCalicoIPAM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := clientFor(c)
	client.CalicoAPIGroup = group
	api, err := calico.Calico(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	return &calicoEnv{t: t, c: c, ipam: ipam, api: api, group: group}
}

// provider leaves calico_api_group at "auto": it must find e.group as Calico's own tools do
// (projectcalico.org/v3 where Calico's API server runs, else the v1 CRDs); the resources' and
// data sources' api_group show what it found.
func (e *calicoEnv) provider() string {
	return fmt.Sprintf("provider \"k8scidr\" {\n  config_path      = %q\n  calico_api_group = \"auto\"\n}\n", e.c.Kubeconfig)
}

// deployment runs replicas pods labelled app=name in default and waits for their addresses.
func (e *calicoEnv) deployment(name string, replicas int32) []corev1.Pod {
	e.t.Helper()
	return e.waitPods(e.deploymentNoWait(name, replicas), int(replicas))
}

// testDeployment is replicas pods labelled app=name.
func testDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1"}}},
			},
		},
	}
}

func (e *calicoEnv) waitPods(app string, n int) []corev1.Pod {
	e.t.Helper()
	pods, err := e.c.WaitPodIPs(context.Background(), "default", "app="+app, n)
	if err != nil {
		e.t.Fatalf("%v (calico-ipam: %v)", err, e.ipam.Errors())
	}
	return pods
}

// restartInto restarts a deployment of n pods and waits until n pods run, each with an address
// in cidr (and no other pod of it is left).
func (e *calicoEnv) restartInto(name string, n int, cidr string) {
	e.t.Helper()
	e.restart(name)
	pfx := netip.MustParsePrefix(cidr)
	if _, err := e.c.WaitPods(context.Background(), "default", "app="+name, n, func(p corev1.Pod) bool {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		return err == nil && p.Status.Phase == corev1.PodRunning && pfx.Contains(ip)
	}); err != nil {
		e.t.Fatalf("%s restarted into %s: %v (calico-ipam: %v)", name, cidr, err, e.ipam.Errors())
	}
}

// restart rolls a deployment the way kubectl rollout restart does.
func (e *calicoEnv) restart(name string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := e.c.Kube.AppsV1().Deployments("default").Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		e.t.Error(err)
	}
}

func podsIn(t *testing.T, pods []corev1.Pod, cidr string) {
	t.Helper()
	pfx := netip.MustParsePrefix(cidr)
	for _, p := range pods {
		if !pfx.Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Errorf("pod %s has %s, want an address in %s", p.Name, p.Status.PodIP, cidr)
		}
	}
}

// blocksIn lists the live IPAM blocks inside cidr and the BlockAffinities pointing into it.
func (e *calicoEnv) blocksIn(cidr string) ([]calico.Block, []string) {
	e.t.Helper()
	ctx := context.Background()
	pfx := netip.MustParsePrefix(cidr)
	blocks, err := e.api.ListBlocks(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	blocks = slices.DeleteFunc(blocks, func(b calico.Block) bool { return !pfx.Contains(b.CIDR.Addr()) })
	affs, err := e.api.Affinities.List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, a := range affs.Items {
		c, _, _ := unstructured.NestedString(a.Object, "spec", "cidr")
		if p, err := netip.ParsePrefix(c); err == nil && pfx.Contains(p.Addr()) {
			names = append(names, a.GetName())
		}
	}
	return blocks, names
}

func (e *calicoEnv) poolSpec(name string) map[string]any {
	e.t.Helper()
	u, err := e.api.Pools.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return spec
}

func poolBlock(name, cidr, extra string) string {
	return fmt.Sprintf("resource \"k8scidr_calico_ippool\" %q {\n  name = %q\n  cidr = %q\n%s}\n", name, name, cidr, extra)
}

const poolsData = "data \"k8scidr_calico_ippools\" \"all\" {\n  depends_on = [k8scidr_calico_ippool.new]\n}\n"

// onlyChanges is a plan check: the resource's planned update changes exactly these attributes.
type onlyChanges struct {
	addr  string
	attrs []string
}

func (c onlyChanges) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.addr {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		after, _ := rc.Change.After.(map[string]any)
		unknown, _ := rc.Change.AfterUnknown.(map[string]any)
		var changed []string
		for k := range after {
			if unknown[k] == true || !reflect.DeepEqual(before[k], after[k]) {
				changed = append(changed, k)
			}
		}
		sort.Strings(changed)
		if want := slices.Sorted(slices.Values(c.attrs)); !slices.Equal(changed, want) {
			resp.Error = fmt.Errorf("%s: planned changes to %v, want only %v", c.addr, changed, want)
		}
		return
	}
	resp.Error = fmt.Errorf("no change planned for %s", c.addr)
}

func attrCheck(addr, attr string, v knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(addr, tfjsonpath.New(attr), v)
}

// TestAccCalicoIPPool_migrationCRDv1 also walks stage 5's way back (the guide's table) once
// the old pool is disabled; the v3 run does not repeat it, as the provider writes the same field.
func TestAccCalicoIPPool_migrationCRDv1(t *testing.T) {
	testCalicoPoolMigration(t, testcluster.Calico331, k8sops.CalicoCRDV1Group, true)
}

func TestAccCalicoIPPool_migrationV3(t *testing.T) {
	testCalicoPoolMigration(t, testcluster.Calico331, k8sops.CalicoV3Group, false)
}

// testCalicoPoolMigration is seed 003's story: pods in 10.10.0.0/18; a new pool 10.20.0.0/16;
// the old pool imported and disabled with a minimal diff; new pods land in the new pool; the
// old pool's destroy waits for the drain and leaves no block or affinity behind. With wayBack, the
// guide's way back from stage 5 comes between the disable and the destroy: the old pool enabled
// again, then the new one disabled (two applies, so that a pool is enabled at every moment), the
// new pods restarted into the old pool; then forward again the same way.
func testCalicoPoolMigration(t *testing.T, release, group string, wayBack bool) {
	e := newCalicoEnv(t, release, group)
	oldPods := e.deployment("old-app", 4)
	podsIn(t, oldPods, oldPoolCIDR)

	// A short delete timeout: if a step fails, the post-test destroy of the new pool (whose pods
	// then still run) gives up in minutes instead of the default 30 and the suite's budget with it.
	const newFields = "  ipip_mode    = \"Always\"\n  nat_outgoing = true\n  timeouts { delete = \"3m\" }\n"
	newPool := poolBlock("new", "10.20.0.0/16", newFields)
	oldPool := poolBlock("old", oldPoolCIDR, "")
	oldPool = strings.Replace(oldPool, `"old" {`+"\n  name = \"old\"", `"old" {`+"\n  name = \""+oldPoolName+"\"", 1)
	disabledOld := strings.Replace(oldPool, "}\n", "  disabled = true\n}\n", 1)
	enabledOld := strings.Replace(oldPool, "}\n", "  disabled = false\n}\n", 1)
	newPoolWith := func(disabled bool) string {
		return poolBlock("new", "10.20.0.0/16", fmt.Sprintf("%s  disabled = %t\n", newFields, disabled))
	}
	const newAddr, oldAddr, data = "k8scidr_calico_ippool.new", "k8scidr_calico_ippool.old", "data.k8scidr_calico_ippools.all"
	restarted := make(chan struct{})
	var oldSpec map[string]any

	steps := []resource.TestStep{
		{
			Config: e.provider() + newPool + poolsData,
			ConfigStateChecks: []statecheck.StateCheck{
				attrCheck(newAddr, "block_size", knownvalue.Int64Exact(26)),
				attrCheck(newAddr, "vxlan_mode", knownvalue.StringExact("Never")),
				attrCheck(newAddr, "node_selector", knownvalue.StringExact("all()")),
				attrCheck(newAddr, "disabled", knownvalue.Bool(false)),
				attrCheck(newAddr, "allowed_uses", knownvalue.SetExact([]knownvalue.Check{knownvalue.StringExact("Tunnel"), knownvalue.StringExact("Workload")})),
				attrCheck(newAddr, "assignment_mode", knownvalue.StringExact("Automatic")),
				attrCheck(newAddr, "api_group", knownvalue.StringExact(group)),
				attrCheck(newAddr, "capacity", knownvalue.Int64Exact(65536)),
				attrCheck(newAddr, "allocated", knownvalue.Int64Exact(0)),
				attrCheck(data, "pools", knownvalue.ListPartial(map[int]knownvalue.Check{
					0: knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"name": knownvalue.StringExact(oldPoolName), "used": knownvalue.Int64Exact(4), "ipip_mode": knownvalue.StringExact("Always"),
						"capacity": knownvalue.Int64Exact(16384),
					}),
					1: knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact("new"), "used": knownvalue.Int64Exact(0)}),
				})),
				attrCheck(data, "orphaned_blocks", knownvalue.ListExact([]knownvalue.Check{})),
			},
			Check: e.calicoctlAgrees(data),
		},
		{
			// Import the installer's pool by name; only name and cidr are configured.
			Config:             e.provider() + newPool + oldPool + poolsData,
			ResourceName:       oldAddr,
			ImportState:        true,
			ImportStateId:      oldPoolName,
			ImportStatePersist: true,
		},
		{
			// Nothing configured differs from the live pool: an empty plan.
			Config:           e.provider() + newPool + oldPool + poolsData,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			ConfigStateChecks: []statecheck.StateCheck{
				attrCheck(oldAddr, "ipip_mode", knownvalue.StringExact("Always")),
				attrCheck(oldAddr, "nat_outgoing", knownvalue.Bool(true)),
				attrCheck(oldAddr, "allocated", knownvalue.Int64Exact(4)),
			},
		},
		{
			// disabled = true is the only change, and the only field written: the live spec is
			// the one the installer's create left (with Calico's defaults, where its API
			// server filled them in) plus disabled.
			PreConfig: func() { oldSpec = e.poolSpec(oldPoolName) },
			Config:    e.provider() + newPool + disabledOld + poolsData,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(oldAddr, plancheck.ResourceActionUpdate),
				onlyChanges{oldAddr, []string{"disabled"}},
			}},
			Check: func(*terraform.State) error {
				got := e.poolSpec(oldPoolName)
				want := maps.Clone(oldSpec)
				want["disabled"] = true
				if !reflect.DeepEqual(got, want) {
					return fmt.Errorf("live spec %v, want %v", got, want)
				}
				if oldSpec["cidr"] != oldPoolCIDR || oldSpec["ipipMode"] != "Always" || oldSpec["natOutgoing"] != true {
					return fmt.Errorf("the installer's pool was %v", oldSpec)
				}
				// New pods now land in the new pool only.
				podsIn(t, e.deployment("new-app", 3), "10.20.0.0/16")
				return nil
			},
		},
	}
	if wayBack {
		// Each step writes one pool's disabled and nothing else.
		oneField := func(addr string) resource.ConfigPlanChecks {
			return resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate), onlyChanges{addr, []string{"disabled"}}}}
		}
		steps = append(steps,
			resource.TestStep{Config: e.provider() + newPool + enabledOld + poolsData, ConfigPlanChecks: oneField(oldAddr)},
			resource.TestStep{Config: e.provider() + newPoolWith(true) + enabledOld + poolsData, ConfigPlanChecks: oneField(newAddr),
				Check: func(*terraform.State) error { e.restartInto("new-app", 3, oldPoolCIDR); return nil }},
			resource.TestStep{Config: e.provider() + newPoolWith(false) + enabledOld + poolsData, ConfigPlanChecks: oneField(newAddr)},
			resource.TestStep{Config: e.provider() + newPoolWith(false) + disabledOld + poolsData, ConfigPlanChecks: oneField(oldAddr),
				Check: func(*terraform.State) error { e.restartInto("new-app", 3, "10.20.0.0/16"); return nil }},
		)
	}
	steps = append(steps, []resource.TestStep{
		{
			// Destroy the old pool: it waits until its pods have been restarted elsewhere.
			PreConfig: func() {
				// Some time into the destroy, its pods are restarted: the destroy must end after.
				go func() { time.Sleep(4 * time.Second); e.restart("old-app"); close(restarted) }()
			},
			Config: e.provider() + newPool + poolsData,
			Check: func(*terraform.State) error {
				select {
				case <-restarted:
				default:
					return fmt.Errorf("the destroy returned before the pods holding addresses in the pool were restarted")
				}
				podsIn(t, e.waitPods("old-app", 4), "10.20.0.0/16")
				if blocks, affs := e.blocksIn(oldPoolCIDR); len(blocks)+len(affs) > 0 {
					return fmt.Errorf("the old pool left blocks %v and affinities %v", blocks, affs)
				}
				if p, err := e.api.GetIPPool(context.Background(), oldPoolName); err != nil || p != nil {
					return fmt.Errorf("old pool still there (%v)", err)
				}
				return e.calicoctlClean()
			},
		},
		{
			Config: e.provider() + newPool + poolsData,
			ConfigStateChecks: []statecheck.StateCheck{
				attrCheck(data, "pools", knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact("new"), "used": knownvalue.Int64Exact(7)}),
				})),
			},
			Check: e.calicoctlAgrees(data),
		},
		{
			// Destroying the pool every pod now lives in, with no other enabled pool, is refused at
			// plan: Calico would have no address to give, and no pod could start.
			PreConfig: func() {
				for _, d := range []string{"old-app", "new-app"} {
					if err := e.c.Kube.AppsV1().Deployments("default").Delete(context.Background(), d, metav1.DeleteOptions{}); err != nil {
						t.Error(err)
					}
				}
			},
			Config:      e.provider(),
			ExpectError: diagRE("Last Enabled Pool of Its Family", "IPPool new (10.20.0.0/16) is the last enabled IPv4 pool", `deletion_policy = "force"`),
		},
		{
			// Said explicitly, it goes: the pods are gone, so the pool drains, and CheckDestroy
			// finds no block left.
			Config: e.provider() + strings.Replace(newPool, "  name = \"new\"\n", "  name = \"new\"\n  deletion_policy = \"force\"\n", 1) + poolsData,
		},
		{Config: e.provider()},
	}...)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, cidr := range []string{"10.20.0.0/16", oldPoolCIDR} {
				if blocks, affs := e.blocksIn(cidr); len(blocks)+len(affs) > 0 {
					return fmt.Errorf("after destroy, %s still has blocks %v and affinities %v", cidr, blocks, affs)
				}
			}
			return e.calicoctlClean()
		},
		Steps: steps,
	})
	if errs := e.ipam.Errors(); len(errs) > 0 {
		t.Logf("calico-ipam retried: %v", errs)
	}
}

// Leaked addresses and node tunnel addresses are classified, counted exactly, and do not hold a
// drain; refuse_if_allocated names the live pods and changes nothing.
func TestAccCalicoIPPool_allocationClasses(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	ctx := context.Background()
	live := e.deployment("live", 2)
	leaked, err := e.ipam.AssignLeaked(ctx, "default", "gone-pod", "kwok-node-0")
	if err != nil {
		t.Fatal(err)
	}
	tunnel, err := e.ipam.AssignTunnel(ctx, "kwok-node-1", "ipip")
	if err != nil {
		t.Fatal(err)
	}
	orphan := netip.MustParsePrefix("10.99.0.0/26")
	createOrphanBlock(t, e, orphan)

	// force: the test's own destroy deletes the last enabled pool, which is otherwise refused.
	newPool := poolBlock("new", "10.20.0.0/16", "  ipip_mode    = \"Always\"\n  nat_outgoing = true\n  deletion_policy = \"force\"\n")
	oldPool := func(extra string) string {
		return strings.Replace(poolBlock("old", oldPoolCIDR, extra), `name = "old"`, `name = "`+oldPoolName+`"`, 1)
	}
	const oldAddr, data = "k8scidr_calico_ippool.old", "data.k8scidr_calico_ippools.all"
	refuse := oldPool("  deletion_policy = \"refuse_if_allocated\"\n")
	livePods := []string{}
	for _, p := range live {
		livePods = append(livePods, "default/"+p.Name+" "+p.Status.PodIP)
	}
	sort.Strings(livePods)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: e.provider() + newPool + refuse + poolsData, ResourceName: oldAddr, ImportState: true,
				ImportStateId: oldPoolName, ImportStatePersist: true,
			},
			{
				Config: e.provider() + newPool + refuse + poolsData,
				ConfigStateChecks: []statecheck.StateCheck{
					// 2 pods + 1 leaked + 1 tunnel address, and the hand-made block outside every pool.
					attrCheck(oldAddr, "allocated", knownvalue.Int64Exact(4)),
					attrCheck(data, "pools", knownvalue.ListPartial(map[int]knownvalue.Check{0: knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"used": knownvalue.Int64Exact(4), "blocks": knownvalue.Int64Exact(2),
						"blocks_per_node": knownvalue.MapExact(map[string]knownvalue.Check{"kwok-node-0": knownvalue.Int64Exact(1), "kwok-node-1": knownvalue.Int64Exact(1)}),
					})})),
					attrCheck(data, "orphaned_blocks", knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectExact(map[string]knownvalue.Check{
						"cidr": knownvalue.StringExact(orphan.String()), "node": knownvalue.StringExact(""), "used": knownvalue.Int64Exact(1),
					})})),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error { return e.blocksMatchDataSource() },
					e.calicoctlAgrees(data),
					// calicoctl's own classification: the leaked address is the one allocated but
					// unused; the pods' and the node's tunnel address are in use.
					func(*terraform.State) error {
						leakedIPs, inUse, err := e.calicoctlLeaks(oldPoolCIDR)
						if err != nil {
							return err
						}
						wantInUse := []string{tunnel.String(), live[0].Status.PodIP, live[1].Status.PodIP}
						slices.Sort(wantInUse)
						if !slices.Equal(leakedIPs, []string{leaked.String()}) || !slices.Equal(inUse, wantInUse) {
							return fmt.Errorf("calicoctl ipam check: leaked %v, in use %v; the provider: leaked [%s], in use %v", leakedIPs, inUse, leaked, wantInUse)
						}
						return nil
					},
				),
			},
			{
				// refuse_if_allocated: refused at plan, naming the live pods and the other classes; nothing changes.
				Config: e.provider() + newPool + poolsData,
				ExpectError: diagRE("IPPool Holds Live Pods", "holds live pod: 2 (", livePods[0]+",", livePods[1]+");",
					"leaked: 1 (default/gone-pod "+leaked.String()+");", "node tunnel address: 1 (node kwok-node-1 "+tunnel.String()+")",
					"nothing was changed", "move only when calico-node restarts", `include = ["kube-system/daemonset/calico-node"]`),
			},
			{
				Config: e.provider() + newPool + refuse + poolsData,
				Check: func(*terraform.State) error {
					if spec := e.poolSpec(oldPoolName); spec["disabled"] != nil {
						return fmt.Errorf("refused destroy changed the pool: %v", spec)
					}
					return nil
				},
			},
			{
				Config: e.provider() + newPool + oldPool("  timeouts { delete = \"3s\" }\n") + poolsData,
			},
			{
				// wait_for_drain past its timeout: the pool is left disabled, and the error names what remains.
				Config: e.provider() + newPool + poolsData,
				ExpectError: diagRE("IPPool Not Deleted", "is disabled but did not drain in time", "live pod: 2 (", livePods[0]+",", livePods[1]+");",
					"leaked: 1", "node tunnel address: 1", "k8scidr_workload_roll"),
			},
			{
				Config: e.provider() + newPool + oldPool("  disabled = true\n  release_leaked = true\n") + poolsData,
				Check: func(*terraform.State) error {
					if spec := e.poolSpec(oldPoolName); spec["disabled"] != true {
						return fmt.Errorf("the timed-out drain did not leave the pool disabled: %v", spec)
					}
					return nil
				},
			},
			{
				// wait_for_drain waits for the live pods only; the leaked address is released, the
				// tunnel address stays in a block without affinity.
				PreConfig: func() {
					if err := e.c.Kube.AppsV1().Deployments("default").Delete(ctx, "live", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: e.provider() + newPool + poolsData,
				Check: func(*terraform.State) error {
					blocks, affs := e.blocksIn(oldPoolCIDR)
					if len(affs) != 0 || len(blocks) != 1 || len(blocks[0].Allocations) != 1 || blocks[0].Allocations[0].IP != tunnel || blocks[0].Node != "" {
						return fmt.Errorf("after destroy: blocks %+v, affinities %v; want only the tunnel address %s, in a block without affinity", blocks, affs, tunnel)
					}
					return nil
				},
			},
			{
				// The tunnel address's block now lies in no pool: reported with the hand-made one.
				Config: e.provider() + newPool + poolsData,
				ConfigStateChecks: []statecheck.StateCheck{
					attrCheck(data, "orphaned_blocks", knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectExact(map[string]knownvalue.Check{"cidr": knownvalue.StringExact(netip.PrefixFrom(tunnel, 26).Masked().String()),
							"node": knownvalue.StringExact(""), "used": knownvalue.Int64Exact(1)}),
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"cidr": knownvalue.StringExact(orphan.String())}),
					})),
				},
			},
		},
	})
}

// blocksMatchDataSource recomputes every pool's usage from the IPAM blocks' raw allocations.
func (e *calicoEnv) blocksMatchDataSource() error {
	ctx := context.Background()
	list, err := e.api.Blocks.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	used := 0
	for _, b := range list.Items {
		allocs, _, _ := unstructured.NestedSlice(b.Object, "spec", "allocations")
		cidr, _, _ := unstructured.NestedString(b.Object, "spec", "cidr")
		if !netip.MustParsePrefix(oldPoolCIDR).Contains(netip.MustParsePrefix(cidr).Addr()) {
			continue
		}
		for _, a := range allocs {
			if a != nil {
				used++
			}
		}
	}
	if used != 4 {
		return fmt.Errorf("the blocks of %s hold %d allocations, the data source said 4", oldPoolCIDR, used)
	}
	return nil
}

// createOrphanBlock writes an IPAMBlock with one allocation in a range no pool holds, as a pool
// deleted with addresses still allocated leaves behind.
func createOrphanBlock(t *testing.T, e *calicoEnv, cidr netip.Prefix) {
	t.Helper()
	allocs := make([]any, 64)
	allocs[0] = int64(0)
	unallocated := make([]any, 0, 63)
	for i := 1; i < 64; i++ {
		unallocated = append(unallocated, int64(i))
	}
	block := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": e.api.IPAMGroup, "kind": "IPAMBlock", "metadata": map[string]any{"name": calico.BlockName(cidr)},
		"spec": map[string]any{"cidr": cidr.String(), "allocations": allocs, "unallocated": unallocated, "strictAffinity": false,
			"attributes": []any{map[string]any{"handle_id": "k8s-pod-network.old", "secondary": map[string]any{"namespace": "x", "pod": "y"}}}},
	}}
	if _, err := e.api.Blocks.Create(context.Background(), block, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Calico 3.28's IPPool CRD has no assignmentMode (allowedUses came in 3.21): setting it is a plan
// error (the apiserver would prune it and every plan would show it again); leaving it unset
// creates and imports cleanly, with assignment_mode null.
func TestAccCalicoIPPool_oldCRDSchema(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico328, k8sops.CalicoCRDV1Group)
	newPool := poolBlock("new", "10.20.0.0/16", "  ipip_mode = \"Always\"\n  nat_outgoing = true\n")
	const newAddr = "k8scidr_calico_ippool.new"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      e.provider() + poolBlock("new", "10.20.0.0/16", "  assignment_mode = \"Manual\"\n"),
				PlanOnly:    true,
				ExpectError: diagRE("Field Not in the Installed Calico CRD", `assignment_mode = "Manual"`, "has no spec.assignmentMode", "Remove assignment_mode"),
			},
			{
				Config: e.provider() + newPool,
				ConfigStateChecks: []statecheck.StateCheck{
					attrCheck(newAddr, "allowed_uses", knownvalue.SetSizeExact(2)),
					attrCheck(newAddr, "assignment_mode", knownvalue.Null()),
				},
				Check: func(*terraform.State) error {
					if spec := e.poolSpec("new"); spec["assignmentMode"] != nil {
						return fmt.Errorf("assignmentMode written on a 3.28 CRD: %v", spec)
					}
					return nil
				},
			},
			{
				Config:             e.provider() + newPool + strings.Replace(poolBlock("old", oldPoolCIDR, ""), `name = "old"`, `name = "`+oldPoolName+`"`, 1),
				ResourceName:       "k8scidr_calico_ippool.old",
				ImportState:        true,
				ImportStateId:      oldPoolName,
				ImportStatePersist: true,
			},
			{
				Config:           e.provider() + newPool + strings.Replace(poolBlock("old", oldPoolCIDR, ""), `name = "old"`, `name = "`+oldPoolName+`"`, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// The new pool deleted out of band (disappears): the next plan creates it again.
				PreConfig: func() {
					if err := e.api.Pools.Delete(context.Background(), "new", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: e.provider() + newPool + strings.Replace(poolBlock("old", oldPoolCIDR, ""), `name = "old"`, `name = "`+oldPoolName+`"`, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(newAddr, plancheck.ResourceActionCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: func(*terraform.State) error {
					if spec := e.poolSpec("new"); spec["cidr"] != "10.20.0.0/16" {
						return fmt.Errorf("the pool made again has spec %v", spec)
					}
					return nil
				},
			},
			{
				// The test's destroy deletes both pools, every pool the cluster has: refused
				// unless forced (TestAccCalicoIPPool_twoAtOnce).
				Config: e.provider() + poolBlock("new", "10.20.0.0/16", "  ipip_mode = \"Always\"\n  nat_outgoing = true\n  deletion_policy = \"force\"\n") +
					strings.Replace(poolBlock("old", oldPoolCIDR, "  deletion_policy = \"force\"\n"), `name = "old"`, `name = "`+oldPoolName+`"`, 1),
			},
		},
	})
}

// Every bad input is a plan-time error on its attribute.
func TestAccCalicoIPPool_invalid(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	cases := []struct {
		cidr, extra string
		want        []string // diagnostic parts, in order
	}{
		{"10.20.0.0/33", "", []string{"Invalid CIDR", `cidr = "10.20.0.0/33"`}},
		{"10.20.0.1/16", "", []string{"CIDR Has Host Bits Set", `cidr = "10.20.0.1/16"`, "use 10.20.0.0/16"}},
		{"10.10.32.0/20", "", []string{"CIDR Overlaps Another Pool", `cidr = "10.10.32.0/20"`, "IPPool default-ipv4-ippool (10.10.0.0/18)"}},
		{"169.254.0.0/20", "", []string{"CIDR Overlaps Link-Local Addresses"}},
		{"10.20.0.0/16", "  block_size = 19\n", []string{"Block Size Out of Range", "block_size = 19", "19: an IPv4 pool's block size is 20 to 32"}},
		{"10.20.0.0/24", "  block_size = 22\n", []string{"Block Larger Than the Pool", "block_size = 22", "block size of at least 24"}},
		{"fd00:20::/64", "  block_size = 112\n", []string{"Block Size Out of Range", "block size is 116 to 128"}},
		{"10.20.0.0/16", "  ipip_mode = \"Always\"\n  vxlan_mode = \"CrossSubnet\"\n", []string{"Both Encapsulations Enabled", `vxlan_mode = "CrossSubnet"`}},
		{"fd00:20::/64", "  ipip_mode = \"Always\"\n", []string{"IPIP Is IPv4 Only", `ipip_mode = "Always"`}},
		{"10.20.0.0/16", "  ipip_mode = \"always\"\n", []string{"Invalid Attribute Value Match", `ipip_mode = "always"`, "value must be one of"}},
		{"10.20.0.0/16", "  allowed_uses = [\"Pods\"]\n", []string{"Invalid Attribute Value Match", "allowed_uses", "value must be one of"}},
		{"10.20.0.0/16", "  assignment_mode = \"Auto\"\n", []string{"Invalid Attribute Value Match", "assignment_mode", "value must be one of"}},
		{"10.20.0.0/16", "  deletion_policy = \"later\"\n", []string{"Invalid Attribute Value Match", "deletion_policy", "value must be one of"}},
		{"10.20.0.0/16", "  node_selector = \"\"\n", []string{"Invalid Attribute Value Length", "node_selector", "length must be at least 1"}},
	}
	var steps []resource.TestStep
	for _, c := range cases {
		steps = append(steps, resource.TestStep{
			Config: e.provider() + poolBlock("bad", c.cidr, c.extra), PlanOnly: true, ExpectError: diagRE(c.want...),
		})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
	if pools, err := e.api.ListIPPools(context.Background()); err != nil || len(pools) != 1 {
		t.Errorf("pools after plan-only steps: %v (%v)", pools, err)
	}
}

// Warnings reach the user through the real terraform CLI: an encapsulation that differs from
// the cluster's other pools, a pool the Tigera operator owns, and force deletion.
func TestAccCalicoIPPool_planWarnings(t *testing.T) {
	e := newCalicoEnv(t, testcluster.Calico331, k8sops.CalicoCRDV1Group)
	installInstallation(t, e.c, oldPoolName)
	w := newCLIWorkspace(t, e.provider()+poolBlock("new", "10.20.0.0/16", ""))
	out, err := w.run("plan")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	if !diagRE("Encapsulation or NAT Differs From the Other Pools", "IPPool default-ipv4-ippool (10.10.0.0/18) has ipip_mode Always (this pool: Never)",
		"nat_outgoing true (this pool: false)", "breaks cross-node").MatchString(out) {
		t.Errorf("no encapsulation warning in:\n%s", out)
	}
	// Disabling the only pool is refused (TestAccCalicoIPPool_lastEnabledPool): the new one comes first.
	newPool := poolBlock("new", "10.20.0.0/16", "  ipip_mode    = \"Always\"\n  nat_outgoing = true\n")
	w.write(e.provider() + newPool + strings.Replace(poolBlock("old", oldPoolCIDR,
		"  disabled = true\n  deletion_policy = \"force\"\n  depends_on = [k8scidr_calico_ippool.new]\n"), `name = "old"`, `name = "`+oldPoolName+`"`, 1))
	if out, err := w.run("import", "k8scidr_calico_ippool.old", oldPoolName); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	out, err = w.run("plan")
	if err != nil || !diagRE("Pool Managed by the Tigera Operator", `Installation "default" lists this pool`).MatchString(out) {
		t.Errorf("no operator warning (%v) in:\n%s", err, out)
	}
	if out, err := w.run("apply", "-auto-approve"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	w.write(e.provider() + newPool)
	out, err = w.run("plan")
	if err != nil || !diagRE("IPPool Deleted Even If Pods Hold Addresses").MatchString(out) {
		t.Errorf("no force warning (%v) in:\n%s", err, out)
	}
}

// installInstallation serves a minimal operator.tigera.io/v1 Installation listing the pool.
func installInstallation(t *testing.T, c *testcluster.Cluster, pool string) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	installCRD(t, dyn, "operator.tigera.io", "v1", "Installation", "installations")
	inst := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.tigera.io/v1", "kind": "Installation", "metadata": map[string]any{"name": "default"},
		"spec": map[string]any{"calicoNetwork": map[string]any{"ipPools": []any{map[string]any{"name": pool, "cidr": oldPoolCIDR}}}},
	}}
	gvr := schema.GroupVersionResource{Group: "operator.tigera.io", Version: "v1", Resource: "installations"}
	if _, err := dyn.Resource(gvr).Create(ctx, inst, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
