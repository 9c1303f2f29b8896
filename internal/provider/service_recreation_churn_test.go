// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccServiceRecreation_savedPlanChurn applies a saved plan after the cluster changed as a
// production cluster does between review and apply: unrelated Services, namespaces and pods
// come and go, a Service appears in the old range, one planned Service is deleted, one is
// replaced by a new object of the same name, another client takes a planned IP, and a planned
// Service is relabelled. The apply succeeds, makes exactly the planned moves that still hold
// (keeping the relabel), names each of the others in not_moved with its reason, and the next
// plan holds exactly what is left; after that apply a refreshing plan is empty.
func TestAccServiceRecreation_savedPlanChurn(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	ctx := context.Background()
	f := fixture{t, c.Kube}
	f.namespace("app")
	planned := map[string][2][]string{}
	for i := 1; i <= 6; i++ {
		ip := fmt.Sprintf("100.64.1.%d", i+1)
		f.service("app", ipService(fmt.Sprintf("s%d", i), "ClusterIP", ip))
		planned[fmt.Sprintf("app/s%d", i)] = [2][]string{{ip}, {fmt.Sprintf("172.24.1.%d", i+1)}}
	}
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/15"))
	// The range first: the churn puts other teams' Services into it.
	if out, err := w.run("apply", "-auto-approve", "-target=k8scidr_service_cidr.this"); err != nil {
		t.Fatalf("creating the target range: %v\n%s", err, out)
	}
	w.planFile()
	expect(t, "planned moves", w.planned(recreationAddr, "plan.moves"), movesCheck(planned))

	churn := newClusterChurn(t, c.Kube)
	churn.round("172.24.200.1")
	churn.round("172.24.200.2")
	churn.round("172.24.200.3")
	svcs := c.Kube.CoreV1().Services("app")
	f.service("app", ipService("late", "ClusterIP", "100.64.9.9"))
	deleteService(t, c.Kube, "app", "s1")
	deleteService(t, c.Kube, "app", "s2")
	f.service("app", ipService("s2", "ClusterIP", "100.64.1.3"))
	f.service("app", ipService("squatter", "ClusterIP", "172.24.1.4")) // s3's planned IP
	if _, err := svcs.Patch(ctx, "s4", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"blue"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	out := w.applyFile()
	if !diagRE("Planned Moves That No Longer Hold Were Not Made", "app/s1: deleted since the plan",
		"app/s2: replaced since the plan", "app/s3: its planned IP 172.24.1.4 is taken now").MatchString(out) {
		t.Errorf("the apply does not name the moves that no longer hold:\n%s", out)
	}
	made := map[string][2][]string{}
	for _, k := range []string{"app/s4", "app/s5", "app/s6"} {
		made[k] = planned[k]
	}
	expect(t, "recreated", w.stateValue(recreationAddr, "recreated"), recreatedCheck(made))
	expect(t, "not_moved", w.stateValue(recreationAddr, "not_moved"), knownvalue.MapExact(map[string]knownvalue.Check{
		"app/s1": knownvalue.StringExact("deleted since the plan"),
		"app/s2": knownvalue.StringRegexp(regexp.MustCompile(`^replaced since the plan \(UID `)),
		"app/s3": knownvalue.StringExact("its planned IP 172.24.1.4 is taken now"),
	}))
	now := servicesIn(t, c.Kube, "app")
	for k, mv := range made {
		if got := now[k].Spec.ClusterIPs; !slices.Equal(got, mv[1]) {
			t.Errorf("%s at %v, planned %v", k, got, mv[1])
		}
	}
	if now["app/s4"].Labels["team"] != "blue" {
		t.Errorf("the label set on app/s4 between plan and apply was lost: %v", now["app/s4"].Labels)
	}
	for _, k := range []string{"app/s2", "app/s3", "app/late"} {
		if ip := now[k].Spec.ClusterIP; ip[:7] != "100.64." {
			t.Errorf("%s moved to %s though the plan did not move it", k, ip)
		}
	}

	// The next plan holds exactly what is left: the replaced Service, the one whose IP was
	// taken, the one created in the old range; nothing the churn put into the new range.
	w.planFile()
	left := w.planned(recreationAddr, "plan.moves").(map[string]any)
	if got := slices.Sorted(maps.Keys(left)); !slices.Equal(got, []string{"app/late", "app/s2", "app/s3"}) {
		t.Errorf("after the apply the plan moves %v, want app/late, app/s2 and app/s3", got)
	}
	w.applyFile()
	w.converged()
	for k, s := range servicesIn(t, c.Kube, "app") {
		if s.Spec.ClusterIP[:7] == "100.64." {
			t.Errorf("%s still at %s", k, s.Spec.ClusterIP)
		}
	}
}
