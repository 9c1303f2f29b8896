package provider

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// The tests of the cluster's own guards: finalizers, admission, quotas, concurrent applies.

// TestAccServiceRecreation_finalizerInterrupted: a LoadBalancer Service moved with
// include_load_balancers carries the cloud controller's cleanup finalizer, so its delete leaves
// it Terminating until the load balancer is gone. The apply is interrupted while it waits (no
// cloud controller runs here); the next plan must restore it, not count the Terminating Service
// as settled, and once the finalizer completes the next apply recreates it. Docs: "A failure
// mid-apply leaves nothing lost, and the next apply finishes the job."
func TestAccServiceRecreation_finalizerInterrupted(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	lb := ipService("lb", "LoadBalancer", "100.64.12.7")
	lb.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	old := f.service("app", lb)
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "  include_load_balancers = true", "", "172.24.0.0/15"))
	w.planFile()
	expect(t, "planned moves", w.planned(recreationAddr, "plan.moves"),
		movesCheck(map[string][2][]string{"app/lb": {{"100.64.12.7"}, {"172.24.12.7"}}}))

	ctx := context.Background()
	api := c.Kube.CoreV1().Services("app")
	cmd, out := w.start(nil, "apply", "tfplan")
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := api.Get(ctx, "lb", metav1.GetOptions{})
		return err == nil && s.DeletionTimestamp != nil, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("app/lb never went Terminating: %v\n%s", err, out.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the interrupted apply succeeded:\n%s", out.String())
	}
	if s, err := api.Get(ctx, "lb", metav1.GetOptions{}); err != nil || s.UID != old.UID || s.DeletionTimestamp == nil {
		t.Fatalf("after the interrupt app/lb should be the old Service, Terminating: %v %+v", err, s)
	}

	// Still Terminating: the plan restores it at the planned IP.
	w.planFile()
	expect(t, "restore while Terminating", w.planned(recreationAddr, "plan.restore"), knownvalue.MapExact(map[string]knownvalue.Check{
		"app/lb": knownvalue.ObjectPartial(map[string]knownvalue.Check{"new_ips": strListCheck("172.24.12.7")}),
	}))
	// The cloud controller finishes: the finalizer goes, and with it the old Service.
	if _, err := api.Patch(ctx, "lb", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := api.Get(ctx, "lb", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("app/lb still there after its finalizer went: %v", err)
	}
	w.applyFile()
	s, err := api.Get(ctx, "lb", metav1.GetOptions{})
	if err != nil || s.Spec.ClusterIP != "172.24.12.7" || s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("app/lb not restored at 172.24.12.7 after its old copy was deleted: %v %+v", err, s)
	}
	if len(s.Finalizers) != 0 {
		t.Errorf("the restored copy carries the old copy's cleanup finalizer: %v", s.Finalizers)
	}
	if n := journalObjects(t, c); n != 0 {
		t.Errorf("%d journal objects left after the restore", n)
	}
	w.converged()
}
