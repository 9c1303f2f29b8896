// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/servicecidr"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// The reliability suites share these: Services to move, and the check that nothing was lost.

var faultTarget = netip.MustParsePrefix("172.24.0.0/15")

// movingServices creates n Services in namespace ns in 100.64.0.0/13: every 10th selector-less
// with hand-made Endpoints the move must carry over, every 20th (from the 5th) a NodePort whose
// port must survive. It returns them by key, as read back.
func movingServices(t *testing.T, kube kubernetes.Interface, ns string, n int) map[string]corev1.Service {
	t.Helper()
	ctx := context.Background()
	f := fixture{t, kube}
	f.namespace(ns)
	for i := range n {
		s := ipService(fmt.Sprintf("s%03d", i), "ClusterIP", fmt.Sprintf("100.64.%d.%d", 1+i/200, 2+i%200))
		s.Labels = map[string]string{"tier": fmt.Sprint(i % 3)}
		if i%20 == 5 {
			s.Spec.Type = corev1.ServiceTypeNodePort
		}
		if i%10 == 0 {
			s.Spec.Selector = nil
		}
		f.service(ns, s)
		if i%10 == 0 {
			_, err := kube.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: s.Name},
				Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("10.9.%d.%d", i/2000, 1+i/10%200)}},
					Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return servicesIn(t, kube, ns)
}

// checkNothingLostIn compares namespace ns with before: the same Services, each moved into
// target and equal but for its IPs (nodePorts included), hand-made Endpoints present, and no
// journal or EndpointSlice copy left.
func checkNothingLostIn(kube kubernetes.Interface, ns string, before map[string]corev1.Service, target netip.Prefix) error {
	ctx := context.Background()
	list, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(list.Items) != len(before) {
		var extra, odd []string
		for _, s := range list.Items {
			if _, ok := before[s.Namespace+"/"+s.Name]; !ok {
				extra = append(extra, fmt.Sprintf("%s (%s %v, labels %v, annotations %v)", s.Name, s.Spec.Type, s.Spec.ClusterIPs, s.Labels, s.Annotations))
			} else if s.Spec.Type == corev1.ServiceTypeExternalName {
				odd = append(odd, fmt.Sprintf("%s (ExternalName %s, annotations %v)", s.Name, s.Spec.ExternalName, s.Annotations))
			}
		}
		return fmt.Errorf("%d Services before, %d now; not there before: %v; mid-hand-over: %v", len(before), len(list.Items), extra, odd)
	}
	for _, s := range list.Items {
		key := s.Namespace + "/" + s.Name
		old, ok := before[key]
		switch {
		case !ok:
			return fmt.Errorf("%s is new", key)
		case !clusterIPIn(target, &s):
			return fmt.Errorf("%s not moved: %s %q %v (annotations %v)", key, s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIPs, s.Annotations)
		case !reflect.DeepEqual(specWithoutIPs(old), specWithoutIPs(s)):
			return fmt.Errorf("%s changed beyond its IPs:\n%+v\n%+v", key, specWithoutIPs(old).Spec, specWithoutIPs(s).Spec)
		}
		if old.Spec.Selector == nil {
			ep, err := kube.CoreV1().Endpoints(ns).Get(ctx, old.Name, metav1.GetOptions{})
			if err != nil || len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 {
				return fmt.Errorf("%s: hand-made Endpoints lost: %v", key, err)
			}
		}
	}
	cms, err := kube.CoreV1().ConfigMaps(recreation.DefaultJournalNamespace).List(ctx, metav1.ListOptions{LabelSelector: recreation.JournalLabel})
	if err != nil {
		return err
	}
	if len(cms.Items) > 0 {
		return fmt.Errorf("%d journal ConfigMaps left behind", len(cms.Items))
	}
	copies, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy + "=k8scidr.io"})
	if err != nil {
		return err
	}
	if len(copies.Items) > 0 {
		return fmt.Errorf("%d EndpointSlice copies left behind, the first %s: %s", len(copies.Items), copies.Items[0].Name,
			describeSlices(kube, ns, copies.Items[0].Labels[discoveryv1.LabelServiceName]))
	}
	return nil
}

// describeSlices says what a Service has: its UID, its Endpoints and every EndpointSlice with
// its manager, owner and ready endpoints, for a failure message.
func describeSlices(kube kubernetes.Interface, ns, name string) string {
	ctx := context.Background()
	var b strings.Builder
	if svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "Service %s uid %s created %s", name, svc.UID, svc.CreationTimestamp.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(&b, "Service %s: %v", name, err)
	}
	if ep, err := kube.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "; Endpoints with %d subsets, labels %v", len(ep.Subsets), ep.Labels)
	} else {
		fmt.Fprintf(&b, "; Endpoints: %v", err)
	}
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return b.String() + "; slices: " + err.Error()
	}
	for _, s := range list.Items {
		var owners []string
		for _, o := range s.OwnerReferences {
			owners = append(owners, o.Kind+"/"+string(o.UID))
		}
		ready := 0
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready++
			}
		}
		fmt.Fprintf(&b, "; slice %s managed by %s, owners %v, %d ready, created %s", s.Name, s.Labels[discoveryv1.LabelManagedBy],
			owners, ready, s.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// rollingDeployments creates n Deployments of 2 running pods in namespace ns and returns a
// time after all their pods started, for started_before.
func rollingDeployments(t *testing.T, c *testcluster.Cluster, ns string, n int) time.Time {
	t.Helper()
	ctx := context.Background()
	fixture{t, c.Kube}.namespace(ns)
	for i := range n {
		if _, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, deploymentOf(fmt.Sprintf("d%02d", i), 2), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitPods(ctx, ns, "", 2*n, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(at) + 100*time.Millisecond)
	return at
}

// checkRolled verifies every Deployment of ns was restarted, rolled out and is not paused.
func checkRolled(kube kubernetes.Interface, ns string) error {
	list, err := kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, d := range list.Items {
		switch {
		case d.Spec.Paused:
			return fmt.Errorf("%s/%s is left paused", ns, d.Name)
		case d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "":
			return fmt.Errorf("%s/%s was not restarted", ns, d.Name)
		case d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas:
			return fmt.Errorf("%s/%s has not rolled out: %+v", ns, d.Name, d.Status)
		}
	}
	return nil
}

// faultSeed is K8SCIDR_FAULT_SEED, or a new seed; it is logged so a run can be replayed.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("K8SCIDR_FAULT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("K8SCIDR_FAULT_SEED: %v", err)
		}
	}
	t.Logf("fault seed %d (replay with K8SCIDR_FAULT_SEED=%d)", seed, seed)
	return seed
}

// faultCluster is a cluster with the target ServiceCIDR Ready and a fault proxy in front of it.
func faultCluster(t *testing.T) (*testcluster.Cluster, *testcluster.FaultProxy, string) {
	t.Helper()
	c := startCluster(t, testcluster.Options{})
	ctx := context.Background()
	client := clientFor(c)
	if _, err := servicecidr.CreateServiceCIDR(ctx, client, "new", []string{faultTarget.String()}); err != nil {
		t.Fatal(err)
	}
	p, err := testcluster.StartFaultProxy(c.RESTConfig, faultSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	kubeconfig := filepath.Join(t.TempDir(), "faulty.kubeconfig")
	if err := p.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	return c, p, kubeconfig
}

// With 10 % of the requests failing (every kind of fault: 429, 500, 503, 409 on updates,
// connections dropped before or after the apiserver acted, slow answers), one apply moves 300
// Services and rolls 30 Deployments, and the plan after it is empty.
func TestAccFaults_tenPercent(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c, proxy, kubeconfig := faultCluster(t)
	before := movingServices(t, c.Kube, "faulty", 300)
	startedBefore := rollingDeployments(t, c, "roll", 30)
	w := newCLIWorkspace(t, providerBlock(kubeconfig)+recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]", faultTarget), "")+
		rollHCL("this", fmt.Sprintf("  namespaces     = [\"roll\"]\n  started_before = %q", startedBefore.UTC().Format(time.RFC3339)),
			"  depends_on = [k8scidr_service_recreation.this]"))
	proxy.SetFaults(0.10)
	w.planFile()
	w.applyFile()
	w.converged()
	if err := checkNothingLostIn(c.Kube, "faulty", before, faultTarget); err != nil {
		t.Error(err)
	}
	if err := checkRolled(c.Kube, "roll"); err != nil {
		t.Error(err)
	}
	proxy.SetFaults(0)
	t.Logf("through the fault proxy: %s", proxy)
	_, counts := proxy.Injected()
	for _, f := range testcluster.AllFaults {
		if f != testcluster.FaultConflict && counts[f] == 0 { // updates (PUT) are few: 409 may not come up
			t.Errorf("no %s fault was injected: the run proves less than it says", f)
		}
	}
}

// With every request failing from the middle of the move on, the apply fails within a minute
// or so, and its diagnostic names the last error; the next apply, with the faults gone,
// restores what was deleted and finishes.
func TestAccFaults_outage(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c, proxy, kubeconfig := faultCluster(t)
	before := movingServices(t, c.Kube, "outage", 60)
	t.Setenv("K8SCIDR_FAULT_DELAY_AFTER_DELETE", "300ms") // moves slow enough to be caught mid-way
	w := newCLIWorkspace(t, providerBlock(kubeconfig)+recreationHCL("", fmt.Sprintf("  target_cidrs = [%q]", faultTarget), "  parallelism = 4"))
	w.planFile()
	var outageAt time.Time
	outage := make(chan error, 1)
	go func() {
		outage <- wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Minute, true,
			func(ctx context.Context) (bool, error) {
				moved := 0
				for _, s := range servicesIn(t, c.Kube, "outage") {
					if clusterIPIn(faultTarget, &s) {
						moved++
					}
				}
				if moved < 10 {
					return false, nil
				}
				proxy.SetFaults(1, testcluster.FaultInternal, testcluster.FaultUnavailable, testcluster.FaultDrop)
				outageAt = time.Now()
				return true, nil
			})
	}()
	// The last error, as the fault proxy gave it, and how long it was retried.
	if out, err := w.run("apply", "tfplan"); err == nil || !regexp.MustCompile(`(?s)(injected:|EOF).*(gave\s+up\s+after\s+(\d+\s+attempts|\d+s\s+of\s+retries)|\(attempt\s+\d+;\s)`).MatchString(out) {
		t.Errorf("apply during the outage: %v\n%s", err, out)
	}
	if err := <-outage; err != nil {
		t.Fatalf("the outage never started: %v", err)
	}
	t.Logf("the apply failed %s after the outage began (%s)", time.Since(outageAt).Round(time.Second), proxy)
	if time.Since(outageAt) > 2*time.Minute {
		t.Errorf("the failing apply took %s after the outage began", time.Since(outageAt))
	}
	proxy.SetFaults(0)
	w.planFile()
	w.applyFile()
	w.converged()
	if err := checkNothingLostIn(c.Kube, "outage", before, faultTarget); err != nil {
		t.Fatal(err)
	}
}
