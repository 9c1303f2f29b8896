// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Server warnings (an admission policy in Warn mode, a deprecated API) handed to whoever asked:
// a request whose context carries a collector records them there, so they reach the user as
// diagnostics instead of the provider's log.
package k8sops

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
)

type warningsKey struct{}

// Warnings collects the warnings of the requests made with its context.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// CollectWarnings returns a context whose requests' warnings w records.
func CollectWarnings(ctx context.Context) (context.Context, *Warnings) {
	w := &Warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

// List is every warning recorded so far, in order, without repeats.
func (w *Warnings) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// contextWarnings records a warning in the request context's collector, or logs it as
// client-go does by default when there is none.
type contextWarnings struct{}

func (contextWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	w, ok := ctx.Value(warningsKey{}).(*Warnings)
	if !ok {
		rest.WarningLogger{}.HandleWarningHeaderWithContext(ctx, code, agent, text)
		return
	}
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.list {
		if t == text {
			return
		}
	}
	w.list = append(w.list, text)
}
