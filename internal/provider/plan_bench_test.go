// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-log/tfsdklog"

	"github.com/k8scidr/terraform-provider-k8scidr/internal/movetext"
)

// BenchmarkRecreationPlan is the framework's share of planning k8scidr_service_recreation with n
// moves: one PlanResourceChange as Terraform sends it at create, with the SDK logger Terraform's
// plugin server puts in every request's context. framework=trace is the framework logger's
// default level, framework=debug what main sets unless trace logs were asked for
// (quietFrameworkTrace): at trace every value planned walks a context chain as long as the
// values before it.
func BenchmarkRecreationPlan(b *testing.B) {
	server, err := providerserver.NewProtocol6WithError(New("bench")())()
	if err != nil {
		b.Fatal(err)
	}
	sresp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		b.Fatal(err)
	}
	typ, ok := sresp.ResourceSchemas["k8scidr_service_recreation"].ValueType().(tftypes.Object)
	if !ok {
		b.Fatal("k8scidr_service_recreation: not an object type")
	}
	for _, c := range []struct {
		level string
		n     int
	}{{"trace", 1000}, {"trace", 2000}, {"debug", 1000}, {"debug", 2000}, {"debug", 10000}} {
		b.Run(fmt.Sprintf("framework=%s/moves=%d", c.level, c.n), func(b *testing.B) {
			b.Setenv("TF_LOG_SDK_FRAMEWORK", c.level)
			cfg, err := tfprotov6.NewDynamicValue(typ, planMovesValue(typ, c.n))
			if err != nil {
				b.Fatal(err)
			}
			prior, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
			if err != nil {
				b.Fatal(err)
			}
			ctx := tfsdklog.NewRootSDKLogger(context.Background(), tfsdklog.WithLevelFromEnv("TF_LOG_SDK"))
			for b.Loop() {
				resp, err := server.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
					TypeName: "k8scidr_service_recreation", PriorState: &prior, ProposedNewState: &cfg, Config: &cfg})
				if err != nil {
					b.Fatal(err)
				}
				for _, d := range resp.Diagnostics {
					if d.Severity == tfprotov6.DiagnosticSeverityError {
						b.Fatalf("%s: %s", d.Summary, d.Detail)
					}
				}
			}
		})
	}
}

// planMovesValue is a k8scidr_service_recreation configuration whose plan holds n moves,
// everything else unset or empty.
func planMovesValue(typ tftypes.Object, n int) tftypes.Value {
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
	}
	pt, _ := typ.AttributeTypes["plan"].(tftypes.Object)
	plan := map[string]tftypes.Value{}
	for name, at := range pt.AttributeTypes {
		plan[name] = tftypes.NewValue(at, nil)
	}
	strs := tftypes.List{ElementType: tftypes.String}
	plan["target_cidrs"] = tftypes.NewValue(strs, []tftypes.Value{tftypes.NewValue(tftypes.String, "172.24.0.0/15")})
	plan["first_moves"] = tftypes.NewValue(strs, []tftypes.Value{})
	plan["restore"] = tftypes.NewValue(pt.AttributeTypes["restore"], map[string]tftypes.Value{})
	plan["dns_bridge"] = tftypes.NewValue(tftypes.Bool, true)
	mt, _ := pt.AttributeTypes["moves"].(tftypes.Map)
	moves := map[string]tftypes.Value{}
	for i := range n {
		moves[fmt.Sprintf("ns%d/svc%d", i/100, i)] = tftypes.NewValue(mt.ElementType, movetext.Move{
			OldIPs: []string{fmt.Sprintf("100.64.%d.%d", i/256, i%256)}, NewIPs: []string{fmt.Sprintf("172.24.%d.%d", i/256, i%256)},
			Type: "ClusterIP", UID: fmt.Sprintf("0f8e7a52-1b2c-4d3e-9f00-%012d", i)}.String())
	}
	plan["moves"] = tftypes.NewValue(mt, moves)
	vals["plan"] = tftypes.NewValue(pt, plan)
	return tftypes.NewValue(typ, vals)
}
