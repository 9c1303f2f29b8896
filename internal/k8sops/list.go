// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Paginated listing shared by every reader: one pass over a kind, typed items.
package k8sops

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
)

// EachItem pages through list and calls fn for every item, which must be of type T.
func EachItem[T runtime.Object](ctx context.Context, list pager.ListPageFunc, fn func(T) error) error {
	return pager.New(list).EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
		item, ok := o.(T)
		if !ok {
			return fmt.Errorf("unexpected list item %T", o)
		}
		return fn(item)
	})
}

// ListPages adapts a typed or dynamic List method to pager.ListPageFunc.
func ListPages[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) pager.ListPageFunc {
	return func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return list(ctx, opts) }
}
