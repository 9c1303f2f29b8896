// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/rehearse"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// rehearseBinary is cmd/k8scidr-rehearse, built once per test run: the tests run it as users do.
var rehearseBinary = sync.OnceValues(func() (string, error) {
	return buildBinary("k8scidr-rehearse", "../../cmd/k8scidr-rehearse")
})

// rehearseCmd runs k8scidr-rehearse with the provider installed from the mirror and returns its
// combined output and exit code.
func rehearseCmd(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	bin, err := rehearseBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Ended with the test (SIGTERM: it stops its twin and terraform), not left running.
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("k8scidr-rehearse %s: %v\n%s", args[0], err, out)
	}
	return string(out), code
}

// exportSnapshot exports the cluster kubeconfig reaches and reads the snapshot back.
func exportSnapshot(t *testing.T, kubeconfig string) *rehearse.Snapshot {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snapshot") // made by the export
	out, code := rehearseCmd(t, nil, "export", "-kubeconfig", kubeconfig, "-out", dir)
	t.Logf("export:\n%s", out)
	if code != 0 {
		t.Fatalf("export exited %d:\n%s", code, out)
	}
	s, err := rehearse.ReadSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rehearseOnTwin runs `k8scidr-rehearse run` on the snapshot with examples/migration and returns
// the report's data, its Markdown and the exit code.
func rehearseOnTwin(t *testing.T, snap *rehearse.Snapshot, stages string) (*rehearse.Report, string, int) {
	t.Helper()
	dir := t.TempDir()
	out, code := rehearseCmd(t, append([]string{"TF_CLI_CONFIG_FILE=" + providerMirror(t, false)}, testcluster.MigrationVars...),
		"run", "-snapshot", snap.Dir, "-config", "../../examples/migration", "-stages", stages, "-terraform", terraformPath(),
		"-bin", testcluster.DefaultBinDir(), "-report", filepath.Join(dir, "report.md"), "-json", filepath.Join(dir, "report.json"),
		"-work", filepath.Join(dir, "work"))
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatalf("run exited %d without a report: %v\n%s", code, err, out)
	}
	var r rehearse.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if tail, err := os.ReadFile(filepath.Join(dir, "work", "terraform.log")); err == nil && code != 0 {
		t.Logf("terraform on the twin (end):\n%s", lastLines(string(tail), 60))
	}
	return &r, string(md), code
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// rehearseOnOriginal holds the same rehearsal on the original cluster itself, with the provider
// from the mirror rc; it may run beside the twin's (it calls no t method).
func rehearseOnOriginal(ctx context.Context, c *testcluster.Cluster, stages []string, rc, work string) (*rehearse.Report, error) {
	ks, err := c.Kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return rehearse.Rehearse(ctx, rehearse.Target{Host: c.Host, CACert: c.CACert, Token: c.Token, ClusterID: string(ks.UID), Kube: c.Kube,
		ServiceCIDRs: c.ServiceCIDRs, RestartAPIServer: c.RestartAPIServer},
		rehearse.RunOptions{Config: "../../examples/migration", Work: work, Terraform: terraformPath(), StageVar: "stage", Stages: stages,
			RestartBefore: "2", RollNodesBefore: "3", Env: append([]string{"TF_CLI_CONFIG_FILE=" + rc}, testcluster.MigrationVars...)})
}

// controlPlanePods are the static pods kubeadm and kOps run kube-apiserver and
// kube-controller-manager as (their mirror pods), saying the flags the cluster really runs with:
// the export reads the Service range and the controller-manager's budget from them.
func controlPlanePods(t *testing.T, c *testcluster.Cluster, kcmFlags []string) {
	t.Helper()
	nodes, err := c.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	for _, p := range []struct {
		component string
		command   []string
	}{
		{"kube-apiserver", []string{"kube-apiserver", "--service-cluster-ip-range=" + strings.Join(c.ServiceCIDRs, ",")}},
		{"kube-controller-manager", append([]string{"kube-controller-manager", "--allocate-node-cidrs=false"}, kcmFlags...)},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.component + "-" + nodes.Items[0].Name, Namespace: "kube-system",
			Labels: map[string]string{"component": p.component, "tier": "control-plane"}, Annotations: map[string]string{"kubernetes.io/config.mirror": "x"}},
			Spec: corev1.PodSpec{NodeName: nodes.Items[0].Name, HostNetwork: true, Containers: []corev1.Container{{Name: p.component, Image: p.component, Command: p.command}}}}
		if _, err := c.Kube.CoreV1().Pods("kube-system").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// hazardKCMFlags is the hazard cluster's controller-manager budget, which its twin must take:
// raised, so that the Services of namespace big move at the provider's pace (twice, on the twin
// and here).
var hazardKCMFlags = []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}

// bigServices is how many Services hazardCluster makes in namespace big: 600 under make
// test-scale (K8SCIDR_SCALE=1), more than the export's page of 500, so that the snapshot is read
// across pages; 120 in make test, where the rehearsal of two clusters at that size alone took 9 of
// the suite's minutes on 2 cores.
func bigServices() int {
	if os.Getenv("K8SCIDR_SCALE") != "" {
		return 600
	}
	return 120
}

// plantedSecret is the start of the credentials hazardCluster plants in a manifest.
const plantedSecret = "planted-secret-hunter2"

// hazardCluster is a cluster carrying the hazards of the other tests at once: an admission policy
// refusing recreated Services in namespace guarded, namespace capped at its Service quota, a
// dual-stack cluster DNS Service named coredns, bigServices() Services in namespace big, and Calico pools
// with allocations; its control plane's flags readable from mirror pods.
func hazardCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	ctx := context.Background()
	c := startCluster(t, testcluster.Options{ServiceCIDRs: []string{"100.64.0.0/13", "fd00:10::/108"}, Calico: testcluster.Calico331,
		APIServerFlags: apiServerEndpointFlags, ControllerManagerFlags: hazardKCMFlags})
	ipam, err := c.StartCalicoIPAM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pool := map[string]any{"cidr": "100.96.0.0/11", "blockSize": int64(26), "ipipMode": "Always", "vxlanMode": "Never",
		"natOutgoing": true, "nodeSelector": "all()", "allowedUses": []any{"Workload", "Tunnel"}}
	if err := c.CreateCalicoPool(ctx, "crd.projectcalico.org/v1", "default-ipv4-ippool", pool); err != nil {
		t.Fatal(err)
	}
	// A credential on the controller-manager's command line, which the twin does not take.
	controlPlanePods(t, c, slices.Concat(hazardKCMFlags, []string{"--token=" + plantedSecret + "-flag"}))
	f := fixture{t, c.Kube}
	f.deployment("kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"})
	// Credentials written into a manifest, as they too often are: none may reach the snapshot.
	leaky := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "leaky", Annotations: map[string]string{"example.org/creds": plantedSecret + "-annotation"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "leaky"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "leaky"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1", Args: []string{"--password=" + plantedSecret + "-arg"},
					Env: []corev1.EnvVar{{Name: "DB_PASSWORD", Value: plantedSecret + "-env"}}}}}}}}
	if _, err := c.Kube.AppsV1().Deployments("kube-system").Create(ctx, leaky, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dns := dnsService("coredns", "100.64.0.10", "fd00:10::a")
	dns.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	f.service("kube-system", dns)
	for _, ns := range []string{"big", "capped", "guarded"} {
		f.namespace(ns)
		f.deployment(ns, "web", map[string]string{"app": "web"})
	}
	web := func(name string) *corev1.Service {
		s := clusterIPService(name, "")
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		s.Spec.Selector = map[string]string{"app": "web"}
		return s
	}
	var g sync.WaitGroup
	big := bigServices()
	errs := make(chan error, big)
	for w := range 10 {
		g.Go(func() {
			for i := w; i < big; i += 10 {
				if _, err := c.Kube.CoreV1().Services("big").Create(ctx, web(fmt.Sprintf("svc-%03d", i)), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	g.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range 3 {
		f.service("capped", web(fmt.Sprintf("svc-%d", i)))
		f.service("guarded", web(fmt.Sprintf("svc-%d", i)))
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "services"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("3")}}}
	if _, err := c.Kube.CoreV1().ResourceQuotas("capped").Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denyCreates(t, c, "no-recreation-in-guarded", "services",
		`object.metadata.namespace != 'guarded' || !has(object.metadata.annotations) || !('`+k8sops.PreviousClusterIPsAnnotation+`' in object.metadata.annotations)`,
		"Services in guarded are not recreated: ask the platform team", func(ctx context.Context) error {
			s := web("probe")
			s.Annotations = map[string]string{k8sops.PreviousClusterIPsAnnotation: "100.64.0.99"}
			_, err := c.Kube.CoreV1().Services("guarded").Create(ctx, s, metav1.CreateOptions{})
			if err == nil {
				_ = c.Kube.CoreV1().Services("guarded").Delete(ctx, s.Name, metav1.DeleteOptions{})
			}
			return err
		})
	// A fail-closed webhook the twin cannot run (its backend is not there).
	hook := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "org-policy"},
		Webhooks: []admissionv1.ValidatingWebhook{{Name: "services.org.example", FailurePolicy: ptr.To(admissionv1.Fail),
			SideEffects: ptr.To(admissionv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ClientConfig:      admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "policy", Name: "org-policy"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"org.example/policed": "true"}},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}}}}}}}
	if _, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, hook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"big", "capped", "guarded"} {
		if _, err := c.WaitPodIPs(ctx, ns, "app=web", 1); err != nil {
			t.Fatalf("%v (calico-ipam: %v)", err, ipam.Errors())
		}
	}
	if _, err := c.WaitPodIPs(ctx, "kube-system", "k8s-app=kube-dns", 1); err != nil {
		t.Fatalf("%v (calico-ipam: %v)", err, ipam.Errors())
	}
	return c
}

// TestAccRehearsal_hazards: a cluster carrying the hazards of the other tests is exported with
// the plan role only, and examples/migration rehearsed on its twin, stage by stage; the same
// rehearsal is then held on the cluster itself. The twin's report shows each hazard's effect
// exactly as the original's: the same moves, refusals, warnings, failures and journal.
func TestAccRehearsal_hazards(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := hazardCluster(t)
	planOnly, err := c.ServiceAccountKubeconfig(context.Background(), planRole)
	if err != nil {
		t.Fatal(err)
	}
	snap := exportSnapshot(t, planOnly)
	checkSnapshot(t, snap)

	// The two rehearsals are on two clusters: held side by side.
	var orig *rehearse.Report
	var origErr error
	done := make(chan struct{})
	rc, work := providerMirror(t, false), t.TempDir()
	go func() {
		defer close(done)
		orig, origErr = rehearseOnOriginal(t.Context(), c, []string{"1", "2", "3", "4", "5", "6"}, rc, work)
	}()
	twin, md, code := rehearseOnTwin(t, snap, "1-6")
	<-done
	t.Logf("the twin's report:\n%s", md)
	if origErr != nil {
		t.Fatalf("the rehearsal on the original: %v", origErr)
	}
	if twin.Failed() != (code == 1) || (code != 0 && code != 1) {
		t.Errorf("run exited %d for a report that failed: %v", code, twin.Failed())
	}
	got, want := twin.Outcome(), orig.Outcome()
	if !slices.Equal(got, want) {
		t.Errorf("the twin's rehearsal differs from the original's:\n%s", lineDiff(want, got))
		if md, err := orig.Markdown("the original", nil); err == nil {
			t.Logf("the original's report:\n%s", md)
		}
	}
	t.Logf("the original's outcome:\n%s", strings.Join(want, "\n"))
	for _, hazard := range []struct{ what, line string }{
		{fmt.Sprintf("%d Services in one namespace, moved", bigServices()), fmt.Sprintf("stage 1: move big/svc-%03d to 172.2", bigServices()-1)},
		{"the dual-stack DNS Service named coredns: its IPv4 moves, its IPv6 stays", "stage 1: move kube-system/coredns to 172.24.0.10,fd00:10::a"},
		{"the admission policy refusing recreations in guarded, found at plan", "stage 1: leave guarded/svc-0: admission would refuse its recreation"},
		{"the namespace at its quota: its Services left where they are while it has no room for their old-IP bridges",
			"stage 1: differs: capped/svc-2: planned 172.2"},
		{"the namespace at its quota: its Services moved once the bridges are off", "stage 4: move capped/svc-2 to 172.2"},
		{"kube-apiserver restarted on the new range before stage 2", "stage 2: before: kube-apiserver restarted with --service-cluster-ip-range=172.24.0.0/15,fd00:10::/108"},
		// Else stage 2 is refused: k8scidr_apiserver_service reads the flag from the mirror pod.
		{"its mirror pod made again with the new flag", "fd00:10::/108, its 1 mirror pod(s) made again with the new flag"},
		{"the static pods restarted by the nodes' roll before stage 3", "stage 3: before: the nodes rolled: their kubelets restarted 2 static pod(s)"},
		{"every stage applied", "stage 6: applied: Apply complete!"},
	} {
		if !slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, hazard.line) }) {
			t.Errorf("the twin's report does not show %s (a line with %q)", hazard.what, hazard.line)
		}
	}
	if slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "stage 4: differs: capped/") }) {
		t.Error("the twin's report shows capped's Services not moved at stage 4, where the old-IP bridges that did not fit its quota are off")
	}
	for _, s := range []string{"ValidatingWebhookConfiguration org-policy, webhook services.org.example (failurePolicy Fail, on services): its backend is not in the twin",
		"--kube-api-qps=1000", "Not rehearsed"} {
		if !strings.Contains(md, s) {
			t.Errorf("the report does not say %q", s)
		}
	}
}

// checkSnapshot: every kind was readable with the plan role, none of the credentials
// hazardCluster planted in manifests (an env value, an arg, an annotation, a controller-manager
// flag) and no other ConfigMap is in it, only its owner may read it, and the control plane's
// flags were found.
func checkSnapshot(t *testing.T, snap *rehearse.Snapshot) {
	t.Helper()
	m := snap.Manifest
	for _, f := range m.Files {
		if f.Missing != "" {
			t.Errorf("%s is missing from a snapshot taken with the plan role: %s", f.Name, f.Missing)
		}
	}
	// big's, capped's and guarded's, coredns and default/kubernetes.
	if snap.Count("services.yaml") != bigServices()+8 || snap.Count("nodes.yaml") != 2 || snap.Count("ippools.yaml") != 1 || snap.Count("ipamblocks.yaml") == 0 {
		t.Errorf("snapshot counts: %+v", m.Files)
	}
	if !slices.Equal(m.ServiceClusterIPRanges, []string{"100.64.0.0/13", "fd00:10::/108"}) || !strings.Contains(m.RangesSource, "kube-apiserver") {
		t.Errorf("Service ranges %v from %s", m.ServiceClusterIPRanges, m.RangesSource)
	}
	if !slices.Contains(m.ControllerManagerFlags, "--kube-api-qps=1000") {
		t.Errorf("controller-manager flags %v from %s", m.ControllerManagerFlags, m.ControllerManagerSource)
	}
	files, err := filepath.Glob(filepath.Join(snap.Dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(snap.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the snapshot's directory: %v, mode %v; want 0700", err, fi.Mode())
	}
	planted := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := strings.Index(string(data), plantedSecret); i >= 0 {
			t.Errorf("%s holds a planted credential: %q", f, string(data)[max(0, i-80):min(len(data), i+40)])
		}
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
		if strings.Contains(string(data), "example.org/creds: "+rehearse.Redacted) {
			planted++ // the leaky Deployment is there, redacted
		}
	}
	if planted != 1 {
		t.Errorf("the Deployment whose manifest holds credentials is in %d files, want 1 (deployments.yaml)", planted)
	}
	cms, err := snap.Objects("configmaps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms {
		if !slices.Contains(rehearse.ConfigMaps, cm.GetName()) || cm.GetNamespace() != "kube-system" {
			t.Errorf("the snapshot holds ConfigMap %s/%s", cm.GetNamespace(), cm.GetName())
		}
	}
	pods, err := snap.Objects("pods.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.GetNamespace()+"/"+p.GetName())
	}
	if !slices.Equal(names, []string{"kube-system/kube-apiserver-kwok-node-0", "kube-system/kube-controller-manager-kwok-node-0"}) {
		t.Errorf("the snapshot holds pods %v, want the two static pods' mirror pods (workloads' pods are made again by the twin)", names)
	}
	var services struct{ Items []corev1.Service }
	data, err := os.ReadFile(filepath.Join(snap.Dir, "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &services); err != nil {
		t.Fatal(err)
	}
	for _, s := range services.Items {
		if s.Name == "coredns" && !slices.Equal(s.Spec.ClusterIPs, []string{"100.64.0.10", "fd00:10::a"}) {
			t.Errorf("coredns exported at %v", s.Spec.ClusterIPs)
		}
		if s.UID != "" || s.ResourceVersion != "" || len(s.ManagedFields) > 0 {
			t.Errorf("%s/%s keeps server-set metadata", s.Namespace, s.Name)
		}
	}
}

// lineDiff shows the lines only one side has.
func lineDiff(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// TestAccMatrix_rehearsal: a snapshot of the write-ups' own release, 1.29 (ServiceCIDRs in
// v1alpha1, behind the gate), taken with the plan role, rehearses examples/migration on a twin of
// that release: the twin runs 1.29, finds the Service range in the default ServiceCIDR (no static
// pod to read it from), and every stage applies with nothing left in the journal. The newest
// release's rehearsal is TestAccRehearsal_hazards.
func TestAccMatrix_rehearsal(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	if !slices.Contains(strings.Fields(strings.ReplaceAll(os.Getenv("K8SCIDR_MATRIX"), ",", " ")), "1.29") {
		t.Skip("K8SCIDR_MATRIX does not name 1.29 (make test does)")
	}
	r, err := testcluster.ReleaseNamed("1.29")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Built(); err != nil {
		t.Fatal(err)
	}
	o := r.Options()
	o.Calico, o.APIServerFlags = testcluster.Calico331, append(o.APIServerFlags, apiServerEndpointFlags...)
	c := startCluster(t, o)
	ctx := context.Background()
	if _, err := c.StartCalicoIPAM(ctx); err != nil {
		t.Fatal(err)
	}
	seeded, err := c.Seed(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	planOnly, err := c.ServiceAccountKubeconfig(ctx, planRole)
	if err != nil {
		t.Fatal(err)
	}
	snap := exportSnapshot(t, planOnly)
	m := snap.Manifest
	if m.Server.Minor != "1.29" || !slices.Equal(m.ServiceClusterIPRanges, []string{"100.64.0.0/13"}) || !strings.Contains(m.RangesSource, "ServiceCIDR") {
		t.Errorf("snapshot of %s, ranges %v from %s", m.Server.GitVersion, m.ServiceClusterIPRanges, m.RangesSource)
	}
	cidrs, err := snap.Objects("servicecidrs.yaml")
	if err != nil || len(cidrs) != 1 || cidrs[0].GetAPIVersion() != r.ServiceCIDRVersion {
		t.Errorf("ServiceCIDRs in the snapshot: %v (%v), want one of %s", cidrs, err, r.ServiceCIDRVersion)
	}
	report, md, code := rehearseOnTwin(t, snap, "1-6")
	t.Logf("the twin's report:\n%s", md)
	if code != 0 || report.Failed() || len(report.Stages) != 6 {
		t.Fatalf("the rehearsal of 1.29 exited %d, %d stage(s)", code, len(report.Stages))
	}
	if !strings.Contains(md, "Twin: Kubernetes v1.29.") {
		t.Error("the report does not name a 1.29 twin")
	}
	if want := len(seeded.ServiceIPs) - len(seeded.LoadBalancers); len(report.Stages[0].Moves) != want || len(report.Stages[0].Differences) > 0 {
		t.Errorf("stage 1 moved %d Services (differences %v), want %d", len(report.Stages[0].Moves), report.Stages[0].Differences, want)
	}
}
