// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Null elements: a list, set or map element left null (`[var.x]` with var.x unset, the ordinary
// shape of a module input nobody set) is refused at plan by its path, before any conversion to
// Go values could fail on it with the framework's "error in the provider".
package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// noNullElements refuses a null element anywhere in a value: in the collection itself and in
// the collections and objects it holds. rule says what an element must be ("must be …"), for
// the fix.
type noNullElements struct{ rule string }

var (
	_ validator.List                    = noNullElements{}
	_ validator.Set                     = noNullElements{}
	_ validator.Map                     = noNullElements{}
	_ validator.Object                  = noNullElements{}
	_ function.MapParameterValidator    = noNullElements{}
	_ function.ListParameterValidator   = noNullElements{}
	_ function.SetParameterValidator    = noNullElements{}
	_ function.ObjectParameterValidator = noNullElements{}
)

// noNulls refuses null elements of a collection whose elements follow rule ("must be a
// namespace", ...).
func noNulls(rule string) noNullElements { return noNullElements{rule} }

// listOf, setOf and mapOf are the validators of a collection of strings that must each pass v:
// none null, each valid.
func listOf(v validator.String) []validator.List {
	return []validator.List{noNulls(v.Description(context.Background())), listvalidator.ValueStringsAre(v)}
}

func setOf(v validator.String) []validator.Set {
	return []validator.Set{noNulls(v.Description(context.Background())), setvalidator.ValueStringsAre(v)}
}

func mapOf(v validator.String) []validator.Map {
	return []validator.Map{noNulls(v.Description(context.Background())), mapvalidator.ValueStringsAre(v)}
}

func (v noNullElements) Description(context.Context) string {
	return "no element may be null; each " + v.rule
}

func (v noNullElements) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v noNullElements) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	v.check(req.Path, req.ConfigValue, &resp.Diagnostics)
}

func (v noNullElements) ValidateSet(_ context.Context, req validator.SetRequest, resp *validator.SetResponse) {
	v.check(req.Path, req.ConfigValue, &resp.Diagnostics)
}

func (v noNullElements) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	v.check(req.Path, req.ConfigValue, &resp.Diagnostics)
}

func (v noNullElements) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	v.check(req.Path, req.ConfigValue, &resp.Diagnostics)
}

func (v noNullElements) ValidateParameterMap(_ context.Context, req function.MapParameterValidatorRequest, resp *function.MapParameterValidatorResponse) {
	resp.Error = v.argument(req.ArgumentPosition, req.Value)
}

func (v noNullElements) ValidateParameterList(_ context.Context, req function.ListParameterValidatorRequest, resp *function.ListParameterValidatorResponse) {
	resp.Error = v.argument(req.ArgumentPosition, req.Value)
}

func (v noNullElements) ValidateParameterSet(_ context.Context, req function.SetParameterValidatorRequest, resp *function.SetParameterValidatorResponse) {
	resp.Error = v.argument(req.ArgumentPosition, req.Value)
}

func (v noNullElements) ValidateParameterObject(_ context.Context, req function.ObjectParameterValidatorRequest, resp *function.ObjectParameterValidatorResponse) {
	resp.Error = v.argument(req.ArgumentPosition, req.Value)
}

// check adds an error at each null element in value, under p.
func (v noNullElements) check(p path.Path, value attr.Value, diags *diag.Diagnostics) {
	for _, at := range nullElements(p, value) {
		diags.AddAttributeError(at, "Null Element", v.detail(at))
	}
}

// argument is a function error naming the argument at pos when value holds a null element.
func (v noNullElements) argument(pos int64, value attr.Value) *function.FuncError {
	var err *function.FuncError
	for _, at := range nullElements(path.Empty(), value) {
		err = function.ConcatFuncErrors(err, function.NewArgumentFuncError(pos, fmt.Sprintf("Null Element: argument %d: %s", pos+1, v.detail(at))))
	}
	return err
}

func (v noNullElements) detail(at path.Path) string {
	where := at.String()
	steps := at.Steps()
	if last, _ := steps.LastStep(); len(steps) == 0 {
		where = "An element"
	} else if _, inSet := last.(path.PathStepElementKeyValue); inSet {
		where = "An element of " + at.ParentPath().String()
	}
	return fmt.Sprintf("%s is null, most often a variable or local left unset inside a list or map (`[var.x]` with var.x null). "+
		"Set it (each element %s), or leave the element out: `compact([...])` drops null strings from a list, and a `for` "+
		"expression's `if` drops a map's key.", where, v.rule)
}

// nullElements is the path of every null element of a list, set or map in v (under p), looking
// into the collections and objects v holds; unknown and null values hold none.
func nullElements(p path.Path, v attr.Value) []path.Path {
	if v == nil || v.IsNull() || v.IsUnknown() {
		return nil
	}
	var out []path.Path
	visit := func(at path.Path, e attr.Value) {
		if e == nil || e.IsNull() {
			out = append(out, at)
			return
		}
		out = append(out, nullElements(at, e)...)
	}
	switch v := v.(type) {
	case basetypes.ListValuable:
		l, _ := v.ToListValue(context.Background())
		for i, e := range l.Elements() {
			visit(p.AtListIndex(i), e)
		}
	case basetypes.SetValuable:
		s, _ := v.ToSetValue(context.Background())
		for _, e := range s.Elements() {
			visit(p.AtSetValue(e), e)
		}
	case basetypes.MapValuable:
		m, _ := v.ToMapValue(context.Background())
		elems := m.Elements()
		for _, k := range slices.Sorted(maps.Keys(elems)) {
			visit(p.AtMapKey(k), elems[k])
		}
	case basetypes.ObjectValuable:
		o, _ := v.ToObjectValue(context.Background())
		attrs := o.Attributes()
		for _, name := range slices.Sorted(maps.Keys(attrs)) {
			// A null attribute of an object is a value like any other: only its collections' elements are refused.
			if a := attrs[name]; a != nil && !a.IsNull() {
				out = append(out, nullElements(p.AtName(name), a)...)
			}
		}
	}
	return out
}
