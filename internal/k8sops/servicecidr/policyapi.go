// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package servicecidr

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/k8sops"
)

// objectAPI is what the policy code uses of a typed client of one kind.
type objectAPI[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error)
	Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error)
	Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// servedAs is one kind's API in the version the server serves, with v1 objects in and out:
// v1 itself, or (beta set) v1beta1, whose ValidatingAdmissionPolicy and binding have the same
// fields as v1's, so an object is carried over by its JSON.
type servedAs[V1, Beta any] struct {
	v1   objectAPI[V1]
	beta objectAPI[Beta]
}

func (s servedAs[V1, Beta]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*V1, error) {
	if s.beta == nil {
		return s.v1.Get(ctx, name, opts)
	}
	b, err := s.beta.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return carry[V1](b)
}

func (s servedAs[V1, Beta]) Create(ctx context.Context, obj *V1, opts metav1.CreateOptions) (*V1, error) {
	if s.beta == nil {
		return s.v1.Create(ctx, obj, opts)
	}
	return writeCarried(obj, func(b *Beta) (*Beta, error) { return s.beta.Create(ctx, b, opts) })
}

func (s servedAs[V1, Beta]) Update(ctx context.Context, obj *V1, opts metav1.UpdateOptions) (*V1, error) {
	if s.beta == nil {
		return s.v1.Update(ctx, obj, opts)
	}
	return writeCarried(obj, func(b *Beta) (*Beta, error) { return s.beta.Update(ctx, b, opts) })
}

// writeCarried carries obj over to Beta, writes it, and carries the answer back.
func writeCarried[V1, Beta any](obj *V1, write func(*Beta) (*Beta, error)) (*V1, error) {
	b, err := carry[Beta](obj)
	if err != nil {
		return nil, err
	}
	if b, err = write(b); err != nil {
		return nil, err
	}
	return carry[V1](b)
}

func (s servedAs[V1, Beta]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if s.beta == nil {
		return s.v1.Delete(ctx, name, opts)
	}
	return s.beta.Delete(ctx, name, opts)
}

// carry converts an object to the other version's type by its JSON.
func carry[T any](in any) (*T, error) {
	data, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("carrying %T over: %w", in, err)
	}
	return out, nil
}

type (
	policyAPI  = servedAs[admissionv1.ValidatingAdmissionPolicy, admissionv1beta1.ValidatingAdmissionPolicy]
	bindingAPI = servedAs[admissionv1.ValidatingAdmissionPolicyBinding, admissionv1beta1.ValidatingAdmissionPolicyBinding]
)

// policyAPIs are the ValidatingAdmissionPolicy and binding APIs in the version the server
// serves: admissionregistration.k8s.io/v1 (GA from 1.30), or v1beta1 where only that is served
// (1.28 and 1.29 with the ValidatingAdmissionPolicy feature gate and
// --runtime-config=admissionregistration.k8s.io/v1beta1=true); ErrNoAdmissionPolicyAPI when neither is.
func policyAPIs(c *k8sops.Client) (policyAPI, bindingAPI, error) {
	caps, err := c.Capabilities()
	if err != nil {
		return policyAPI{}, bindingAPI{}, err
	}
	switch {
	case caps.AdmissionPolicyV1:
		api := c.Kube.AdmissionregistrationV1()
		return policyAPI{v1: api.ValidatingAdmissionPolicies()}, bindingAPI{v1: api.ValidatingAdmissionPolicyBindings()}, nil
	case caps.AdmissionPolicyV1beta1:
		api := c.Kube.AdmissionregistrationV1beta1()
		return policyAPI{beta: api.ValidatingAdmissionPolicies()}, bindingAPI{beta: api.ValidatingAdmissionPolicyBindings()}, nil
	default:
		return policyAPI{}, bindingAPI{}, fmt.Errorf("%w (server %s)", ErrNoAdmissionPolicyAPI, caps.ServerVersion)
	}
}
