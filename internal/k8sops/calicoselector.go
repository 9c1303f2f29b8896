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
package k8sops

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
	toks, err := tokenizeCalicoSelector(s)
	if err != nil {
		return err
	}
	if toks[0] == selEOF {
		return nil
	}
	p := selParser{toks: toks}
	if err := p.or(); err != nil {
		return err
	}
	if p.peek() != selEOF {
		return errors.New("unexpected content at the end of the selector")
	}
	return nil
}

type selParser struct {
	toks []selTok // always ends with selEOF
	i    int
}

func (p *selParser) peek() selTok { return p.toks[p.i] }
func (p *selParser) next() selTok { t := p.toks[p.i]; p.i = min(p.i+1, len(p.toks)-1); return t }

func (p *selParser) or() error {
	for {
		if err := p.and(); err != nil {
			return err
		}
		if p.peek() != selOr {
			return nil
		}
		p.next()
	}
}

func (p *selParser) and() error {
	for {
		if err := p.op(); err != nil {
			return err
		}
		if p.peek() != selAnd {
			return nil
		}
		p.next()
	}
}

func (p *selParser) op() error {
	for p.peek() == selNot {
		p.next()
	}
	switch p.next() {
	case selTerm:
		return nil
	case selLParen:
		if err := p.or(); err != nil {
			return err
		}
		if p.next() != selRParen {
			return errors.New("expected )")
		}
		return nil
	case selLabel:
		switch p.next() {
		case selCompare:
			if p.next() != selString {
				return errors.New("expected a quoted string after the operator")
			}
			return nil
		case selSetOp:
			return p.set()
		default:
			return errors.New("expected an operator after the label (==, !=, in, not in, contains, starts with, ends with)")
		}
	case selEOF:
		return errors.New("unexpected end of the selector")
	default:
		return errors.New("expected a label, has(), all(), global(), ! or (")
	}
}

func (p *selParser) set() error {
	if p.next() != selLBrace {
		return errors.New(`expected a set literal such as {"a", "b"}`)
	}
	for p.peek() == selString {
		p.next()
		if p.peek() != selComma {
			break
		}
		p.next()
	}
	if p.next() != selRBrace {
		return errors.New("expected }")
	}
	return nil
}

// tokenizeCalicoSelector follows Calico's tokenizer: which words are operators depends on
// whether a label came just before.
func tokenizeCalicoSelector(in string) ([]selTok, error) {
	var toks []selTok
	for {
		in = strings.TrimLeft(in, " \t")
		if in == "" {
			return append(toks, selEOF), nil
		}
		afterLabel := len(toks) > 0 && toks[len(toks)-1] == selLabel
		var tok selTok
		var err error
		switch c := in[0]; {
		case c == '"' || c == '\'':
			end := strings.IndexByte(in[1:], c)
			if end < 0 {
				return nil, errors.New("unterminated string")
			}
			tok, in = selString, in[end+2:]
		case strings.IndexByte("(){},", c) >= 0:
			tok, in = map[byte]selTok{'(': selLParen, ')': selRParen, '{': selLBrace, '}': selRBrace, ',': selComma}[c], in[1:]
		case c == '!':
			if rest, ok := strings.CutPrefix(in, "!="); ok {
				tok, in = selCompare, rest
			} else {
				tok, in = selNot, in[1:]
			}
		case c == '=' || c == '&' || c == '|':
			pair := string([]byte{c, c})
			rest, ok := strings.CutPrefix(in, pair)
			if !ok {
				return nil, fmt.Errorf("expected %s", pair)
			}
			tok, in = map[byte]selTok{'=': selCompare, '&': selAnd, '|': selOr}[c], rest
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
func cutSelectorOperator(in string) (selTok, string, error) {
	for _, op := range []struct {
		words []string
		tok   selTok
	}{
		{[]string{"contains"}, selCompare}, {[]string{"starts", "with"}, selCompare},
		{[]string{"ends", "with"}, selCompare}, {[]string{"not", "in"}, selSetOp}, {[]string{"in"}, selSetOp},
	} {
		if rest, ok := cutWords(in, op.words); ok {
			return op.tok, rest, nil
		}
	}
	return 0, in, errors.New("expected an operator after the label (==, !=, in, not in, contains, starts with, ends with)")
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
func cutSelectorTerm(in string) (selTok, string, error) {
	for _, fn := range []string{"has(", "all(", "global("} {
		rest, ok := strings.CutPrefix(in, fn)
		if !ok {
			continue
		}
		rest = strings.TrimLeft(rest, " \t")
		if fn == "has(" {
			var err error
			if rest, err = cutSelectorLabel(rest); err != nil {
				return 0, in, err
			}
			rest = strings.TrimLeft(rest, " \t")
		}
		if rest, ok = strings.CutPrefix(rest, ")"); !ok {
			return 0, in, fmt.Errorf("no closing ) after %s", fn)
		}
		return selTerm, rest, nil
	}
	rest, err := cutSelectorLabel(in)
	return selLabel, rest, err
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
