// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops/recreation"
	"github.com/k8scidr/terraform-provider-k8scidr/internal/testcluster"
)

// TestAccServiceRecreation_destroyWithJournal: a recreation whose journal still holds a Service
// an interrupted apply deleted cannot be destroyed (or removed from the configuration): that
// would forget the Service for good. The refusal names it and the way out; once an apply has
// restored it, the destroy plans. A plan written by hand that leaves the entry out of its restore
// is refused too: its apply would leave app/lost deleted, and so is a change of journal_group.
func TestAccServiceRecreation_destroyWithJournal(t *testing.T) {
	testAccPreCheck(t)
	requireOwnCluster(t)
	c := startCluster(t, testcluster.Options{})
	f := fixture{t, c.Kube}
	f.namespace("app")
	f.service("app", ipService("web", "ClusterIP", "100.64.10.20"))
	w := newCLIWorkspace(t, recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/15"))
	// The target range is created in the same run, before the recreation (depends_on): the
	// recreation's plan counts it, and the data source, read before, leaves it to the recreation.
	if at := w.warnedAt("Target Range Not Served"); len(at) > 0 {
		t.Errorf("\"Target Range Not Served\" at %v, though the run creates the range first", at)
	}
	w.planFile()
	w.applyFile()
	w.converged()

	// What an apply killed between the delete and the create of app/lost leaves: its journal entry.
	lost := ipService("lost", "ClusterIP", "172.24.10.30")
	lost.Namespace = "app"
	entries, err := json.Marshal([]recreation.JournalEntry{{Key: "app/lost", OldIPs: []string{"100.64.10.30"}, Service: *lost, Written: time.Now().UTC()}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Kube.CoreV1().ConfigMaps(recreation.DefaultJournalNamespace).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "k8scidr-journal-test", Labels: map[string]string{
			recreation.JournalLabel: "service-recreation", recreation.JournalGroupLabel: recreation.DefaultJournalGroup}},
		Data: map[string]string{"entries.json": string(entries)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := w.run("plan", "-destroy"); err == nil || !diagRE("Error: Journal Still Holds Deleted Services",
		"app/lost", "would forget them", "apply once more").MatchString(out) {
		t.Errorf("destroying a recreation whose journal holds app/lost passed plan (%v):\n%s", err, out)
	} else {
		logDiag(t, out, "Error: Journal Still Holds Deleted Services")
	}

	// Changing the journal would leave app/lost behind too (docs: each migration applied side by
	// side gets its own journal_group, "so that none restores or removes another's entries").
	w.write(recreationConfig(c.Kubeconfig, `  journal_group = "team-a"`, "", "172.24.0.0/15"))
	if out, err := w.run("plan"); err == nil || !diagRE("Error: Old Journal Still Holds Entries", "app/lost",
		"Apply once more with the old journal_namespace and journal_group").MatchString(out) {
		t.Errorf("changing journal_group while the old journal holds app/lost passed plan (%v):\n%s", err, out)
	}
	config := recreationConfig(c.Kubeconfig, "", "", "172.24.0.0/15")
	w.write(providerBlock(c.Kubeconfig) + `
resource "k8scidr_service_cidr" "this" {
  name              = "new"
  cidrs             = ["172.24.0.0/15"]
  wait_for_deletion = false
}

resource "k8scidr_service_recreation" "this" {
` + handPlan(nil) + "}\n")
	if out, err := w.run("plan"); err == nil || !diagRE("Error: Journal Entries Not Restored", "app/lost", "plan.restore does not list",
		"stay deleted", "data source whole").MatchString(out) {
		t.Errorf("a hand-written plan that leaves app/lost's journal entry out of restore passed plan (%v):\n%s", err, out)
	} else {
		logDiag(t, out, "Error: Journal Entries Not Restored")
	}
	w.write(config)

	// The next apply restores it from the journal; then nothing is left to forget.
	w.planFile()
	w.applyFile()
	if s, err := c.Kube.CoreV1().Services("app").Get(context.Background(), "lost", metav1.GetOptions{}); err != nil || s.Spec.ClusterIP != "172.24.10.30" {
		t.Fatalf("app/lost not restored at its planned IP: %v %v", s, err)
	}
	if out, err := w.run("plan", "-destroy"); err != nil {
		t.Errorf("with the journal empty the destroy does not plan: %v\n%s", err, out)
	}
}
