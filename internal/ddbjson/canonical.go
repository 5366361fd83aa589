package ddbjson

import (
	"bytes"
	"encoding/base64"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Canonical reads attribute values written exactly as [AppendItem] writes
// them, in one pass, and declines everything else: whitespace, escapes in
// attribute names, escapes in string values other than AppendString's
// own, invalid UTF-8, names out of strictly ascending order (so no name
// twice), base64 in any but its one canonical form, {"NULL":false}, any
// value [UnmarshalItem] would refuse. Whatever it reads, UnmarshalItem
// reads to the same value (FuzzCanonicalItem holds it to that), and the
// bytes it read are then the canonical JSON of that value.
//
// Every string it returns is its own copy: none refers to the document.
type Canonical struct {
	Scanner
	// Names interns attribute names, which repeat from item to item; nil
	// copies each.
	Names *Interner
	// Skip checks values as thoroughly but builds none: Item returns nil.
	Skip bool
}

// Interner hands out one string for repeated bytes (attribute names, and
// whatever else a caller passes to Intern), so that they are allocated
// once rather than once per item. It stops growing at maxInterned strings.
// It also holds the scratch buffer that checks base64 without building.
// The zero Interner is ready to use; a nil one copies every string.
type Interner struct {
	m       map[string]string
	scratch []byte
}

const maxInterned = 4096

// Intern returns b as a string, the same string for the same bytes.
func (in *Interner) Intern(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}

// String is Intern of a string the caller already holds: the same string
// for the same text, and s itself kept (no copy) the first time.
func (in *Interner) String(s string) string {
	if in == nil {
		return s
	}
	if c, ok := in.m[s]; ok {
		return c
	}
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}

// strictBase64 is the standard encoding that takes only the canonical
// form of a value (padding bits zero), the one AppendBase64 writes.
var strictBase64 = base64.StdEncoding.Strict()

// str reads a plain string (see [Scanner.Plain]) as a copy.
func (p *Canonical) str() (string, bool) {
	b, ok := p.Plain()
	if !ok {
		return "", false
	}
	return string(b), true
}

// escaped reads a string value (an S, or an SS member) that Plain
// declined: its escapes are taken when they are the ones AppendString
// writes, byte for byte, unquoted and written again to compare (items hold
// JSON documents, quotes and newlines; declining them sent whole lines to
// encoding/json). Anything else AppendString would write otherwise is
// declined: another escape of the same character (\u0041, \/), a raw
// U+2028, invalid UTF-8. Callers try str (or Plain, when checking) first,
// in place: it is inlined, and almost every string has no escape.
func (p *Canonical) escaped() (string, bool) {
	start := p.i
	if !p.skipString() {
		return "", false
	}
	raw := p.b[start:p.i]
	if bytes.IndexByte(raw, '\\') < 0 {
		return "", false // not an escape that Plain declined: a raw control byte, U+2028, invalid UTF-8
	}
	var scratch []byte
	if p.Names != nil {
		scratch = p.Names.scratch[:0]
	}
	u, ok := unquote(scratch, raw[1:len(raw)-1])
	if !ok {
		return "", false
	}
	s := string(u)
	again := AppendString(u[:0], s)
	if p.Names != nil {
		p.Names.scratch = again
	}
	return s, string(again) == string(raw)
}

// unquote appends to dst the text of a JSON string's content b (between
// its quotes), its escapes decoded as encoding/json decodes them
// (a lone surrogate as U+FFFD); false for a raw control byte or a bad
// escape. Other bytes are copied as they are, invalid UTF-8 too: text's
// check against AppendString declines what encoding/json would have
// replaced.
func unquote(dst, b []byte) ([]byte, bool) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c < 0x20:
			return nil, false
		case c != '\\':
			dst = append(dst, c)
			continue
		}
		if i++; i == len(b) {
			return nil, false
		}
		switch b[i] {
		case '"', '\\', '/':
			dst = append(dst, b[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n := hexRune(b[i+1:])
			if n == 0 {
				return nil, false
			}
			i += n
			if utf16.IsSurrogate(r) {
				r2, n2 := rune(-1), 0
				if i+2 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					r2, n2 = hexRune(b[i+3:])
				}
				if dec := utf16.DecodeRune(r, r2); n2 > 0 && dec != utf8.RuneError {
					r, i = dec, i+2+n2
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return nil, false
		}
	}
	return dst, true
}

// hexRune reads the four hex digits b starts with: the rune and 4, or 0
// and 0 when they are not there.
func hexRune(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, 0
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, 0
		}
		r = r<<4 | rune(c)
	}
	return r, 4
}

// Item reads a DynamoDB JSON object of attribute values (nil when
// skipping), its names in strictly ascending order, as AppendItem writes
// them.
func (p *Canonical) Item() (Item, bool) {
	if !p.Char('{') {
		return nil, false
	}
	var m Item
	if !p.Skip {
		m = Item{}
	}
	if p.Char('}') {
		return m, true
	}
	var prev []byte
	for {
		name, ok := p.Plain()
		if !ok || (prev != nil && string(prev) >= string(name)) || !p.Char(':') {
			return nil, false
		}
		prev = name
		if p.Skip {
			if !p.skipValue() {
				return nil, false
			}
		} else if m[p.Names.Intern(name)], ok = p.value(); !ok {
			return nil, false
		}
		if p.Char('}') {
			return m, true
		}
		if !p.Char(',') {
			return nil, false
		}
	}
}

// skipValue checks one attribute value as value reads it, building
// nothing.
func (p *Canonical) skipValue() bool {
	tb, ok := p.typeTag()
	if !ok {
		return false
	}
	switch string(tb) {
	case "S":
		if _, ok = p.Plain(); !ok {
			_, ok = p.escaped()
		}
	case "N":
		var b []byte
		b, ok = p.Plain()
		ok = ok && ValidNumber(string(b))
	case "B":
		var b []byte
		b, ok = p.Plain()
		ok = ok && p.base64OK(b)
	case "BOOL":
		ok = p.Lit("true") || p.Lit("false")
	case "NULL":
		ok = p.Lit("true")
	case "SS", "NS", "BS":
		ok = p.skipArray(func() bool {
			if tb[0] == 'S' {
				if _, ok := p.Plain(); ok {
					return true
				}
				_, ok := p.escaped()
				return ok
			}
			b, ok := p.Plain()
			return ok && ((tb[0] == 'N' && ValidNumber(string(b))) || (tb[0] == 'B' && p.base64OK(b)))
		})
	case "M":
		_, ok = p.Item()
	case "L":
		ok = p.skipArray(p.skipValue)
	default:
		return false
	}
	return ok && p.Char('}')
}

// typeTag reads the start of an attribute value, {"T":, and returns T.
// A one-letter T (S, N, B, M, L) is matched in place.
func (p *Canonical) typeTag() ([]byte, bool) {
	if i := p.i; i+5 <= len(p.b) && p.b[i] == '{' && p.b[i+1] == '"' && p.b[i+3] == '"' && p.b[i+4] == ':' {
		p.i += 5
		return p.b[i+2 : i+3], true
	}
	if !p.Lit(`{"`) {
		return nil, false
	}
	p.i-- // back to the type key's quote
	tb, ok := p.Plain()
	return tb, ok && p.Char(':')
}

// skipArray checks a JSON array whose elements elem checks.
func (p *Canonical) skipArray(elem func() bool) bool {
	if !p.Char('[') {
		return false
	}
	for n := 0; !p.Char(']'); n++ {
		if (n > 0 && !p.Char(',')) || !elem() {
			return false
		}
	}
	return true
}

// base64OK reports whether b is standard base64, as the strict
// base64.StdEncoding would take it (the one form AppendBase64 writes).
func (p *Canonical) base64OK(b []byte) bool {
	var scratch []byte
	if p.Names != nil {
		scratch = p.Names.scratch
	}
	n := base64.StdEncoding.DecodedLen(len(b))
	if cap(scratch) < n {
		scratch = make([]byte, n)
		if p.Names != nil {
			p.Names.scratch = scratch
		}
	}
	_, err := strictBase64.Decode(scratch[:n], b)
	return err == nil
}

// value reads one attribute value, {"T":V}.
func (p *Canonical) value() (types.AttributeValue, bool) {
	tb, ok := p.typeTag()
	if !ok {
		return nil, false
	}
	var av types.AttributeValue
	switch string(tb) { // compared only: no allocation
	case "S":
		s, ok := p.str()
		if !ok {
			s, ok = p.escaped()
		}
		av = &types.AttributeValueMemberS{Value: s}
		if !ok {
			return nil, false
		}
	case "N":
		s, ok := p.str()
		if !ok || !ValidNumber(s) {
			return nil, false
		}
		av = &types.AttributeValueMemberN{Value: s}
	case "B":
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		v, err := strictBase64.DecodeString(s)
		if err != nil {
			return nil, false
		}
		av = &types.AttributeValueMemberB{Value: v}
	case "BOOL":
		switch {
		case p.Lit("true"):
			av = &types.AttributeValueMemberBOOL{Value: true}
		case p.Lit("false"):
			av = &types.AttributeValueMemberBOOL{Value: false}
		default:
			return nil, false
		}
	case "NULL":
		if !p.Lit("true") {
			return nil, false
		}
		av = &types.AttributeValueMemberNULL{Value: true}
	case "SS", "NS", "BS":
		if av, ok = p.set(tb[0]); !ok {
			return nil, false
		}
	case "M":
		m, ok := p.Item()
		if !ok {
			return nil, false
		}
		av = &types.AttributeValueMemberM{Value: m}
	case "L":
		if av, ok = p.list(); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	return av, p.Char('}')
}

// set reads the array of an SS, NS or BS (typ 'S', 'N' or 'B').
func (p *Canonical) set(typ byte) (types.AttributeValue, bool) {
	if !p.Char('[') {
		return nil, false
	}
	ss := []string{}
	for !p.Char(']') {
		if len(ss) > 0 && !p.Char(',') {
			return nil, false
		}
		s, ok := p.str()
		if !ok && typ == 'S' {
			s, ok = p.escaped()
		}
		if !ok {
			return nil, false
		}
		ss = append(ss, s)
	}
	switch typ {
	case 'S':
		return &types.AttributeValueMemberSS{Value: ss}, true
	case 'N':
		for _, n := range ss {
			if !ValidNumber(n) {
				return nil, false
			}
		}
		return &types.AttributeValueMemberNS{Value: ss}, true
	}
	bs := make([][]byte, len(ss))
	for i, s := range ss {
		v, err := strictBase64.DecodeString(s)
		if err != nil {
			return nil, false
		}
		bs[i] = v
	}
	return &types.AttributeValueMemberBS{Value: bs}, true
}

// list reads the array of an L.
func (p *Canonical) list() (types.AttributeValue, bool) {
	if !p.Char('[') {
		return nil, false
	}
	l := []types.AttributeValue{}
	for !p.Char(']') {
		if len(l) > 0 && !p.Char(',') {
			return nil, false
		}
		av, ok := p.value()
		if !ok {
			return nil, false
		}
		l = append(l, av)
	}
	return &types.AttributeValueMemberL{Value: l}, true
}
