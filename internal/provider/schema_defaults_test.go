// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// The registry-grade docs rule: every optional argument says what leaving it out does.
package provider

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// TestSchemaOptionalArgumentsStateDefault walks every schema the provider serves (the provider
// block, each resource, each data source; nested attributes and blocks included) and names each
// optional argument whose description says neither its default ("Default …") nor what unset
// means ("Unset, …").
func TestSchemaOptionalArgumentsStateDefault(t *testing.T) {
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Fatalf("GetProviderSchema: %s: %s", d.Summary, d.Detail)
	}
	var missing []string
	check := func(typ string, s *tfprotov6.Schema) {
		if s == nil || s.Block == nil {
			t.Errorf("%s: no schema", typ)
			return
		}
		missing = append(missing, undocumentedDefaults(typ, s.Block)...)
	}
	check("provider", resp.Provider)
	for name, s := range resp.ResourceSchemas {
		check(name, s)
	}
	for name, s := range resp.DataSourceSchemas {
		check("data."+name, s)
	}
	if len(resp.ResourceSchemas) == 0 || len(resp.DataSourceSchemas) == 0 {
		t.Fatalf("the provider served %d resource and %d data source schemas", len(resp.ResourceSchemas), len(resp.DataSourceSchemas))
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("%s: optional, but its description states no default (\"Default …\") and no unset behaviour (\"Unset, …\")", m)
	}
}

// undocumentedDefaults returns the paths, under prefix, of the optional attributes and blocks of
// b whose description states no default, looking into nested attributes and blocks.
func undocumentedDefaults(prefix string, b *tfprotov6.SchemaBlock) []string {
	var out []string
	for _, a := range b.Attributes {
		p := prefix + "." + a.Name
		if a.Optional && !statesDefault(a.Description) {
			out = append(out, p)
		}
		if a.NestedType != nil {
			out = append(out, undocumentedDefaults(p, &tfprotov6.SchemaBlock{Attributes: a.NestedType.Attributes})...)
		}
	}
	for _, nb := range b.BlockTypes {
		p := prefix + "." + nb.TypeName
		if nb.MinItems == 0 && !statesDefault(nb.Block.Description) {
			out = append(out, p)
		}
		out = append(out, undocumentedDefaults(p, nb.Block)...)
	}
	return out
}

func statesDefault(desc string) bool {
	return strings.Contains(desc, "Default") || strings.Contains(desc, "Unset")
}
