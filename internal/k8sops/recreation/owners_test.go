// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package recreation

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func fieldsEntry(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", Subresource: sub,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

// fieldsOf is each entry's fields as compact JSON, by manager/operation/subresource.
func fieldsOf(t *testing.T, entries []metav1.ManagedFieldsEntry) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range entries {
		if e.FieldsV1 == nil {
			out[e.Manager+"/"+string(e.Operation)+"/"+e.Subresource] = ""
			continue
		}
		var v any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &v); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		out[e.Manager+"/"+string(e.Operation)+"/"+e.Subresource] = string(b)
	}
	return out
}

func TestFormerOwnersAndRestoredOwnership(t *testing.T) {
	former := formerOwners([]metav1.ManagedFieldsEntry{
		// a server-side applier that also set clusterIP (as kubeadm's kube-dns manifest does)
		fieldsEntry("flux", metav1.ManagedFieldsOperationApply, "",
			`{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:clusterIP":{},"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}}},"f:selector":{}}}`),
		// a manager that owned nothing but the IPs
		fieldsEntry("kubectl-create", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:clusterIP":{},"f:clusterIPs":{}}}`),
		fieldsEntry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", `{"f:status":{"f:loadBalancer":{"f:ingress":{}}}}`),
		{Manager: "odd", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV2"},
	})
	got := fieldsOf(t, former)
	want := map[string]string{
		"flux/Apply/":                           `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}}},"f:selector":{}}}`,
		"kube-controller-manager/Update/status": `{"f:status":{"f:loadBalancer":{"f:ingress":{}}}}`,
		"odd/Update/":                           "",
	}
	if len(former) != 3 || got["flux/Apply/"] != want["flux/Apply/"] || got["kube-controller-manager/Update/status"] != want["kube-controller-manager/Update/status"] || former[2].Manager != "odd" {
		t.Fatalf("formerOwners = %v (%d entries); want flux without clusterIP, the status entry, the undecodable entry as it was, kubectl-create dropped", got, len(former))
	}

	live := []metav1.ManagedFieldsEntry{
		// the create: ours, every field
		fieldsEntry("k8scidr", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:clusterIP":{},"f:clusterIPs":{},"f:selector":{}}}`),
		// a controller that wrote since
		fieldsEntry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:finalizers":{}}}`),
	}
	out := fieldsOf(t, restoredOwnership(former[:2], live, "k8scidr", movedFields))
	if out["flux/Apply/"] != want["flux/Apply/"] ||
		out["k8scidr/Update/"] != `{"f:spec":{"f:clusterIP":{},"f:clusterIPs":{}}}` ||
		out["kube-controller-manager/Update/"] != `{"f:metadata":{"f:finalizers":{}}}` ||
		out["kube-controller-manager/Update/status"] != want["kube-controller-manager/Update/status"] || len(out) != 4 {
		t.Fatalf("restoredOwnership = %v; want flux's fields back, k8scidr holding only the IPs, the controller's entries kept", out)
	}

	// Our own earlier entry (a former move) is one entry afterwards, with the IPs added.
	former = formerOwners([]metav1.ManagedFieldsEntry{fieldsEntry("k8scidr", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:annotations":{}},"f:spec":{"f:clusterIP":{}}}`)})
	out = fieldsOf(t, restoredOwnership(former, live[:1], "k8scidr", movedFields))
	if len(out) != 1 || out["k8scidr/Update/"] != `{"f:metadata":{"f:annotations":{}},"f:spec":{"f:clusterIP":{},"f:clusterIPs":{}}}` {
		t.Fatalf("restoredOwnership with our own former entry = %v; want one entry: annotations and the IPs", out)
	}
}

func TestCreator(t *testing.T) {
	spec := `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:selector":{}}}`
	update := func(manager string) metav1.ManagedFieldsEntry {
		return fieldsEntry(manager, metav1.ManagedFieldsOperationUpdate, "", spec)
	}
	for _, tc := range []struct {
		name   string
		former []metav1.ManagedFieldsEntry
		want   string
	}{
		{"no former owner", nil, "k8scidr"},
		{"one operator's updates", []metav1.ManagedFieldsEntry{update("prometheus-operator")}, "prometheus-operator"},
		{"kubectl create", []metav1.ManagedFieldsEntry{update("kubectl-create")}, "kubectl-create"},
		// Their ownership of clusterIP would read as a pinned IP: the fields are given back.
		{"helm", []metav1.ManagedFieldsEntry{update("helm")}, "k8scidr"},
		{"kubectl apply", []metav1.ManagedFieldsEntry{update("kubectl-client-side-apply")}, "k8scidr"},
		{"server-side apply", []metav1.ManagedFieldsEntry{fieldsEntry("ops", metav1.ManagedFieldsOperationApply, "", spec)}, "k8scidr"},
		{"status subresource", []metav1.ManagedFieldsEntry{fieldsEntry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", spec)}, "k8scidr"},
		{"two managers", []metav1.ManagedFieldsEntry{update("kubectl-create"), update("kubectl-edit")}, "k8scidr"},
		{"undecodable", []metav1.ManagedFieldsEntry{{Manager: "odd", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV2"}}, "k8scidr"},
		{"another API version", []metav1.ManagedFieldsEntry{{Manager: "old", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1beta1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(spec)}}, "k8scidr"},
		{"our own former move", []metav1.ManagedFieldsEntry{update("k8scidr")}, "k8scidr"},
	} {
		if got := creator(tc.former, "k8scidr"); got != tc.want {
			t.Errorf("%s: creator = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestEndpointsCreator(t *testing.T) {
	fields := `{"f:subsets":{}}`
	for _, tc := range []struct {
		name   string
		former []metav1.ManagedFieldsEntry
		want   string
	}{
		{"none", nil, "k8scidr"},
		// None of the Endpoints' fields is the mover's: even a reapplying tool is given all of them.
		{"helm", []metav1.ManagedFieldsEntry{fieldsEntry("helm", metav1.ManagedFieldsOperationUpdate, "", fields)}, "helm"},
		{"server-side apply", []metav1.ManagedFieldsEntry{fieldsEntry("flux", metav1.ManagedFieldsOperationApply, "", fields)}, "k8scidr"},
		{"two", []metav1.ManagedFieldsEntry{fieldsEntry("a", metav1.ManagedFieldsOperationUpdate, "", fields),
			fieldsEntry("b", metav1.ManagedFieldsOperationUpdate, "", fields)}, "k8scidr"},
	} {
		if got := endpointsCreator(tc.former, "k8scidr"); got != tc.want {
			t.Errorf("%s: endpointsCreator = %q, want %q", tc.name, got, tc.want)
		}
	}
}
