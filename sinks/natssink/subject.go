package natssink

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats.go"

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

// Subject length limits. nats-server closes a connection whose protocol
// line is longer than its max_control_line (4 KiB by default), and nats.go
// then closes it for good; the PUB line holds the subject, a reply subject
// and two lengths besides, so subjects stay well below it.
const (
	// DefaultMaxSubject is the default cap on a rendered subject, in bytes.
	DefaultMaxSubject = 1024
	// MaxMaxSubject is the largest cap max-subject may set: a default
	// server's 4 KiB control line less room for the rest of the line.
	MaxMaxSubject = 3840
	// digestPrefix is how many bytes of a digested value's escaped form
	// the digest token keeps in front, for people reading subjects.
	digestPrefix = 16
	// digestMark separates the prefix from the hash in a digest token. An
	// escaped value never holds it ('%' is always followed by two hex
	// digits there), so a digest token never equals an escaped one.
	digestMark = "%~"
	// digestToken is the longest digest token: prefix, mark and the
	// SHA-256 in unpadded base64url.
	digestToken = digestPrefix + len(digestMark) + 43
)

// tokenBudget is how many bytes each placeholder's token may take so that
// every subject the template renders fits in maxLen bytes: what the literal
// text leaves, shared equally. It fails when that is less than a digest
// token, or the literal text alone is longer than maxLen.
func (t subjectTemplate) tokenBudget(maxLen int) (int, error) {
	lits, holes := len(t)-1, 0 // the dots
	for _, tok := range t {
		for _, p := range tok {
			if p.name == "" {
				lits += len(p.lit)
			} else {
				holes++
			}
		}
	}
	if holes == 0 {
		if lits > maxLen {
			return 0, fmt.Errorf("the template is %d bytes, over the cap of %d", lits, maxLen)
		}
		return maxLen, nil
	}
	budget := (maxLen - lits) / holes
	if budget < digestToken {
		return 0, fmt.Errorf("%d bytes leave %d per placeholder after the template's %d literal bytes; %d placeholders need at least %d", maxLen, budget, lits, holes, lits+holes*digestToken)
	}
	return budget, nil
}

// render builds the subject of e, at most maxLen bytes long (maxLen must be
// one tokenBudget accepts; 0 means DefaultMaxSubject).
//
// Each placeholder becomes one token that no other value gives (see
// appendToken); a missing key attribute becomes "_". So two events whose
// tables or keys differ get different subjects, as long as no token of the
// template holds two placeholders.
func (t subjectTemplate) render(e *event.Event, maxLen int) string {
	if maxLen <= 0 {
		maxLen = DefaultMaxSubject
	}
	budget, err := t.tokenBudget(maxLen)
	if err != nil {
		budget = digestToken // New refuses such a cap; stay valid anyway
	}
	var b strings.Builder
	b.Grow(64)
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
			appendToken(&b, v, budget)
		}
	}
	return b.String()
}

// appendToken writes the token of placeholder value v, at most budget
// bytes long. The mapping is injective:
//
//   - "" (a missing value) is "_", and the value "_" is "%5F";
//   - '%', '.', '*', '>', whitespace, characters that are not printable and
//     bytes that are not UTF-8 are percent-escaped, each byte as %XX
//     (upper-case hex); everything else is kept, so plain names and keys
//     (letters, digits, '-', '_', ':', '/', non-ASCII letters) read as
//     they are;
//   - a value whose escaped form is longer than budget becomes a digest
//     token: the escape of its first characters (up to 16 bytes), "%~",
//     and the SHA-256 of the value's text in unpadded base64url (43
//     characters).
//
// Percent-decoding an escaped token gives the value back; a token holding
// "%~" is a digest (the full key is in the Archiver-Keys header).
func appendToken(b *strings.Builder, v string, budget int) {
	if v == "" {
		b.WriteByte('_')
		return
	}
	if v == "_" {
		b.WriteString("%5F")
		return
	}
	if n := escapedLen(v); n <= budget {
		if n == len(v) {
			b.WriteString(v)
			return
		}
		appendEscaped(b, v)
		return
	}
	pre, n := 0, 0
	for pre < len(v) {
		r, size := nextRune(v, pre)
		w := size
		if escapes(r, size) {
			w *= 3
		}
		if n+w > digestPrefix {
			break
		}
		n += w
		pre += size
	}
	appendEscaped(b, v[:pre])
	b.WriteString(digestMark)
	sum := sha256.Sum256([]byte(v))
	var enc [43]byte
	base64.RawURLEncoding.Encode(enc[:], sum[:])
	b.Write(enc[:])
}

// escapes reports whether r (of size bytes in its encoding, RuneError of
// size 1 for a byte that is not UTF-8) is percent-escaped in a token.
func escapes(r rune, size int) bool {
	if r < utf8.RuneSelf {
		return r <= ' ' || r >= 0x7f || r == '%' || r == '.' || r == '*' || r == '>'
	}
	return (r == utf8.RuneError && size == 1) || unicode.IsSpace(r) || !unicode.IsPrint(r)
}

// nextRune decodes the character at v[i:]: a rune and its size, or
// RuneError and 1 for a byte that is not UTF-8.
func nextRune(v string, i int) (rune, int) {
	if c := v[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(v[i:])
}

// escapedLen is the length of v's escaped form.
func escapedLen(v string) int {
	n := 0
	for i := 0; i < len(v); {
		r, size := nextRune(v, i)
		if escapes(r, size) {
			n += 3 * size
		} else {
			n += size
		}
		i += size
	}
	return n
}

// appendEscaped writes v with the characters escapes names as %XX per
// byte.
func appendEscaped(b *strings.Builder, v string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(v); {
		r, size := nextRune(v, i)
		if !escapes(r, size) {
			b.WriteString(v[i : i+size])
		} else {
			for j := i; j < i+size; j++ {
				b.WriteByte('%')
				b.WriteByte(hex[v[j]>>4])
				b.WriteByte(hex[v[j]&0xf])
			}
		}
		i += size
	}
}

// validSubject reports why subject may not be published: longer than
// maxLen, empty, an empty token, a wildcard, or a space or ASCII control
// character (which would break the protocol line). The error wraps
// nats.ErrBadSubject.
func validSubject(subject string, maxLen int) error {
	if len(subject) > maxLen {
		return fmt.Errorf("%w: %d bytes, over the cap of %d (max-subject)", nats.ErrBadSubject, len(subject), maxLen)
	}
	prev := byte('.')
	for i := 0; i < len(subject); i++ {
		c := subject[i]
		switch {
		case c == '.' && prev == '.':
			return fmt.Errorf("%w: %q has an empty token", nats.ErrBadSubject, subject)
		case c <= ' ' || c == 0x7f || c == '*' || c == '>':
			return fmt.Errorf("%w: %q holds %q", nats.ErrBadSubject, subject, c)
		}
		prev = c
	}
	if prev == '.' {
		return fmt.Errorf("%w: %q is empty or ends with a dot", nats.ErrBadSubject, subject)
	}
	return nil
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
