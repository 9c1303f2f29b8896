// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Field ownership across a Service move. A create makes its field manager the owner of every
// field, also when the request carries managedFields, so the Service's former owners (Helm,
// Argo CD, Flux, server-side apply users) would meet conflicts on their next apply. After the
// create, one update of metadata.managedFields gives their fields back, unless the create was
// made under the name of the Service's only former owner (creator).
package recreation

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// movedFields are the fields a move changes: they belong to the mover afterwards.
var movedFields = fieldpath.NewSet(fieldpath.MakePathOrDie("spec", "clusterIP"), fieldpath.MakePathOrDie("spec", "clusterIPs"))

// formerOwners is a Service's managedFields without the fields the move changes; entries left
// with no field are dropped. Entries it cannot decode are kept as they are.
func formerOwners(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range entries {
		set, ok := decodeFields(e)
		if !ok {
			out = append(out, e)
			continue
		}
		if set = set.Difference(movedFields); set.Empty() {
			continue
		}
		if e.FieldsV1 = encodeFields(set); e.FieldsV1 != nil {
			out = append(out, e)
		}
	}
	return out
}

func decodeFields(e metav1.ManagedFieldsEntry) (*fieldpath.Set, bool) {
	if e.FieldsType != "FieldsV1" || e.FieldsV1 == nil {
		return nil, false
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
		return nil, false
	}
	return set, true
}

func encodeFields(set *fieldpath.Set) *metav1.FieldsV1 {
	raw, err := set.ToJSON()
	if err != nil {
		return nil
	}
	return metav1.NewFieldsV1(string(raw))
}

// ownerID is what the apiserver tells managedFields entries apart by.
func ownerID(e metav1.ManagedFieldsEntry) string {
	v := e.APIVersion
	if e.Operation == metav1.ManagedFieldsOperationApply {
		v = ""
	}
	return e.Manager + "\x00" + string(e.Operation) + "\x00" + v + "\x00" + e.Subresource
}

// restoredOwnership is the managedFields to write on an object just created by manager: the
// former owners, what other managers wrote to it since its create (a controller adding a
// finalizer), and manager's own entry holding only mine, the fields its move changed (none for
// the Endpoints it restores as they were). The entry the create gave manager, which holds every
// field, is replaced.
func restoredOwnership(former, live []metav1.ManagedFieldsEntry, manager string, mine *fieldpath.Set) []metav1.ManagedFieldsEntry {
	own := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &metav1.Time{Time: time.Now().UTC().Truncate(time.Second)}, FieldsType: "FieldsV1", FieldsV1: encodeFields(mine)}
	out := slices.Clone(former)
	add := func(e metav1.ManagedFieldsEntry) {
		i := slices.IndexFunc(out, func(o metav1.ManagedFieldsEntry) bool { return ownerID(o) == ownerID(e) })
		if i < 0 {
			out = append(out, e)
			return
		}
		a, okA := decodeFields(out[i])
		b, okB := decodeFields(e)
		if okA && okB {
			out[i].FieldsV1 = encodeFields(a.Union(b))
		}
	}
	for _, e := range live {
		if ownerID(e) != ownerID(own) {
			add(e)
		}
	}
	if !mine.Empty() {
		add(own)
	}
	return out
}

// creator is the field manager to create a moved Service under, given its former owners
// (formerOwners): the mover, unless one manager's updates wrote every field it had (kubectl
// create or edit, an operator's client) and that manager is no tool that applies its fields
// again (k8sops.Reapplies). A create gives its manager every field (the apiserver's field
// manager compares the object against an empty one, and a manager in the request's
// managedFields loses each field the create adds): made under that manager's name, it leaves
// the ownership the move should leave, and no update is needed to give the fields back
// (restoreOwners). The one difference is the moved fields, which that manager then owns
// beside the rest; to an update ownership is never a conflict, and a server-side applier
// taking the IPs later meets that manager, as it would have before the move. A reapplying
// tool's ownership of spec.clusterIP would read as a pinned IP (preflight's clusterip_pinned),
// so Helm, Argo CD, kubectl apply and the like, server-side appliers, a subresource's entry
// (status) and several managers are given their fields back by restoreOwners.
func creator(former []metav1.ManagedFieldsEntry, mover string) string {
	if m, ok := soleUpdater(former); ok && !k8sops.Reapplies(former[0]) {
		return m
	}
	return mover
}

// soleUpdater is the manager of former's only entry, if its updates of the main resource
// (no subresource, v1, fields decodable) are all of former.
func soleUpdater(former []metav1.ManagedFieldsEntry) (string, bool) {
	if len(former) != 1 {
		return "", false
	}
	e := former[0]
	if e.Operation != metav1.ManagedFieldsOperationUpdate || e.Subresource != "" || e.Manager == "" || e.APIVersion != "v1" {
		return "", false
	}
	_, ok := decodeFields(e)
	return e.Manager, ok
}

// endpointsCreator is the field manager to restore hand-made Endpoints under: their sole
// former updater, which a create under its name leaves owning every field, as before the
// delete (none of their fields is ours); else the mover, whose restoreEndpointsOwners gives
// the fields back.
func endpointsCreator(former []metav1.ManagedFieldsEntry, mover string) string {
	if m, ok := soleUpdater(former); ok {
		return m
	}
	return mover
}

// restoreOwners gives the fields of svc, just created, back to its former owners. It changes
// nothing else. Created under the former owner's own name (creator), it has nothing to do.
func (x *executor) restoreOwners(ctx context.Context, svc *corev1.Service, former []metav1.ManagedFieldsEntry) {
	if creator(former, x.c.FieldManager) != x.c.FieldManager {
		return
	}
	api := x.c.Kube.CoreV1().Services(svc.Namespace)
	giveFieldsBack(ctx, x, k8sops.SvcKey(svc), svc, former, movedFields, api.Get, api.Update)
}

// restoreEndpointsOwners gives the fields of Endpoints the move restored back to their former
// owners (a server-side apply pipeline that deploys them): restored as they were, none is ours.
func (x *executor) restoreEndpointsOwners(ctx context.Context, key string, ep *corev1.Endpoints, former []metav1.ManagedFieldsEntry) {
	if endpointsCreator(former, x.c.FieldManager) != x.c.FieldManager {
		return // created under the former owner's name
	}
	api := x.c.Kube.CoreV1().Endpoints(ep.Namespace)
	giveFieldsBack(ctx, x, key+"'s Endpoints", ep, former, &fieldpath.Set{}, api.Get, api.Update)
}

// giveFieldsBack writes managedFields (restoredOwnership) on obj, just written by the mover. On
// a conflict it reads the object again and retries; one replaced since is not ours to change.
// Nobody else having owned a field, it does nothing; a failure is a note, since the object itself is right.
func giveFieldsBack[T metav1.Object](ctx context.Context, x *executor, what string, obj T, former []metav1.ManagedFieldsEntry, mine *fieldpath.Set,
	get func(context.Context, string, metav1.GetOptions) (T, error), update func(context.Context, T, metav1.UpdateOptions) (T, error)) {
	if !slices.ContainsFunc(former, func(e metav1.ManagedFieldsEntry) bool { return e.Manager != x.c.FieldManager }) {
		return
	}
	cur, uid := obj, obj.GetUID()
	err := k8sops.RetryWrite(ctx, func(again bool) error {
		if again {
			fresh, err := get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.GetUID() != uid {
				return nil
			}
			cur = fresh
		}
		cur.SetManagedFields(restoredOwnership(former, cur.GetManagedFields(), x.c.FieldManager, mine))
		_, err := update(ctx, cur, metav1.UpdateOptions{FieldManager: x.c.FieldManager})
		return err
	}, apierrors.IsConflict)
	if err != nil && !apierrors.IsNotFound(err) {
		x.note("%s: giving its fields back to their former managers (%s) failed (%v); their next server-side apply may "+
			"meet conflicts on fields %s now owns: apply once with --force-conflicts (kubectl) or its equivalent.",
			what, managerNames(former, x.c.FieldManager), err, x.c.FieldManager)
	}
}

func managerNames(entries []metav1.ManagedFieldsEntry, except string) string {
	var names []string
	for _, e := range entries {
		if e.Manager != except && !slices.Contains(names, e.Manager) {
			names = append(names, e.Manager)
		}
	}
	return fmt.Sprint(names)
}
