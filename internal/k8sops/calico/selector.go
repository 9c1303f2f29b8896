// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Calico's selector syntax (an IPPool's nodeSelector), checked as Calico's own parser checks it:
// crd.projectcalico.org/v1 stores any string, and a selector Calico cannot parse makes its IPAM
// skip the pool on every node. Calico's parser lives in a module whose dependencies the provider
// must not take on, so its grammar is restated here (libcalico-go/lib/selector):
//
//	or   := and { "||" and }
//	and  := op { "&&" op }
//	op   := { "!" } ( has(label) | all() | global() | "(" or ")"
//	        | label ("==" | "!=" | contains | starts with | ends with) string
//	        | label (in | not in) "{" [ string { "," string } ] "}" )
//
// Labels are runs of [A-Za-z0-9_./-] of at most 512 bytes; strings are quoted with ' or " and
// hold no escapes. An empty selector is valid (Calico reads it as all()).
package calico

import (
	"errors"
	"fmt"
	"strings"
)

// calicoMaxLabel is Calico's limit on a label's length in a selector.
const calicoMaxLabel = 512

type selTok int

const (
	selEOF selTok = iota
	selLabel
	selString
	selLBrace
	selRBrace
	selComma
	selCompare // ==, !=, contains, starts with, ends with
	selSetOp   // in, not in
	selNot
	selTerm // has(label), all(), global()
	selLParen
	selRParen
	selAnd
	selOr
)

// ValidateCalicoSelector reports why Calico would refuse s, or nil.
func ValidateCalicoSelector(s string) error {
	_, err := ParseCalicoSelector(s)
	return err
}

// CalicoSelector is a parsed Calico selector.
type CalicoSelector struct{ match selMatch }

// Matches reports whether a resource with these labels is selected, as Calico evaluates it
// (libcalico-go/lib/selector/parser/ast.go): == and the string operators need the label, != and
// not in hold when it is absent, all() and global() select everything.
func (s CalicoSelector) Matches(labels map[string]string) bool { return s.match(labels) }

type selMatch func(map[string]string) bool

// ParseCalicoSelector parses s as Calico does; an empty selector selects everything.
func ParseCalicoSelector(s string) (CalicoSelector, error) {
	toks, err := tokenizeCalicoSelector(s)
	if err != nil {
		return CalicoSelector{}, err
	}
	if toks[0].kind == selEOF {
		return CalicoSelector{func(map[string]string) bool { return true }}, nil
	}
	p := selParser{toks: toks}
	m, err := p.or()
	if err != nil {
		return CalicoSelector{}, err
	}
	if p.peek().kind != selEOF {
		return CalicoSelector{}, errors.New("unexpected content at the end of the selector")
	}
	return CalicoSelector{m}, nil
}

// selToken is a token and its text: a label, an unquoted string, an operator's words, or the
// function of a term (has, all, global) with its label after a space.
type selToken struct {
	kind selTok
	text string
}

type selParser struct {
	toks []selToken // always ends with selEOF
	i    int
}

func (p *selParser) peek() selToken { return p.toks[p.i] }
func (p *selParser) next() selToken { t := p.toks[p.i]; p.i = min(p.i+1, len(p.toks)-1); return t }

func (p *selParser) or() (selMatch, error) {
	var terms []selMatch
	for {
		m, err := p.and()
		if err != nil {
			return nil, err
		}
		terms = append(terms, m)
		if p.peek().kind != selOr {
			return joinSel(terms, true), nil
		}
		p.next()
	}
}

func (p *selParser) and() (selMatch, error) {
	var terms []selMatch
	for {
		m, err := p.op()
		if err != nil {
			return nil, err
		}
		terms = append(terms, m)
		if p.peek().kind != selAnd {
			return joinSel(terms, false), nil
		}
		p.next()
	}
}

// joinSel joins terms with || (or) or && (!or).
func joinSel(terms []selMatch, or bool) selMatch {
	if len(terms) == 1 {
		return terms[0]
	}
	return func(l map[string]string) bool {
		for _, t := range terms {
			if t(l) == or {
				return or
			}
		}
		return !or
	}
}

func (p *selParser) op() (selMatch, error) {
	negate := false
	for p.peek().kind == selNot {
		p.next()
		negate = !negate
	}
	m, err := p.operand()
	if err != nil || !negate {
		return m, err
	}
	return func(l map[string]string) bool { return !m(l) }, nil
}

func (p *selParser) operand() (selMatch, error) {
	switch t := p.next(); t.kind {
	case selTerm:
		if label, ok := strings.CutPrefix(t.text, "has "); ok {
			return func(l map[string]string) bool { _, ok := l[label]; return ok }, nil
		}
		return func(map[string]string) bool { return true }, nil // all(), global()
	case selLParen:
		m, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.next().kind != selRParen {
			return nil, errors.New("expected )")
		}
		return m, nil
	case selLabel:
		switch op := p.next(); op.kind {
		case selCompare:
			v := p.next()
			if v.kind != selString {
				return nil, errors.New("expected a quoted string after the operator")
			}
			return compareLabel(t.text, op.text, v.text), nil
		case selSetOp:
			set, err := p.set()
			if err != nil {
				return nil, err
			}
			in := op.text == "in"
			return func(l map[string]string) bool {
				v, ok := l[t.text]
				return ok && set[v] == in || !ok && !in
			}, nil
		default:
			return nil, errors.New("expected an operator after the label (==, !=, in, not in, contains, starts with, ends with)")
		}
	case selEOF:
		return nil, errors.New("unexpected end of the selector")
	default:
		return nil, errors.New("expected a label, has(), all(), global(), ! or (")
	}
}

// compareLabel is label op value; only != holds for a resource without the label.
func compareLabel(label, op, value string) selMatch {
	test := map[string]func(string, string) bool{
		"==": func(a, b string) bool { return a == b }, "contains": strings.Contains,
		"starts with": strings.HasPrefix, "ends with": strings.HasSuffix,
	}[op]
	if op == "!=" {
		return func(l map[string]string) bool { v, ok := l[label]; return !ok || v != value }
	}
	return func(l map[string]string) bool { v, ok := l[label]; return ok && test(v, value) }
}

func (p *selParser) set() (map[string]bool, error) {
	if p.next().kind != selLBrace {
		return nil, errors.New(`expected a set literal such as {"a", "b"}`)
	}
	set := map[string]bool{}
	for p.peek().kind == selString {
		set[p.next().text] = true
		if p.peek().kind != selComma {
			break
		}
		p.next()
	}
	if p.next().kind != selRBrace {
		return nil, errors.New("expected }")
	}
	return set, nil
}

// tokenizeCalicoSelector follows Calico's tokenizer: which words are operators depends on
// whether a label came just before.
func tokenizeCalicoSelector(in string) ([]selToken, error) {
	var toks []selToken
	for {
		in = strings.TrimLeft(in, " \t")
		if in == "" {
			return append(toks, selToken{kind: selEOF}), nil
		}
		afterLabel := len(toks) > 0 && toks[len(toks)-1].kind == selLabel
		var tok selToken
		var err error
		switch c := in[0]; {
		case c == '"' || c == '\'':
			end := strings.IndexByte(in[1:], c)
			if end < 0 {
				return nil, errors.New("unterminated string")
			}
			tok, in = selToken{selString, in[1 : end+1]}, in[end+2:]
		case strings.IndexByte("(){},", c) >= 0:
			tok, in = selToken{kind: map[byte]selTok{'(': selLParen, ')': selRParen, '{': selLBrace, '}': selRBrace, ',': selComma}[c]}, in[1:]
		case c == '!':
			if rest, ok := strings.CutPrefix(in, "!="); ok {
				tok, in = selToken{selCompare, "!="}, rest
			} else {
				tok, in = selToken{kind: selNot}, in[1:]
			}
		case c == '=' || c == '&' || c == '|':
			pair := string([]byte{c, c})
			rest, ok := strings.CutPrefix(in, pair)
			if !ok {
				return nil, fmt.Errorf("expected %s", pair)
			}
			tok, in = selToken{map[byte]selTok{'=': selCompare, '&': selAnd, '|': selOr}[c], pair}, rest
		case afterLabel:
			tok, in, err = cutSelectorOperator(in)
		default:
			tok, in, err = cutSelectorTerm(in)
		}
		if err != nil {
			return nil, err
		}
		toks = append(toks, tok)
	}
}

// cutSelectorOperator reads the word operator that must follow a label.
func cutSelectorOperator(in string) (selToken, string, error) {
	for _, op := range []struct {
		words []string
		tok   selTok
	}{
		{[]string{"contains"}, selCompare}, {[]string{"starts", "with"}, selCompare},
		{[]string{"ends", "with"}, selCompare}, {[]string{"not", "in"}, selSetOp}, {[]string{"in"}, selSetOp},
	} {
		if rest, ok := cutWords(in, op.words); ok {
			return selToken{op.tok, strings.Join(op.words, " ")}, rest, nil
		}
	}
	return selToken{}, in, errors.New("expected an operator after the label (==, !=, in, not in, contains, starts with, ends with)")
}

// cutWords cuts words (blanks allowed between them, as in "starts with" or "startswith") that
// end at a word boundary.
func cutWords(in string, words []string) (string, bool) {
	rest := in
	for i, w := range words {
		var ok bool
		if rest, ok = strings.CutPrefix(rest, w); !ok {
			return in, false
		}
		if i < len(words)-1 {
			rest = strings.TrimLeft(rest, " \t")
		}
	}
	if rest != "" && selectorLabelChar(rest[0]) {
		return in, false
	}
	return rest, true
}

// cutSelectorTerm reads has(label), all(), global() or a label.
func cutSelectorTerm(in string) (selToken, string, error) {
	for _, fn := range []string{"has(", "all(", "global("} {
		rest, ok := strings.CutPrefix(in, fn)
		if !ok {
			continue
		}
		tok := selToken{selTerm, strings.TrimSuffix(fn, "(")}
		rest = strings.TrimLeft(rest, " \t")
		if fn == "has(" {
			after, err := cutSelectorLabel(rest)
			if err != nil {
				return selToken{}, in, err
			}
			tok.text += " " + rest[:len(rest)-len(after)]
			rest = strings.TrimLeft(after, " \t")
		}
		if rest, ok = strings.CutPrefix(rest, ")"); !ok {
			return selToken{}, in, fmt.Errorf("no closing ) after %s", fn)
		}
		return tok, rest, nil
	}
	rest, err := cutSelectorLabel(in)
	return selToken{selLabel, in[:len(in)-len(rest)]}, rest, err
}

// cutSelectorLabel cuts the label in starts with.
func cutSelectorLabel(in string) (rest string, err error) {
	i := 0
	for i < len(in) && selectorLabelChar(in[i]) {
		i++
	}
	switch {
	case i == 0:
		if in == "" {
			return in, errors.New("expected a label")
		}
		return in, fmt.Errorf("unexpected character %q", in[0])
	case i > calicoMaxLabel:
		return in, fmt.Errorf("a label is at most %d characters", calicoMaxLabel)
	}
	return in[i:], nil
}

func selectorLabelChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' || c == '-'
}
