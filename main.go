// The k8scidr Terraform provider: moves a live Kubernetes cluster's Service and pod CIDRs.
package main

import (
	"context"
	"flag"
	"log"

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

	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/k8scidr/k8scidr",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}
