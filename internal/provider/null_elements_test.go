// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// nullPlacement is a value of some type holding exactly one null element, and the steps from
// the value to that element (a set's element has no steps of its own: it is named by its value).
type nullPlacement struct {
	value tftypes.Value
	steps []tftypes.AttributePathStep
}

// nullPlacements is every way to put one null element into a value of type t: a collection's
// own element, and each placement inside its element type or an object's attribute types.
func nullPlacements(t tftypes.Type) []nullPlacement {
	var out []nullPlacement
	wrap := func(elem tftypes.Type, holding func(tftypes.Value) tftypes.Value, step tftypes.AttributePathStep) {
		out = append(out, nullPlacement{holding(tftypes.NewValue(elem, nil)), stepsOf(step)})
		for _, in := range nullPlacements(elem) {
			out = append(out, nullPlacement{holding(in.value), append(stepsOf(step), in.steps...)})
		}
	}
	switch t := t.(type) {
	case tftypes.List:
		wrap(t.ElementType, func(e tftypes.Value) tftypes.Value { return tftypes.NewValue(t, []tftypes.Value{e}) }, tftypes.ElementKeyInt(0))
	case tftypes.Set:
		wrap(t.ElementType, func(e tftypes.Value) tftypes.Value { return tftypes.NewValue(t, []tftypes.Value{e}) }, nil)
	case tftypes.Map:
		wrap(t.ElementType, func(e tftypes.Value) tftypes.Value { return tftypes.NewValue(t, map[string]tftypes.Value{"k": e}) }, tftypes.ElementKeyString("k"))
	case tftypes.Object:
		for name, at := range t.AttributeTypes {
			for _, in := range nullPlacements(at) {
				out = append(out, nullPlacement{objectWith(t, name, in.value), append([]tftypes.AttributePathStep{tftypes.AttributeName(name)}, in.steps...)})
			}
		}
	}
	return out
}

func stepsOf(step tftypes.AttributePathStep) []tftypes.AttributePathStep {
	if step == nil {
		return nil
	}
	return []tftypes.AttributePathStep{step}
}

// objectWith is an object of type t whose attributes are all null but name, which is v.
func objectWith(t tftypes.Object, name string, v tftypes.Value) tftypes.Value {
	attrs := map[string]tftypes.Value{}
	for n, at := range t.AttributeTypes {
		attrs[n] = tftypes.NewValue(at, nil)
	}
	attrs[name] = v
	return tftypes.NewValue(t, attrs)
}

// configurablePlacements is, for each argument of b a configuration can set (nested attributes
// and blocks included), each null placement in it, as a whole value of b's type.
func configurablePlacements(b *tfprotov6.SchemaBlock) []nullPlacement {
	bt := b.ValueType().(tftypes.Object)
	var out []nullPlacement
	for _, a := range b.Attributes {
		if !a.Optional && !a.Required {
			continue
		}
		var inner []nullPlacement
		if a.NestedType != nil {
			inner = nestedPlacements(a.NestedType)
		} else {
			inner = nullPlacements(a.ValueType())
		}
		for _, in := range inner {
			out = append(out, nullPlacement{objectWith(bt, a.Name, in.value), append([]tftypes.AttributePathStep{tftypes.AttributeName(a.Name)}, in.steps...)})
		}
	}
	for _, nb := range b.BlockTypes {
		for _, in := range configurablePlacements(nb.Block) {
			v, step := in.value, tftypes.AttributePathStep(nil)
			switch nb.Nesting {
			case tfprotov6.SchemaNestedBlockNestingModeList, tfprotov6.SchemaNestedBlockNestingModeGroup:
				v, step = tftypes.NewValue(tftypes.List{ElementType: nb.Block.ValueType()}, []tftypes.Value{v}), tftypes.ElementKeyInt(0)
			case tfprotov6.SchemaNestedBlockNestingModeSet:
				v = tftypes.NewValue(tftypes.Set{ElementType: nb.Block.ValueType()}, []tftypes.Value{v})
			}
			out = append(out, nullPlacement{objectWith(bt, nb.TypeName, v), append(append([]tftypes.AttributePathStep{tftypes.AttributeName(nb.TypeName)}, stepsOf(step)...), in.steps...)})
		}
	}
	return out
}

// nestedPlacements is each null placement in a nested attribute: its collection's own element
// and those inside its configurable attributes.
func nestedPlacements(o *tfprotov6.SchemaObject) []nullPlacement {
	obj := &tfprotov6.SchemaBlock{Attributes: o.Attributes}
	inObject := configurablePlacements(obj)
	ot := obj.ValueType()
	var out []nullPlacement
	switch o.Nesting {
	case tfprotov6.SchemaObjectNestingModeSingle:
		return inObject
	case tfprotov6.SchemaObjectNestingModeList:
		lt := tftypes.List{ElementType: ot}
		out = append(out, nullPlacement{tftypes.NewValue(lt, []tftypes.Value{tftypes.NewValue(ot, nil)}), stepsOf(tftypes.ElementKeyInt(0))})
		for _, in := range inObject {
			out = append(out, nullPlacement{tftypes.NewValue(lt, []tftypes.Value{in.value}), append(stepsOf(tftypes.ElementKeyInt(0)), in.steps...)})
		}
	case tfprotov6.SchemaObjectNestingModeSet:
		st := tftypes.Set{ElementType: ot}
		out = append(out, nullPlacement{tftypes.NewValue(st, []tftypes.Value{tftypes.NewValue(ot, nil)}), nil})
		for _, in := range inObject {
			out = append(out, nullPlacement{tftypes.NewValue(st, []tftypes.Value{in.value}), in.steps})
		}
	case tfprotov6.SchemaObjectNestingModeMap:
		mt := tftypes.Map{ElementType: ot}
		out = append(out, nullPlacement{tftypes.NewValue(mt, map[string]tftypes.Value{"k": tftypes.NewValue(ot, nil)}), stepsOf(tftypes.ElementKeyString("k"))})
		for _, in := range inObject {
			out = append(out, nullPlacement{tftypes.NewValue(mt, map[string]tftypes.Value{"k": in.value}), append(stepsOf(tftypes.ElementKeyString("k")), in.steps...)})
		}
	}
	return out
}

// providerErrorRE is what the framework says when a value does not fit the provider's Go
// types: "always an error in the provider", never what a user should read.
var providerErrorRE = regexp.MustCompile(`(?i)value conversion error|always an error in the provider|received null value`)

// TestSchemaNullElementsRefused walks every schema the provider serves (the provider block, each
// resource and data source, nested attributes, object types and blocks included) and puts a
// null element in each list, set and map a configuration can set, one at a time, as
// `[var.x]` with var.x unset does: validation, the first step of every plan, must refuse it
// with a "Null Element" error at that element (its attribute and index or key), and nothing may
// answer with the framework's "error in the provider". A new attribute is covered without a new
// test.
func TestSchemaNullElementsRefused(t *testing.T) {
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	validate := map[string]func(*tfprotov6.DynamicValue) ([]*tfprotov6.Diagnostic, error){
		"provider": func(c *tfprotov6.DynamicValue) ([]*tfprotov6.Diagnostic, error) {
			r, err := server.ValidateProviderConfig(ctx, &tfprotov6.ValidateProviderConfigRequest{Config: c})
			return r.Diagnostics, err
		},
	}
	blocks := map[string]*tfprotov6.Schema{"provider": schemas.Provider}
	for name, s := range schemas.ResourceSchemas {
		blocks[name] = s
		validate[name] = func(c *tfprotov6.DynamicValue) ([]*tfprotov6.Diagnostic, error) {
			r, err := server.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: name, Config: c})
			return r.Diagnostics, err
		}
	}
	for name, s := range schemas.DataSourceSchemas {
		blocks["data."+name] = s
		validate["data."+name] = func(c *tfprotov6.DynamicValue) ([]*tfprotov6.Diagnostic, error) {
			r, err := server.ValidateDataResourceConfig(ctx, &tfprotov6.ValidateDataResourceConfigRequest{TypeName: name, Config: c})
			return r.Diagnostics, err
		}
	}
	checked := 0
	for typ, s := range blocks {
		for _, p := range configurablePlacements(s.Block) {
			at := tftypes.NewAttributePathWithSteps(p.steps)
			cfg, err := tfprotov6.NewDynamicValue(s.ValueType(), p.value)
			if err != nil {
				t.Fatalf("%s %s: %v", typ, at, err)
			}
			diags, err := validate[typ](&cfg)
			if err != nil {
				t.Fatalf("%s %s: %v", typ, at, err)
			}
			checked++
			if msg := nullElementVerdict(diags, at); msg != "" {
				t.Errorf("%s, a null element at %s: %s", typ, at, msg)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d null placements in the provider's schemas: the walk is broken", checked)
	}
	t.Logf("%d null placements, in %d schemas", checked, len(blocks))
}

// nullElementVerdict says what is wrong with diags as the answer to a null element at at, or "".
func nullElementVerdict(diags []*tfprotov6.Diagnostic, at *tftypes.AttributePath) string {
	refused := false
	var said []string
	for _, d := range diags {
		said = append(said, fmt.Sprintf("%s (%v): %s", d.Summary, d.Attribute, d.Detail))
		if providerErrorRE.MatchString(d.Summary + " " + d.Detail) {
			return "answered with a provider error: " + strings.Join(said, "; ")
		}
		// A set's element is named by its value: the error is at the set, or at that element.
		if d.Severity == tfprotov6.DiagnosticSeverityError && d.Summary == "Null Element" && d.Attribute != nil &&
			(d.Attribute.Equal(at) || d.Attribute.WithoutLastStep().Equal(at) && isSetStep(d.Attribute)) && strings.Contains(d.Detail, "Set it") {
			refused = true
		}
	}
	if !refused {
		return "not refused with a Null Element error there: " + strings.Join(said, "; ")
	}
	return ""
}

func isSetStep(p *tftypes.AttributePath) bool {
	steps := p.Steps()
	_, ok := steps[len(steps)-1].(tftypes.ElementKeyValue)
	return ok
}

// TestSchemaNullElementsRefused_functions: a null element in a function's collection argument
// is an error naming the argument, never a provider error.
func TestSchemaNullElementsRefused_functions(t *testing.T) {
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	fns, err := server.GetFunctions(ctx, &tfprotov6.GetFunctionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, f := range fns.Functions {
		params := f.Parameters
		if f.VariadicParameter != nil {
			params = append(params, f.VariadicParameter)
		}
		for i, p := range params {
			for _, in := range nullPlacements(p.Type) {
				args := make([]*tfprotov6.DynamicValue, len(params))
				for j, q := range params {
					v := tftypes.NewValue(q.Type, placeholder(q.Type))
					if j == i {
						v = in.value
					}
					dv, err := tfprotov6.NewDynamicValue(q.Type, v)
					if err != nil {
						t.Fatal(err)
					}
					args[j] = &dv
				}
				r, err := server.CallFunction(ctx, &tfprotov6.CallFunctionRequest{Name: name, Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				checked++
				switch {
				case r.Error == nil:
					t.Errorf("%s: a null element in argument %d (%s) is not refused", name, i+1, p.Name)
				case providerErrorRE.MatchString(r.Error.Text) || !strings.Contains(r.Error.Text, "Null Element") ||
					r.Error.FunctionArgument == nil || *r.Error.FunctionArgument != int64(i):
					t.Errorf("%s: a null element in argument %d (%s): %s (argument %v)", name, i+1, p.Name, r.Error.Text, r.Error.FunctionArgument)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no function of the provider takes a collection: the walk is broken")
	}
}

// placeholder is a known value of a primitive type t (nil for others: null).
func placeholder(t tftypes.Type) any {
	switch {
	case t.Is(tftypes.String):
		return "x"
	case t.Is(tftypes.Bool):
		return false
	}
	return nil
}
