// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Findings: a problem with an input, tied to the attribute (or function argument) it is about by
// a path held as data. It is the one way k8sops reports a mistake in what it was given; the
// provider turns it into a diagnostic on that attribute.
package k8sops

import (
	"fmt"
	"slices"
	"strings"
)

// Finding is a problem tied to an input attribute; its Path is empty when no single attribute is
// at fault. It is also an error, for functions that return one.
type Finding struct {
	Path    Path
	Summary string
	Detail  string
}

func (f Finding) Error() string { return f.Summary + ": " + f.Detail }

// Path names an input attribute: a top-level name, then list indexes, map keys and nested
// attribute names, in order.
type Path struct{ Steps []PathStep }

// PathStep is one step of a Path: exactly one of Name (an attribute), Key (a map element) or
// Index (a list element, when IsIndex) is meaningful, as Kind says.
type PathStep struct {
	Kind  PathStepKind
	Name  string
	Key   string
	Index int
}

// PathStepKind says what a PathStep selects.
type PathStepKind int

// The kinds of PathStep.
const (
	StepAttr PathStepKind = iota
	StepKey
	StepIndex
	StepArg // a function's argument, counted from 0 in Index; only ever a path's one step
)

// At is the path of a top-level attribute.
func At(name string) Path { return Path{Steps: []PathStep{{Kind: StepAttr, Name: name}}} }

// Arg is the path of a function's argument, counted from 0.
func Arg(i int) Path { return Path{Steps: []PathStep{{Kind: StepArg, Index: i}}} }

// Argument is the function argument p names, if it names one.
func (p Path) Argument() (int, bool) {
	if len(p.Steps) == 1 && p.Steps[0].Kind == StepArg {
		return p.Steps[0].Index, true
	}
	return 0, false
}

// Attr is p followed by a nested attribute.
func (p Path) Attr(name string) Path { return p.with(PathStep{Kind: StepAttr, Name: name}) }

// Key is p followed by a map element.
func (p Path) Key(key string) Path { return p.with(PathStep{Kind: StepKey, Key: key}) }

// Index is p followed by a list element.
func (p Path) Index(i int) Path { return p.with(PathStep{Kind: StepIndex, Index: i}) }

func (p Path) with(s PathStep) Path {
	return Path{Steps: append(append(make([]PathStep, 0, len(p.Steps)+1), p.Steps...), s)}
}

// String writes the path as Terraform prints it: moves["app/web"].new_ips[0].
func (p Path) String() string {
	var b strings.Builder
	for i, s := range p.Steps {
		switch s.Kind {
		case StepAttr:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		case StepKey:
			fmt.Fprintf(&b, "[%q]", s.Key)
		case StepIndex:
			fmt.Fprintf(&b, "[%d]", s.Index)
		case StepArg:
			fmt.Fprintf(&b, "argument %d", s.Index)
		}
	}
	return b.String()
}

// bridgeUsersShown is how many names (pods, Services) a finding lists before "and N more".
const bridgeUsersShown = 10

// FirstOf lists the first bridgeUsersShown of names, sorted, and how many more there are.
func FirstOf(names []string) string {
	slices.Sort(names)
	shown := strings.Join(names[:min(len(names), bridgeUsersShown)], ", ")
	if len(names) > bridgeUsersShown {
		shown += fmt.Sprintf(" and %d more", len(names)-bridgeUsersShown)
	}
	return shown
}
