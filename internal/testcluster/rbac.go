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
	f, err := c.applyRoleFile(ctx, roleFile)
	if err != nil {
		return "", err
	}
	if len(f.clusterRoles) != 1 {
		return "", fmt.Errorf("%s: %d ClusterRoles, want one", roleFile, len(f.clusterRoles))
	}
	role := &f.clusterRoles[0]
	role.Rules = withoutVerbs(role.Rules, without)
	name := role.Name
	rbac := c.Kube.RbacV1()
	_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if err := c.serviceAccount(ctx, name); err != nil {
		return "", err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "kube-system"}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	for _, r := range f.roles {
		r.Rules = withoutVerbs(r.Rules, without)
		if err := c.replaceRole(ctx, &r, name); err != nil {
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
	f, err := c.applyRoleFile(ctx, file)
	if err != nil {
		return err
	}
	if len(f.clusterRoles) > 0 {
		return fmt.Errorf("%s: a ClusterRole: only Namespaces and Roles are expected", file)
	}
	bound := 0
	for _, role := range f.roles {
		sa := bind[role.Name]
		if sa != "" {
			bound++
			if err := c.serviceAccount(ctx, sa); err != nil {
				return err
			}
		}
		if err := c.replaceRole(ctx, &role, sa); err != nil {
			return err
		}
	}
	if bound != len(bind) {
		return fmt.Errorf("%s: %d of the Roles to bind (%v) are in it", file, bound, bind)
	}
	return nil
}

// roleFile is what a file of examples/rbac holds.
type roleFile struct {
	clusterRoles []rbacv1.ClusterRole
	roles        []rbacv1.Role
}

// applyRoleFile reads a multi-document YAML file of ClusterRoles, Roles and Namespaces, and
// creates its Namespaces (those that exist are kept): the Roles in them are the caller's.
func (c *Cluster) applyRoleFile(ctx context.Context, path string) (roleFile, error) {
	var f roleFile
	data, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			return f, fmt.Errorf("%s: %w", path, err)
		}
		var into any
		var ns corev1.Namespace
		switch kind.Kind {
		case "":
			continue
		case "ClusterRole":
			f.clusterRoles = append(f.clusterRoles, rbacv1.ClusterRole{})
			into = &f.clusterRoles[len(f.clusterRoles)-1]
		case "Role":
			f.roles = append(f.roles, rbacv1.Role{})
			into = &f.roles[len(f.roles)-1]
		case "Namespace":
			into = &ns
		default:
			return f, fmt.Errorf("%s: a %s: only ClusterRoles, Roles and Namespaces are expected", path, kind.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			return f, fmt.Errorf("%s: %w", path, err)
		}
		if ns.Name == "" {
			continue
		}
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return f, err
		}
	}
	return f, nil
}

// serviceAccount creates the kube-system ServiceAccount name when missing.
func (c *Cluster) serviceAccount(ctx context.Context, name string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}}
	if _, err := c.Kube.CoreV1().ServiceAccounts("kube-system").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// replaceRole creates role anew and, when sa is set, binds it to the kube-system
// ServiceAccount sa with a RoleBinding of the Role's name.
func (c *Cluster) replaceRole(ctx context.Context, role *rbacv1.Role, sa string) error {
	rbac := c.Kube.RbacV1()
	_ = rbac.Roles(role.Namespace).Delete(ctx, role.Name, metav1.DeleteOptions{})
	if _, err := rbac.Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the Role %s/%s: %w", role.Namespace, role.Name, err)
	}
	if sa == "" {
		return nil
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: "kube-system"}},
	}
	if _, err := rbac.RoleBindings(role.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
