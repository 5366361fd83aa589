package sinks

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// subjectTemplate is a parsed NATS subject template such as
// "archiver.{table}.{kind}.{pk}": dot-separated tokens made of literal text
// and placeholders.
type subjectTemplate []subjectToken

type subjectToken []subjectPart

type subjectPart struct {
	lit  string
	name string // placeholder name when lit == ""
}

// parseSubject checks a template against NATS subject rules: no empty
// tokens, no whitespace or control characters, no wildcards (* and >), and
// balanced {placeholders}.
func parseSubject(s string) (subjectTemplate, error) {
	if s == "" {
		return nil, errors.New("empty subject template")
	}
	var tmpl subjectTemplate
	for i, tok := range strings.Split(s, ".") {
		if tok == "" {
			return nil, fmt.Errorf("%q: token %d is empty (subjects may not start or end with a dot or contain two in a row)", s, i+1)
		}
		var parts subjectToken
		for tok != "" {
			open := strings.IndexByte(tok, '{')
			if open < 0 {
				open = len(tok)
			}
			if lit := tok[:open]; lit != "" {
				for _, r := range lit {
					switch {
					case r == '}':
						return nil, fmt.Errorf("%q: unbalanced '}'", s)
					case r == '*' || r == '>':
						return nil, fmt.Errorf("%q: wildcard %q cannot be published to", s, r)
					case unicode.IsSpace(r) || unicode.IsControl(r):
						return nil, fmt.Errorf("%q: whitespace or control character %q is not allowed in a subject", s, r)
					}
				}
				parts = append(parts, subjectPart{lit: lit})
			}
			tok = tok[open:]
			if tok == "" {
				break
			}
			end := strings.IndexByte(tok, '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: unclosed '{'", s)
			}
			name := tok[1:end]
			if name == "" || strings.ContainsAny(name, "{.") {
				return nil, fmt.Errorf("%q: placeholder {%s} is not {table}, {kind} or {KEY_ATTRIBUTE}", s, name)
			}
			parts = append(parts, subjectPart{name: name})
			tok = tok[end+1:]
		}
		tmpl = append(tmpl, parts)
	}
	return tmpl, nil
}

// render builds the subject of e. Placeholder values are made into one
// valid token each: '.', '*', '>', whitespace and control characters become
// '_', an empty or missing value becomes "_", binary key values are
// unpadded base64url.
func (t subjectTemplate) render(e *event.Event) string {
	var b strings.Builder
	for i, tok := range t {
		if i > 0 {
			b.WriteByte('.')
		}
		for _, p := range tok {
			if p.name == "" {
				b.WriteString(p.lit)
				continue
			}
			var v string
			switch p.name {
			case "table":
				v = e.Table
			case "kind":
				v = string(e.Kind)
			default:
				switch av := e.Keys[p.name].(type) {
				case *types.AttributeValueMemberS:
					v = av.Value
				case *types.AttributeValueMemberN:
					v = av.Value
				case *types.AttributeValueMemberB:
					v = base64.RawURLEncoding.EncodeToString(av.Value)
				}
			}
			writeToken(&b, v)
		}
	}
	return b.String()
}

func writeToken(b *strings.Builder, v string) {
	if v == "" {
		b.WriteByte('_')
		return
	}
	for _, r := range v {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			b.WriteByte('_')
		} else {
			b.WriteRune(r)
		}
	}
}

// filter is the subject filter that captures every subject the template can
// render: each token with a placeholder becomes '*'.
func (t subjectTemplate) filter() string {
	toks := make([]string, len(t))
	for i, tok := range t {
		toks[i] = ""
		for _, p := range tok {
			if p.name != "" {
				toks[i] = "*"
				break
			}
			toks[i] += p.lit
		}
	}
	return strings.Join(toks, ".")
}
