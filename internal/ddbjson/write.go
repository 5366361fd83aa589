package ddbjson

import (
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// AppendItem appends the DynamoDB JSON of item to dst and returns the
// extended buffer: attribute names (and map keys) in sorted order, so the
// same item always renders to the same bytes. A nil item renders as null.
func AppendItem(dst []byte, item Item) []byte {
	return appendObject(dst, item, AppendAV)
}

// appendObject appends item as a JSON object with its attributes in name
// order (so an event always renders to the same bytes), each value
// rendered by value. A nil item renders as null.
func appendObject(dst []byte, item Item, value func([]byte, types.AttributeValue) []byte) []byte {
	if item == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	var arr [16]attr
	for i, a := range sortedAttrs(item, arr[:0]) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, a.name)
		dst = append(dst, ':')
		dst = value(dst, a.value)
	}
	return append(dst, '}')
}

// AppendAV appends the DynamoDB JSON of one attribute value, e.g.
// {"N":"42"}, to dst. A value of a member type this package does not know
// (a future SDK type) or nil renders as {"NULL":true}: valid JSON, visibly
// marked, rather than a dropped attribute.
func AppendAV(dst []byte, av types.AttributeValue) []byte {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		dst = append(dst, `{"S":`...)
		dst = AppendString(dst, v.Value)
	case *types.AttributeValueMemberN:
		dst = append(dst, `{"N":`...)
		dst = AppendString(dst, v.Value)
	case *types.AttributeValueMemberB:
		dst = append(dst, `{"B":`...)
		dst = AppendBase64(dst, v.Value)
	case *types.AttributeValueMemberBOOL:
		if v.Value {
			return append(dst, `{"BOOL":true}`...)
		}
		return append(dst, `{"BOOL":false}`...)
	case *types.AttributeValueMemberNULL:
		return append(dst, `{"NULL":true}`...)
	case *types.AttributeValueMemberSS:
		dst = append(dst, `{"SS":`...)
		dst = appendStrings(dst, v.Value)
	case *types.AttributeValueMemberNS:
		dst = append(dst, `{"NS":`...)
		dst = appendStrings(dst, v.Value)
	case *types.AttributeValueMemberBS:
		dst = append(dst, `{"BS":[`...)
		for i, b := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendBase64(dst, b)
		}
		dst = append(dst, ']')
	case *types.AttributeValueMemberM:
		dst = append(dst, `{"M":`...)
		dst = AppendMap(dst, v.Value)
	case *types.AttributeValueMemberL:
		dst = append(dst, `{"L":[`...)
		for i, e := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendAV(dst, e)
		}
		dst = append(dst, ']')
	default:
		// An unknown member (a future SDK type) or nil: keep the output
		// valid JSON and visibly marked rather than dropping the attribute.
		return append(dst, `{"NULL":true}`...)
	}
	return append(dst, '}')
}

// AppendMap is AppendItem for a map's value: a nil item renders as {}
// (an empty map), not null.
func AppendMap(dst []byte, item Item) []byte {
	if item == nil {
		return append(dst, "{}"...)
	}
	return AppendItem(dst, item)
}

// AppendPlain appends item as ordinary JSON: N as a JSON number literal
// with DynamoDB's exact digits, B as a base64 string, sets as arrays, NULL
// as null. A nil item renders as null.
func AppendPlain(dst []byte, item Item) []byte {
	return appendObject(dst, item, appendPlain)
}

func appendPlain(dst []byte, av types.AttributeValue) []byte {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return AppendString(dst, v.Value)
	case *types.AttributeValueMemberN:
		return appendNumber(dst, v.Value)
	case *types.AttributeValueMemberB:
		return AppendBase64(dst, v.Value)
	case *types.AttributeValueMemberBOOL:
		return strconv.AppendBool(dst, v.Value)
	case *types.AttributeValueMemberNULL:
		return append(dst, "null"...)
	case *types.AttributeValueMemberSS:
		return appendStrings(dst, v.Value)
	case *types.AttributeValueMemberNS:
		dst = append(dst, '[')
		for i, n := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendNumber(dst, n)
		}
		return append(dst, ']')
	case *types.AttributeValueMemberBS:
		dst = append(dst, '[')
		for i, b := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendBase64(dst, b)
		}
		return append(dst, ']')
	case *types.AttributeValueMemberM:
		if v.Value == nil {
			return append(dst, "{}"...)
		}
		return AppendPlain(dst, v.Value)
	case *types.AttributeValueMemberL:
		dst = append(dst, '[')
		for i, e := range v.Value {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPlain(dst, e)
		}
		return append(dst, ']')
	}
	return append(dst, "null"...)
}

// appendNumber writes a DynamoDB number as a JSON number literal with the
// same digits. DynamoDB's own spellings that JSON does not allow (a leading
// "+", ".5", "5.", leading zeros) are repaired without changing the value;
// anything that is not a number at all is written as a string so the output
// stays valid JSON.
func appendNumber(dst []byte, n string) []byte {
	if IsJSONNumber(n) {
		return append(dst, n...)
	}
	if fixed, ok := jsonNumber(n); ok {
		return append(dst, fixed...)
	}
	return AppendString(dst, n)
}

// IsJSONNumber reports whether s matches JSON's number grammar (RFC 8259:
// no leading zeros, no '+', digits after '.' and after the exponent).
func IsJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return false
	}
	if s[i] == '0' {
		i++
	} else if s[i] >= '1' && s[i] <= '9' {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return exponentRest(s, i)
}

// jsonNumber rewrites a valid DynamoDB number into JSON's grammar.
func jsonNumber(s string) (string, bool) {
	if !ValidNumber(s) {
		return "", false
	}
	neg := false
	switch s[0] {
	case '-':
		neg = true
		s = s[1:]
	case '+':
		s = s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i:]
	}
	intPart, frac, hasDot := strings.Cut(mant, ".")
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	out := intPart
	if hasDot && frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	out += exp
	return out, IsJSONNumber(out)
}

// ValidNumber reports whether s is a decimal number as DynamoDB accepts it
// in an N value: an optional sign, digits with an optional decimal point, an
// optional exponent. It checks the spelling only, not DynamoDB's range and
// precision limits.
func ValidNumber(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	return exponentRest(s, i)
}

type attr struct {
	name  string
	value types.AttributeValue
}

// sortedAttrs returns m's attributes sorted by name, in buf when it is
// large enough (callers pass a stack array, so small items allocate
// nothing and no attribute is looked up twice).
func sortedAttrs(m Item, buf []attr) []attr {
	attrs := buf[:0]
	for k, v := range m {
		attrs = append(attrs, attr{k, v})
	}
	switch {
	case len(attrs) <= 1:
	case len(attrs) <= 16:
		// Insertion sort: items are small, and comparing in place beats
		// the generic sort's calls through a comparison function.
		for i := 1; i < len(attrs); i++ {
			for j := i; j > 0 && attrs[j].name < attrs[j-1].name; j-- {
				attrs[j], attrs[j-1] = attrs[j-1], attrs[j]
			}
		}
	default:
		slices.SortFunc(attrs, func(a, b attr) int { return strings.Compare(a.name, b.name) })
	}
	return attrs
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, s)
	}
	return append(dst, ']')
}

// AppendBase64 appends b as a quoted standard base64 string, the bytes
// base64.StdEncoding writes. Binary attributes are often the bulk of an
// item, so it encodes six bytes per step from one 8-byte load (about a
// third of the standard encoder's instructions); the standard encoder
// writes the last bytes and the padding.
func AppendBase64(dst []byte, b []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(b))
	dst = slices.Grow(dst, n+2)
	dst = append(dst, '"')
	start := len(dst)
	dst = dst[:start+n]
	out := dst[start:]
	i, o := 0, 0
	for ; i+8 <= len(b) && o+8 <= len(out); i, o = i+6, o+8 {
		x := binary.BigEndian.Uint64(b[i:])
		w := out[o : o+8 : o+8]
		w[0] = base64Std[x>>58]
		w[1] = base64Std[x>>52&63]
		w[2] = base64Std[x>>46&63]
		w[3] = base64Std[x>>40&63]
		w[4] = base64Std[x>>34&63]
		w[5] = base64Std[x>>28&63]
		w[6] = base64Std[x>>22&63]
		w[7] = base64Std[x>>16&63]
	}
	base64.StdEncoding.Encode(out[o:], b[i:])
	return append(dst, '"')
}

// base64Std is the alphabet of base64.StdEncoding.
const base64Std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

const hexDigits = "0123456789abcdef"

// jsonSafe[c] reports whether AppendString copies byte c as it is: ASCII
// from 0x20 up except '"' and '\\'. It is a constant table.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes it (U+2028 and U+2029 included). Invalid UTF-8 (which DynamoDB
// never stores) becomes U+FFFD, as encoding/json does.
func AppendString(dst []byte, s string) []byte {
	// Most strings (names, keys, ARNs, numbers) need no escaping: find out
	// in one pass, then copy them whole.
	i := 0
	for i+8 <= len(s) && !needsEscape8(load8(s[i:i+8])) {
		i += 8
	}
	for i < len(s) && jsonSafe[s[i]] {
		i++
	}
	if i == len(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	return appendStringEscaped(dst, s, i)
}

// appendStringEscaped is AppendString for a string whose bytes before i
// need no escaping and whose byte i may.
func appendStringEscaped(dst []byte, s string, i int) []byte {
	dst = append(dst, '"')
	start := 0
	for i < len(s) {
		// Fast path: skip 8 bytes at a time while none of them needs
		// escaping or UTF-8 checking (control, '"', '\\', non-ASCII).
		for i+8 <= len(s) && !needsEscape8(load8(s[i:i+8])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// load8 packs the 8 bytes of w (little-endian): one load, since w's length
// is known to the compiler.
func load8(w string) uint64 {
	_ = w[7]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// needsEscape8 reports whether any of the 8 bytes packed in x is below
// 0x20, '"', '\\' or 0x80 and above. It may not say which; the caller then
// looks at the bytes one by one.
func needsEscape8(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	less := (x - lo*0x20) & ^x // a byte below 0x20
	q := x ^ (lo * '"')        // a zero byte where x has '"'
	bs := x ^ (lo * '\\')      // a zero byte where x has '\\'
	zero := (q-lo) & ^q | (bs-lo)&^bs
	return (less|zero|x)&hi != 0
}

// exponentRest reports whether s[i:] is empty or an exponent (e or E, an
// optional sign, at least one digit) that ends the string.
func exponentRest(s string, i int) bool {
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(s)
}
