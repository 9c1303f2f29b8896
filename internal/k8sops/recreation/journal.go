// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The recreation journal: what a Service move must not lose, written to the cluster before the
// delete and removed once the new Service is verified.
package recreation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// JournalLabel marks journal ConfigMaps; JournalGroupLabel says whose they are.
const (
	JournalLabel      = "k8scidr.io/journal"
	JournalGroupLabel = "k8scidr.io/journal-group"
	// DefaultJournalGroup is the group of a resource that names none, and of journals written
	// before groups existed (no JournalGroupLabel).
	DefaultJournalGroup = "default"
	journalLabelValue   = "service-recreation"
	journalKey          = "entries.json"
	// journalMaxBytes keeps one journal ConfigMap well under the 1 MiB object limit.
	journalMaxBytes = 768 << 10
)

// JournalEntry is one Service being moved: the object to create (already carrying its target
// IPs), and what its deletion takes with it.
type JournalEntry struct {
	Key     string         `json:"key"`
	OldIPs  []string       `json:"oldIPs"`
	Service corev1.Service `json:"service"`
	// Endpoints is the hand-made Endpoints of a selector-less Service, which the endpoints
	// controller deletes with the Service.
	Endpoints *corev1.Endpoints `json:"endpoints,omitempty"`
	// Slices are hand-made EndpointSlices owned by the Service, which the garbage collector
	// deletes with it; restored with the owner UID rewritten.
	Slices []discoveryv1.EndpointSlice `json:"slices,omitempty"`
	// Bridge is the old-IP bridge the move creates on the IPs it frees; the entry is settled
	// only once it exists.
	Bridge *corev1.Service `json:"bridge,omitempty"`
	// Owners is the Service's managedFields without the moved fields (formerOwners), given back
	// to it after the create.
	Owners []metav1.ManagedFieldsEntry `json:"owners,omitempty"`
	// Written is when the entry was made: of two entries for one Service (re-journaled after
	// another client changed it mid-apply), the newer is restored.
	Written time.Time `json:"written"`

	// Object is the journal ConfigMap holding the entry (not serialized).
	Object string `json:"-"`
}

// Journal names a recreation journal: the journal ConfigMaps of Group in Namespace. Each
// k8scidr_service_recreation resource has its own, so that two of them applied side by side
// never restore, settle or delete each other's entries.
type Journal struct {
	Namespace string
	Group     string
}

func (j Journal) group() string {
	if j.Group == "" {
		return DefaultJournalGroup
	}
	return j.Group
}

func (j Journal) String() string { return j.Namespace + " (journal_group " + j.group() + ")" }

// holds reports whether the journal ConfigMap cm belongs to j.
func (j Journal) holds(cm *corev1.ConfigMap) bool {
	g := cm.Labels[JournalGroupLabel]
	if g == "" {
		g = DefaultJournalGroup
	}
	return g == j.group()
}

// writeJournal stores entries in as few ConfigMaps as the size limit allows and returns their
// names. A write that fails partway removes the objects it wrote: nothing of those entries was
// deleted yet, and a partial journal would only show as work to restore.
func writeJournal(ctx context.Context, c *k8sops.Client, j Journal, entries []JournalEntry) (names []string, err error) {
	namespace := j.Namespace
	defer func() {
		if err != nil && len(names) > 0 {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if derr := deleteJournal(dctx, c, namespace, names); derr != nil {
				err = fmt.Errorf("%w; the part already written stays: %w", err, derr)
			}
			names = nil
		}
	}()
	for len(entries) > 0 {
		n := len(entries)
		var data []byte
		for {
			var err error
			if data, err = json.Marshal(entries[:n]); err != nil {
				return names, err
			}
			if len(data) <= journalMaxBytes || n == 1 {
				break
			}
			n = (n + 1) / 2
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				// Named here rather than by generateName, so that a retried create whose first
				// attempt went through finds its own object instead of writing a second one.
				Name:   "k8scidr-journal-" + utilrand.String(10),
				Labels: map[string]string{JournalLabel: journalLabelValue, JournalGroupLabel: j.group(), "app.kubernetes.io/managed-by": "k8scidr"},
				Annotations: map[string]string{"k8scidr.io/written-at": time.Now().UTC().Format(time.RFC3339),
					"k8scidr.io/description": "Services being moved by k8scidr_service_recreation. The next apply restores any that are missing; do not delete by hand."},
			},
			Data: map[string]string{journalKey: string(data)},
		}
		err := k8sops.RetryWrite(ctx, func(again bool) error {
			_, err := c.Kube.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: c.FieldManager})
			if again && apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return names, fmt.Errorf("writing the journal to namespace %s: %w", namespace, err)
		}
		names = append(names, cm.Name)
		entries = entries[n:]
	}
	return names, nil
}

// newestEntries is each Service's newest journal entry: of two entries for one Service (a move
// re-journals a Service changed during the apply) the newer decides what is restored.
func newestEntries(journal []JournalEntry) map[string]JournalEntry {
	newest := map[string]JournalEntry{}
	for _, e := range journal {
		if n, ok := newest[e.Key]; !ok || e.Written.After(n.Written) {
			newest[e.Key] = e
		}
	}
	return newest
}

// ReadJournal lists every entry of journal j.
func ReadJournal(ctx context.Context, c *k8sops.Client, j Journal) ([]JournalEntry, error) {
	var out []JournalEntry
	namespace := j.Namespace
	list := c.Kube.CoreV1().ConfigMaps(namespace).List
	err := k8sops.EachItem(ctx, k8sops.ListPages(func(ctx context.Context, o metav1.ListOptions) (*corev1.ConfigMapList, error) {
		o.LabelSelector = JournalLabel + "=" + journalLabelValue
		return list(ctx, o)
	}), func(cm *corev1.ConfigMap) error {
		if !j.holds(cm) {
			return nil
		}
		var entries []JournalEntry
		if err := json.Unmarshal([]byte(cm.Data[journalKey]), &entries); err != nil {
			return fmt.Errorf("journal %s/%s is unreadable: %w", namespace, cm.Name, err)
		}
		for i := range entries {
			entries[i].Object = cm.Name
		}
		out = append(out, entries...)
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if apierrors.IsForbidden(err) && !namespaceExists(ctx, c, namespace) {
		// A Role in the journal's namespace goes with it: the refusal is the namespace's absence.
		return nil, fmt.Errorf("the journal's namespace %s does not exist, and this identity may read and write the "+
			"journal only through a Role in it: create the namespace with its Roles (examples/rbac's files hold both), "+
			"or set journal_namespace to the namespace your roles grant: %w", namespace, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the journal in namespace %s: %w", namespace, err)
	}
	return out, nil
}

// namespaceExists says whether namespace exists, through a list (which the roles grant where a
// get by name is not); true when that cannot be told.
func namespaceExists(ctx context.Context, c *k8sops.Client, namespace string) bool {
	l, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + namespace})
	return err != nil || len(l.Items) > 0
}

// deleteJournal removes journal ConfigMaps whose entries are settled.
func deleteJournal(ctx context.Context, c *k8sops.Client, namespace string, names []string) error {
	for _, n := range names {
		err := k8sops.RetryWrite(ctx, func(bool) error {
			return c.Kube.CoreV1().ConfigMaps(namespace).Delete(ctx, n, metav1.DeleteOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing journal %s/%s: %w", namespace, n, err)
		}
	}
	return nil
}

// dropEntries removes the entries of keys from the journal objects names, deleting an object
// left empty: Services another client deleted or replaced while this apply held them, which a
// restore would otherwise bring back.
func dropEntries(ctx context.Context, c *k8sops.Client, namespace string, names []string, keys map[string]bool) error {
	api := c.Kube.CoreV1().ConfigMaps(namespace)
	for _, n := range names {
		err := k8sops.RetryWrite(ctx, func(bool) error {
			cm, err := api.Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			var entries []JournalEntry
			if err := json.Unmarshal([]byte(cm.Data[journalKey]), &entries); err != nil {
				return fmt.Errorf("journal %s/%s is unreadable: %w", namespace, n, err)
			}
			kept := slices.DeleteFunc(slices.Clone(entries), func(e JournalEntry) bool { return keys[e.Key] })
			switch {
			case len(kept) == len(entries):
				return nil
			case len(kept) == 0:
				err = api.Delete(ctx, n, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cm.ResourceVersion}})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}
			data, err := json.Marshal(kept)
			if err != nil {
				return err
			}
			cm.Data[journalKey] = string(data)
			_, err = api.Update(ctx, cm, metav1.UpdateOptions{FieldManager: c.FieldManager})
			return err
		}, apierrors.IsConflict)
		if err != nil {
			return fmt.Errorf("dropping entries from journal %s/%s: %w", namespace, n, err)
		}
	}
	return nil
}

// JournalLeftovers names the Services journal j holds entries for, sorted: work an interrupted
// apply left, which only an apply reading j restores.
func JournalLeftovers(ctx context.Context, c *k8sops.Client, j Journal) ([]string, error) {
	entries, err := ReadJournal(ctx, c, j)
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys), err
}

// entrySize is the size of a journal entry as written: an entry larger than journalMaxBytes
// fits in no journal object, and a move is never started unjournaled.
func entrySize(e JournalEntry) int {
	data, err := json.Marshal(e)
	if err != nil {
		return 0
	}
	return len(data)
}

// tooLargeToJournal refuses, at plan, the moves whose journal entry no journal object holds:
// selector-less Services with tens of thousands of hand-made Endpoints addresses. Only those
// are measured (the rest are far smaller).
func tooLargeToJournal(snap Snapshot, byKey map[string]*corev1.Service, moves []Move) []k8sops.Finding {
	var out []k8sops.Finding
	for _, m := range moves {
		ep, ok := snap.Endpoints[m.Key]
		svc := byKey[m.Key]
		if !ok || svc == nil {
			continue
		}
		if size := entrySize(JournalEntry{Key: m.Key, OldIPs: m.OldIPs, Service: *recreationCopy(svc, m.NewIPs), Endpoints: &ep}); size > journalMaxBytes {
			out = append(out, k8sops.Finding{Path: k8sops.At("exclude"), Summary: "Service Too Large to Journal", Detail: tooLargeText(m.Key, size, endpointAddresses(ep))})
		}
	}
	return out
}

func tooLargeText(key string, size, addresses int) string {
	return fmt.Sprintf("%s's journal entry would be %d KiB (its hand-made Endpoints hold %d addresses), more than one journal "+
		"object holds (%d KiB): it could never be journaled, and no Service is deleted unjournaled. Add %q to exclude and "+
		"move it by hand, or split its Endpoints between Services.", key, size>>10, addresses, journalMaxBytes>>10, key)
}

func endpointAddresses(ep corev1.Endpoints) int {
	n := 0
	for _, s := range ep.Subsets {
		n += len(s.Addresses) + len(s.NotReadyAddresses)
	}
	return n
}
