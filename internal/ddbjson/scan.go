package ddbjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Scanner is a cursor over one JSON document held in memory: the one
// tokenizer of the fast readers. Its methods come in two sets. The wire
// methods ([Scanner.SkipSpace], [Scanner.Object], [Scanner.Array],
// [Scanner.Str], [Scanner.Bool], [Scanner.Number]) take JSON as any
// writer spells it: whitespace between tokens, escapes in strings. The
// exact methods ([Scanner.Lit], [Scanner.Char], [Scanner.Plain]) take
// only the canonical spelling [AppendItem] writes: no whitespace, no
// escapes. Every method reports false, having consumed an unspecified
// part of the input, when the input does not continue as it reads; the
// caller then declines the whole document.
type Scanner struct {
	b []byte
	// s is b as one string (the same bytes, not a copy): Str's strings
	// without escapes are slices of it.
	s string
	i int
}

// NewScanner returns a Scanner at the start of b. The strings Str returns
// point into b (no copy is made), so b must never be written again while
// they are in use.
func NewScanner(b []byte) Scanner {
	return Scanner{b: b, s: unsafe.String(unsafe.SliceData(b), len(b))}
}

// Pos is the offset of the cursor in the document.
func (d *Scanner) Pos() int { return d.i }

// Rest is the document from the cursor on (part of it, not a copy).
func (d *Scanner) Rest() []byte { return d.b[d.i:] }

// Advance moves the cursor n bytes on (n at most len(Rest())).
func (d *Scanner) Advance(n int) { d.i += n }

// AtEnd reports whether nothing but whitespace is left.
func (d *Scanner) AtEnd() bool {
	d.SkipSpace()
	return d.i == len(d.b)
}

// SkipSpace skips JSON whitespace.
func (d *Scanner) SkipSpace() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// Object reads {"key": value, ...} (whitespace allowed), calling member
// for each key with the cursor at the value; member reads the value.
func (d *Scanner) Object(member func(key string) bool) bool {
	return d.seq('{', '}', func() bool {
		key, ok := d.Str()
		if !ok {
			return false
		}
		d.SkipSpace()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return false
		}
		d.i++
		d.SkipSpace()
		return member(key)
	})
}

// Array reads [value, ...] (whitespace allowed), calling elem with the
// cursor at each value.
func (d *Scanner) Array(elem func() bool) bool {
	return d.seq('[', ']', elem)
}

// seq reads open, elements separated by commas, and close.
func (d *Scanner) seq(open, close byte, elem func() bool) bool {
	d.SkipSpace()
	if d.i >= len(d.b) || d.b[d.i] != open {
		return false
	}
	d.i++
	d.SkipSpace()
	if d.i < len(d.b) && d.b[d.i] == close {
		d.i++
		return true
	}
	for {
		d.SkipSpace()
		if !elem() {
			return false
		}
		d.SkipSpace()
		if d.i >= len(d.b) {
			return false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case close:
			d.i++
			return true
		default:
			return false
		}
	}
}

// Str reads a JSON string. One without escapes is a slice of the
// document, its bytes as they are (as the SDK takes them); one with
// escapes is unquoted by encoding/json, whose rules the SDK's unquoting
// copies.
func (d *Scanner) Str() (string, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	start := d.i + 1
	j := start
	// Eight bytes per step while none is '"', '\\' or a control byte.
	for j+8 <= len(d.b) {
		v := binary.LittleEndian.Uint64(d.b[j:])
		if hasLess(v, 0x20)|hasByte(v, '"')|hasByte(v, '\\') != 0 {
			break
		}
		j += 8
	}
	escaped := false
	for ; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			if !escaped {
				return d.s[start:j], true
			}
			var s string
			if err := json.Unmarshal(d.b[start-1:j+1], &s); err != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			escaped = true
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return "", false // invalid JSON
		}
	}
	return "", false
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasLess reports (non-zero) whether a byte of v is below n (n <= 128).
func hasLess(v uint64, n byte) uint64 { return (v - ones*uint64(n)) &^ v & highs }

// hasByte reports (non-zero) whether a byte of v is c.
func hasByte(v uint64, c byte) uint64 {
	x := v ^ (ones * uint64(c))
	return (x - ones) &^ x & highs
}

// Bool reads true or false.
func (d *Scanner) Bool() (bool, bool) {
	rest := d.b[d.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		d.i += 4
		return true, d.delimited()
	case bytes.HasPrefix(rest, []byte("false")):
		d.i += 5
		return false, d.delimited()
	}
	return false, false
}

// delimited reports whether the token just read ends where it should.
func (d *Scanner) delimited() bool {
	if d.i == len(d.b) {
		return true
	}
	switch d.b[d.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// Number reads a JSON number token (grammar checked by [IsJSONNumber])
// and reports whether it is a plain integer.
func (d *Scanner) Number() (tok string, integer bool, ok bool) {
	start, j := d.i, d.i
	for j < len(d.b) && isNumberByte(d.b[j]) {
		j++
	}
	tok = d.s[start:j]
	if !IsJSONNumber(tok) {
		return "", false, false
	}
	d.i = j
	return tok, !strings.ContainsAny(tok, ".eE"), d.delimited()
}

// isNumberByte reports whether c may appear in a JSON number.
func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// Lit consumes s if the input continues with it, byte for byte.
func (d *Scanner) Lit(s string) bool {
	if len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return false
	}
	d.i += len(s)
	return true
}

// Char consumes c if the input continues with it.
func (d *Scanner) Char(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// Plain reads a JSON string as [AppendString] writes it when it escapes
// nothing: no escapes, valid UTF-8, no U+2028 or U+2029 (which
// AppendString escapes). It returns the string's bytes (part of the
// document, not a copy).
func (d *Scanner) Plain() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	start := d.i + 1
	if n, ok := plainString(d.b[start:]); ok {
		d.i = start + n + 1
		return d.b[start : start+n], true
	}
	ascii := true
	for i := start; i < len(d.b); i++ {
		switch c := d.b[i]; {
		case c == '"':
			s := d.b[start:i]
			if !ascii && (!utf8.Valid(s) || bytes.Contains(s, []byte(lineSep)) || bytes.Contains(s, []byte(paraSep))) {
				return nil, false // AppendString escapes U+2028 and U+2029
			}
			d.i = i + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// lineSep and paraSep are U+2028 and U+2029, which AppendString writes
// escaped.
const lineSep, paraSep = "\u2028", "\u2029"

// plainString finds the closing quote of a JSON string whose content b
// starts with, eight bytes at a time, and returns the content's length;
// ok is false when the content is not plain (a byte below 0x20, above
// 0x7f or a backslash comes first: Plain then looks byte by byte) or has
// no end.
//
// Per word, the masks below have the high bit of a byte set where that
// byte matches; the lowest set bit of each is exact (a false match can
// only come after a true one), which is all that is read.
func plainString(b []byte) (n int, ok bool) {
	for ; n+8 <= len(b); n += 8 {
		v := binary.LittleEndian.Uint64(b[n:])
		q := v ^ '"'*ones
		quote := (q - ones) &^ q & highs
		x := v ^ '\\'*ones
		special := (v | (v-0x20*ones)&^v | (x-ones)&^x) & highs
		if quote != 0 {
			at := bits.TrailingZeros64(quote)
			if special != 0 && bits.TrailingZeros64(special) < at {
				return 0, false
			}
			return n + at/8, true
		}
		if special != 0 {
			return 0, false
		}
	}
	for ; n < len(b); n++ {
		switch c := b[n]; {
		case c == '"':
			return n, true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return 0, false
		}
	}
	return 0, false
}

// Members reads an object as [Scanner.Object] does but decodes none of
// its values: fn gets each key and the bounds (offsets in the document)
// of its value, which [Scanner.SkipValue] found. It stops when fn returns
// false.
func (d *Scanner) Members(fn func(key string, start, end int) bool) bool {
	return d.Object(func(key string) bool {
		start := d.i
		return d.SkipValue() && fn(key, start, d.i)
	})
}

// Elements reads an array, calling fn with the bounds of each element
// (see [Scanner.Members]), and reports whether nothing but whitespace
// follows it.
func (d *Scanner) Elements(fn func(start, end int)) bool {
	ok := d.Array(func() bool {
		start := d.i
		if !d.SkipValue() {
			return false
		}
		fn(start, d.i)
		return true
	})
	return ok && d.AtEnd()
}

// SkipValue moves past one value, checking only its structure: a string,
// an object or array with matching brackets (nesting is counted, not
// recursed into, so no depth can exhaust the stack), or a scalar (any
// bytes up to a delimiter).
func (d *Scanner) SkipValue() bool {
	var stack []byte
	for {
		if d.i >= len(d.b) {
			return false
		}
		switch c := d.b[d.i]; c {
		case '"':
			if !d.skipString() {
				return false
			}
		case '{', '[':
			stack = append(stack, c+2) // '{'+2 is '}', '['+2 is ']'
			d.i++
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return false
			}
			stack = stack[:len(stack)-1]
			d.i++
		case ',', ':', ' ', '\t', '\n', '\r':
			if len(stack) == 0 {
				return false
			}
			d.i++
		default:
			start := d.i
			for d.i < len(d.b) && !isDelimiter(d.b[d.i]) {
				d.i++
			}
			if d.i == start {
				return false
			}
		}
		if len(stack) == 0 {
			return true
		}
	}
}

// skipString moves past a string token, escapes included.
func (d *Scanner) skipString() bool {
	for j := d.i + 1; j < len(d.b); j++ {
		switch d.b[j] {
		case '\\':
			j++
		case '"':
			d.i = j + 1
			return true
		}
	}
	return false
}

func isDelimiter(c byte) bool {
	switch c {
	case '"', '{', '}', '[', ']', ',', ':', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
