// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Workload keys: how a roll names what it restarts (namespace/kind/name, namespace/pod/name for a
// bare pod), their checks, whether they exist, and which of a roll's included workloads an
// apply rolls.
package workloadroll

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// Workload kinds a roll restarts.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
)

// RollKinds lists the kinds, and DefaultRollKinds the default scope.
var (
	RollKinds        = []string{KindDeployment, KindStatefulSet, KindDaemonSet}
	DefaultRollKinds = RollKinds
)

// WorkloadKey is "namespace/kind/name" with the kind in lower case, as kubectl names it.
func WorkloadKey(namespace, kind, name string) string {
	return namespace + "/" + strings.ToLower(kind) + "/" + name
}

// ParseWorkloadKey splits "namespace/kind/name" and checks the kind; kind comes back capitalised.
func ParseWorkloadKey(key string) (namespace, kind, name string, err error) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return "", "", "", fmt.Errorf("%q: use namespace/kind/name, e.g. kube-system/deployment/coredns", key)
	}
	for _, k := range RollKinds {
		if strings.EqualFold(parts[1], k) {
			return parts[0], k, parts[2], nil
		}
	}
	return "", "", "", fmt.Errorf("%q: kind %q is not one of deployment, statefulset, daemonset", key, parts[1])
}

// ValidateRollKey checks a key of a roll's list: a workload key, or a bare pod's PodKey.
func ValidateRollKey(key string) error {
	if _, _, ok := parsePodKey(key); ok {
		return nil
	}
	_, _, _, err := ParseWorkloadKey(key)
	return err
}

// NormalizeRollKeys writes workload keys as WorkloadKey does (kind in lower case); other keys
// are kept as they are.
func NormalizeRollKeys(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, key := range keys {
		if ns, kind, name, err := ParseWorkloadKey(key); err == nil {
			key = WorkloadKey(ns, kind, name)
		}
		out = append(out, key)
	}
	return out
}

// NewlyIncluded is what a roll's include list asks for now that it did not before: an included
// workload is rolled once, by the apply that adds it (all of them when there was no before).
// Keys are compared normalized, so Deployment and deployment are one workload.
func NewlyIncluded(before, now []string) []string {
	earlier := NormalizeRollKeys(before)
	var out []string
	for _, key := range NormalizeRollKeys(now) {
		if !slices.Contains(earlier, key) && !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

// MissingWorkloads returns the workload keys among keys whose workload does not exist.
func MissingWorkloads(ctx context.Context, c *k8sops.Client, keys []string) ([]string, error) {
	var missing []string
	for _, key := range keys {
		ns, kind, name, err := ParseWorkloadKey(key)
		if err != nil {
			continue
		}
		apps := c.Kube.AppsV1()
		switch kind {
		case KindDeployment:
			_, err = apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		case KindStatefulSet:
			_, err = apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		default:
			_, err = apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, key)
		case err != nil:
			return missing, err
		}
	}
	return missing, nil
}

// PodKey is how a bare pod is named among workload keys: "namespace/pod/name".
func PodKey(namespace, name string) string { return namespace + "/pod/" + name }

// parsePodKey splits a PodKey; ok is false for anything else.
func parsePodKey(key string) (namespace, name string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[1] != "pod" || parts[0] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[0], parts[2], true
}
