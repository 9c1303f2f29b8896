// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The kubeconfig auth-provider plugins (oidc; gcp and azure answer with how to move to an exec
// plugin), linked so that every kubeconfig hashicorp/kubernetes reads works here too.
package k8sops

import _ "k8s.io/client-go/plugin/pkg/client/auth" // registers the plugins
