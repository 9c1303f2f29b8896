// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// ServiceAccountKubeconfig creates (or replaces) what roleFile (multi-document YAML) holds: one
// ClusterRole, and the Namespaces and Roles of the per-namespace grants; a ServiceAccount of the
// ClusterRole's name in kube-system, bound to the ClusterRole and to each Role (a RoleBinding of
// the Role's name) alone; and writes the cluster's kubeconfig with a current context that
// authenticates with a token of that ServiceAccount. without drops verbs from every rule of
// the file first, as "resource:verb", to see what the provider says when one is missing.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, roleFile string, without ...string) (string, error) {
	data, err := os.ReadFile(roleFile)
	if err != nil {
		return "", err
	}
	var role *rbacv1.ClusterRole
	var roles []rbacv1.Role
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			return "", fmt.Errorf("%s: %w", roleFile, err)
		}
		switch kind.Kind {
		case "":
		case "ClusterRole":
			if role != nil {
				return "", fmt.Errorf("%s: more than one ClusterRole", roleFile)
			}
			role = &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict([]byte(doc), role); err != nil {
				return "", fmt.Errorf("%s: %w", roleFile, err)
			}
		case "Role":
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				return "", fmt.Errorf("%s: %w", roleFile, err)
			}
			roles = append(roles, r)
		case "Namespace":
			var ns corev1.Namespace
			if err := yaml.UnmarshalStrict([]byte(doc), &ns); err != nil {
				return "", fmt.Errorf("%s: %w", roleFile, err)
			}
			if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return "", err
			}
		default:
			return "", fmt.Errorf("%s: a %s: only a ClusterRole, Roles and Namespaces are expected", roleFile, kind.Kind)
		}
	}
	if role == nil {
		return "", fmt.Errorf("%s: no ClusterRole", roleFile)
	}
	role.Rules = withoutVerbs(role.Rules, without)
	name := role.Name
	rbac := c.Kube.RbacV1()
	_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}}
	if _, err := c.Kube.CoreV1().ServiceAccounts("kube-system").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "kube-system"}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   subjects,
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	for _, r := range roles {
		r.Rules = withoutVerbs(r.Rules, without)
		_ = rbac.Roles(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if _, err := rbac.Roles(r.Namespace).Create(ctx, &r, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("the Role %s/%s: %w", r.Namespace, r.Name, err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name}, Subjects: subjects}
		if _, err := rbac.RoleBindings(r.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	tr, err := c.Kube.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](4 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for ServiceAccount kube-system/%s: %w", name, err)
	}
	// The cluster's kubeconfig with the ServiceAccount added and current: its other contexts stay.
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CACert}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(c.Dir, name+fmt.Sprintf("-%d.kubeconfig", len(without)))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, os.Chmod(path, 0o600)
}

// withoutVerbs is rules less each "resource:verb" of without.
func withoutVerbs(rules []rbacv1.PolicyRule, without []string) []rbacv1.PolicyRule {
	for _, drop := range without {
		res, verb, _ := strings.Cut(drop, ":")
		var kept []rbacv1.PolicyRule
		for _, r := range rules {
			if !slices.Contains(r.Resources, res) || !slices.Contains(r.Verbs, verb) {
				kept = append(kept, r)
				continue
			}
			if others := slices.DeleteFunc(slices.Clone(r.Resources), func(x string) bool { return x == res }); len(others) > 0 {
				o := *r.DeepCopy()
				o.Resources = others
				kept = append(kept, o)
			}
			n := *r.DeepCopy()
			n.Resources, n.Verbs = []string{res}, slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
			if len(n.Verbs) > 0 {
				kept = append(kept, n)
			}
		}
		rules = kept
	}
	return rules
}

// NamespacedRoles creates what a multi-document YAML file of Namespaces and Roles holds (Roles
// replaced, Namespaces kept), and binds each Role named in bind to the kube-system
// ServiceAccount it maps to (created when missing), as a RoleBinding of the Role's name: the
// per-namespace grants of examples/rbac, given to the identities of ServiceAccountKubeconfig.
func (c *Cluster) NamespacedRoles(ctx context.Context, file string, bind map[string]string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	rbac := c.Kube.RbacV1()
	bound := 0
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		switch kind.Kind {
		case "":
		case "Namespace":
			var ns corev1.Namespace
			if err := yaml.UnmarshalStrict([]byte(doc), &ns); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case "Role":
			var role rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			_ = rbac.Roles(role.Namespace).Delete(ctx, role.Name, metav1.DeleteOptions{})
			if _, err := rbac.Roles(role.Namespace).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
				return err
			}
			sa, ok := bind[role.Name]
			if !ok {
				continue
			}
			bound++
			account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: "kube-system"}}
			if _, err := c.Kube.CoreV1().ServiceAccounts("kube-system").Create(ctx, account, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			binding := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: "kube-system"}},
			}
			if _, err := rbac.RoleBindings(role.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		default:
			return fmt.Errorf("%s: a %s: only Namespaces and Roles are expected", file, kind.Kind)
		}
	}
	if bound != len(bind) {
		return fmt.Errorf("%s: %d of the Roles to bind (%v) are in it", file, bound, bind)
	}
	return nil
}
