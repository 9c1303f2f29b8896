// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	log := filepath.Join(dir, "plan.log")
	if err := os.WriteFile(plan, []byte(`{"format_version":"1.2","resource_changes":[{"address":"k8scidr_service_cidr.new","mode":"managed","type":"k8scidr_service_cidr","name":"new","change":{"actions":["create"],"before":null,"after":{"name":"new","cidrs":["172.24.0.0/15"]}}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte(`{"@level":"warning","type":"diagnostic","diagnostic":{"severity":"warning","summary":"Target Range Not Served"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run([]string{"-plan", plan, "-log", log, "-title", "stage 1"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## stage 1\n", "| `k8scidr_service_cidr.new` | create | `new` `172.24.0.0/15` |", "**Warning: Target Range Not Served**"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, args := range [][]string{{}, {"-plan", plan, "-limit", "10"}, {"-plan", filepath.Join(dir, "missing")}, {"-plan", log}} {
		if err := run(args, &out); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
