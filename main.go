// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The k8scidr Terraform provider: moves a live Kubernetes cluster's Service and pod CIDRs.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/provider"
)

// version is set by the release build (goreleaser ldflags).
var version = "dev"

//go:generate go run -C tools github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs generate --provider-dir .. --provider-name k8scidr

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers such as delve")
	flag.Parse()
	quietFrameworkTrace()
	limitMemory()

	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/k8scidr/k8scidr",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}

// quietFrameworkTrace keeps terraform-plugin-framework's own logger at debug unless trace logs
// were asked for. A provider logs everything and Terraform filters, so by default the framework
// takes the trace path for every value it walks while planning, and each trace call looks up its
// logger through a context chain that grew by one for every value before it
// (MarkComputedNilsAsUnknown): a 10,000-Service plan spent minutes of CPU there, quadratic in the
// plan's size. Trace-level framework logs return before any lookup, and Terraform shows them only
// at TF_LOG=TRACE anyway, which still gets them.
func quietFrameworkTrace() {
	if _, set := os.LookupEnv("TF_LOG_SDK_FRAMEWORK"); set {
		return
	}
	for _, v := range []string{"TF_LOG", "TF_LOG_PROVIDER", "TF_LOG_SDK"} {
		if strings.EqualFold(strings.TrimSpace(os.Getenv(v)), "TRACE") {
			return
		}
	}
	_ = os.Setenv("TF_LOG_SDK_FRAMEWORK", "DEBUG")
}

// softMemoryLimit bounds the Go runtime's memory (heap, stacks, its own metadata; not the
// binary's mapped code, about 55 MiB of the resident set) unless GOMEMLIMIT says otherwise. The
// garbage collector otherwise lets the heap grow to twice what is live, however large that is.
// Up to 10,000 Services the heap stays under the limit, which then changes nothing (bench
// 2026-11-28: 243 MiB peak RSS and 978 s with it, 250 MiB and 963 s with GOMEMLIMIT=off); past
// that it collects more often instead of growing, CPU a recreation paced by the apiserver has to
// spare. With more live data than the limit the runtime spends at most half the CPU collecting
// and then lets the heap grow: such a cluster's apply is slower, never killed for it.
const softMemoryLimit = 200 << 20

// limitMemory sets softMemoryLimit unless GOMEMLIMIT is set (GOMEMLIMIT=off removes any limit).
func limitMemory() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	debug.SetMemoryLimit(softMemoryLimit)
}
