// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package k8sops

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestFlagValues: a flag's values in each form kubeadm and kOps write a control-plane command
// line: --name=v, --name v, and a shell's one-word command line (kOps before go-runner); a flag
// whose name only starts the same is not it.
func TestFlagValues(t *testing.T) {
	pod := func(command, args []string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Command: command, Args: args}}}}
	}
	for _, tc := range []struct {
		name          string
		command, args []string
		want          []string
	}{
		{"kubeadm", []string{"kube-apiserver", "--advertise-address=10.0.0.1", "--service-cluster-ip-range=10.96.0.0/12"}, nil, []string{"10.96.0.0/12"}},
		{"value as the next word", []string{"kube-apiserver"}, []string{"--service-cluster-ip-range", "10.96.0.0/12,fd00::/108"}, []string{"10.96.0.0/12,fd00::/108"}},
		{"kOps shell", []string{"/bin/sh", "-c", "mkfifo /tmp/pipe; /usr/local/bin/kube-apiserver --allow-privileged=true --service-cluster-ip-range=100.64.0.0/13 2>&1 | tee /var/log/x"}, nil, []string{"100.64.0.0/13"}},
		{"kOps go-runner", []string{"/go-runner", "--log-file=/var/log/kube-apiserver.log", "/usr/local/bin/kube-apiserver"}, []string{"--service-cluster-ip-range=100.64.0.0/13"}, []string{"100.64.0.0/13"}},
		{"a longer flag's name", []string{"kube-apiserver", "--service-cluster-ip-range-extra=1.2.3.0/24"}, nil, nil},
		{"absent", []string{"kube-apiserver"}, nil, nil},
	} {
		if got := FlagValues(pod(tc.command, tc.args), "service-cluster-ip-range"); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
