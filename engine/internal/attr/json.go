package attr

import (
	"encoding/base64"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// MaxDepth is how deeply M and L values may nest (DynamoDB allows 32 levels).
const MaxDepth = 32

// MarshalJSON encodes v as DynamoDB JSON: {"S":"x"}, {"N":"1.5"},
// {"B":"base64"}, {"SS":[...]}, {"M":{...}}, {"L":[...]}, {"NULL":true},
// {"BOOL":false}. Map keys are written in sorted order.
func (v Value) MarshalJSON() ([]byte, error) { return v.AppendJSON(nil), nil }

// AppendJSON appends v's DynamoDB JSON to dst.
func (v Value) AppendJSON(dst []byte) []byte {
	switch v.T {
	case S:
		dst = append(dst, `{"S":`...)
		dst = appendString(dst, v.S)
	case N:
		dst = append(dst, `{"N":`...)
		dst = appendString(dst, v.S)
	case B:
		dst = append(dst, `{"B":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, v.B)
		dst = append(dst, '"')
	case BOOL:
		if v.Bool {
			return append(dst, `{"BOOL":true}`...)
		}
		return append(dst, `{"BOOL":false}`...)
	case NULL:
		return append(dst, `{"NULL":true}`...)
	case SS, NS:
		if v.T == SS {
			dst = append(dst, `{"SS":[`...)
		} else {
			dst = append(dst, `{"NS":[`...)
		}
		for i, s := range v.SS {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		dst = append(dst, ']')
	case BS:
		dst = append(dst, `{"BS":[`...)
		for i, b := range v.BS {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, b)
			dst = append(dst, '"')
		}
		dst = append(dst, ']')
	case M:
		dst = append(dst, `{"M":`...)
		dst = AppendItemJSON(dst, v.M)
	case L:
		dst = append(dst, `{"L":[`...)
		for i, x := range v.L {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = x.AppendJSON(dst)
		}
		dst = append(dst, ']')
	default:
		// An unset Value has no DynamoDB form; NULL is the closest harmless one.
		return append(dst, `{"NULL":true}`...)
	}
	return append(dst, '}')
}

// AppendItemJSON appends an item (or a map's contents) as a JSON object of
// attribute values, keys sorted.
func AppendItemJSON(dst []byte, it Item) []byte {
	dst = append(dst, '{')
	if len(it) == 1 {
		for k, x := range it {
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = x.AppendJSON(dst)
		}
	} else if len(it) > 1 {
		var buf [16]string
		keys := buf[:0]
		for k := range it {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = it[k].AppendJSON(dst)
		}
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
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
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// UnmarshalJSON decodes one DynamoDB JSON attribute value, strictly: exactly
// one type key; N a valid number (stored canonical); B and BS valid base64;
// sets non-empty and without duplicates (NS compared numerically); NULL must
// be true; M and L nested at most MaxDepth levels. Members set to JSON null
// count as absent and unknown members are ignored, as in DynamoDB. Errors
// are *awserr.Error ValidationExceptions worded like DynamoDB's.
func (v *Value) UnmarshalJSON(b []byte) error {
	d := decoder{b: b}
	d.ws()
	x, err := d.value(0)
	if err != nil {
		return err
	}
	d.ws()
	if d.i != len(d.b) {
		return d.syntax()
	}
	*v = x
	return nil
}

// UnmarshalItemJSON decodes a JSON object of attribute values (an Item, a
// Key, ExpressionAttributeValues) with UnmarshalJSON's rules. A JSON null
// yields a nil Item.
func UnmarshalItemJSON(b []byte) (Item, error) {
	d := decoder{b: b}
	d.ws()
	if d.lit("null") {
		d.ws()
		if d.i != len(d.b) {
			return nil, d.syntax()
		}
		return nil, nil
	}
	it, err := d.object(0)
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i != len(d.b) {
		return nil, d.syntax()
	}
	return it, nil
}

// Messages DynamoDB sends for malformed attribute values.
const (
	msgEmptyValue   = "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
	msgMultiValue   = "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes"
	msgNullFalse    = "One or more parameter values were invalid: Null attribute value types must have the value of true"
	msgNesting      = "Nesting Levels have exceeded supported limits"
	msgInvalidParam = "One or more parameter values were invalid: "
)

type decoder struct {
	b []byte
	i int
}

func (d *decoder) syntax() error {
	if d.i >= len(d.b) {
		return awserr.New(awserr.CodeSerialization, "Unexpected end of JSON input in attribute value")
	}
	return awserr.Newf(awserr.CodeSerialization, "Unexpected character (%q) at offset %d of the attribute value", d.b[d.i], d.i)
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) lit(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

func (d *decoder) expect(c byte) error {
	d.ws()
	if d.peek() != c {
		return d.syntax()
	}
	d.i++
	return nil
}

// str reads a JSON string at the cursor.
func (d *decoder) str() (string, error) {
	d.ws()
	if d.peek() != '"' {
		return "", d.syntax()
	}
	d.i++
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			s := d.b[start:d.i]
			d.i++
			if utf8.Valid(s) {
				return string(s), nil
			}
			return strings.ToValidUTF8(string(s), "\uFFFD"), nil
		}
		if c == '\\' {
			return d.slowStr(start)
		}
		if c < 0x20 {
			return "", d.syntax()
		}
		d.i++
	}
	return "", d.syntax()
}

// slowStr decodes a string with escapes; d.i is at the first backslash.
func (d *decoder) slowStr(start int) (string, error) {
	buf := make([]byte, 0, d.i-start+16)
	buf = append(buf, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if utf8.Valid(buf) {
				return string(buf), nil
			}
			return strings.ToValidUTF8(string(buf), "\uFFFD"), nil
		case c < 0x20:
			return "", d.syntax()
		case c != '\\':
			buf = append(buf, c)
			d.i++
			continue
		}
		d.i++
		if d.i >= len(d.b) {
			return "", d.syntax()
		}
		e := d.b[d.i]
		d.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", d.syntax()
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				save := d.i
				if d.lit(`\u`) {
					if x, ok := d.hex4(); ok {
						r2 = x
					}
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
				} else {
					d.i = save
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			d.i--
			return "", d.syntax()
		}
	}
	return "", d.syntax()
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	var r rune
	for k := 0; k < 4; k++ {
		c := d.b[d.i+k]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

// skip skips any JSON value (for unknown members).
func (d *decoder) skip(depth int) error {
	if depth > 2*MaxDepth+8 {
		return awserr.Validation(msgNesting)
	}
	d.ws()
	switch c := d.peek(); {
	case c == '"':
		_, err := d.str()
		return err
	case c == '{':
		d.i++
		d.ws()
		if d.peek() == '}' {
			d.i++
			return nil
		}
		for {
			if _, err := d.str(); err != nil {
				return err
			}
			if err := d.expect(':'); err != nil {
				return err
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.ws()
			switch d.peek() {
			case ',':
				d.i++
			case '}':
				d.i++
				return nil
			default:
				return d.syntax()
			}
		}
	case c == '[':
		d.i++
		d.ws()
		if d.peek() == ']' {
			d.i++
			return nil
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.ws()
			switch d.peek() {
			case ',':
				d.i++
			case ']':
				d.i++
				return nil
			default:
				return d.syntax()
			}
		}
	case d.lit("true"), d.lit("false"), d.lit("null"):
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return d.syntax()
}

// number skips a JSON number, strictly by JSON's grammar (no leading
// zeros, no bare dot, digits after the dot and the exponent), so that the
// decoder accepts no body that encoding/json would refuse.
func (d *decoder) number() error {
	start := d.i
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.peek() == '-' {
		d.i++
	}
	switch {
	case d.peek() == '0':
		d.i++
	case digits() == 0:
		d.i = start
		return d.syntax()
	}
	if d.peek() == '.' {
		d.i++
		if digits() == 0 {
			return d.syntax()
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.i++
		if c := d.peek(); c == '+' || c == '-' {
			d.i++
		}
		if digits() == 0 {
			return d.syntax()
		}
	}
	return nil
}

// countMembers estimates the members of the object whose first member
// starts at the cursor, so its map is allocated once: it counts the commas
// at the object's own nesting level, up to a bound.
func (d *decoder) countMembers() int {
	n, depth := 1, 0
	for i := d.i; i < len(d.b); i++ {
		switch d.b[i] {
		case '"':
			for i++; i < len(d.b) && d.b[i] != '"'; i++ {
				if d.b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return n
			}
			depth--
		case ',':
			if depth == 0 {
				if n++; n == 64 {
					return n
				}
			}
		}
	}
	return n
}

// isNull consumes a JSON null if one is at the cursor.
func (d *decoder) isNull() bool {
	d.ws()
	return d.lit("null")
}

// value decodes {"<T>": payload}.
func (d *decoder) value(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, awserr.Validation(msgNesting)
	}
	if err := d.expect('{'); err != nil {
		return Value{}, err
	}
	var v Value
	set := 0
	d.ws()
	if d.peek() == '}' {
		d.i++
		return Value{}, awserr.Validation(msgEmptyValue)
	}
	for {
		key, err := d.str()
		if err != nil {
			return Value{}, err
		}
		if err := d.expect(':'); err != nil {
			return Value{}, err
		}
		t, known := ParseType(key)
		switch {
		case !known:
			if err := d.skip(depth); err != nil {
				return Value{}, err
			}
		case d.isNull():
			// absent
		default:
			x, err := d.payload(t, depth)
			if err != nil {
				return Value{}, err
			}
			set++
			v = x
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
			continue
		case '}':
			d.i++
		default:
			return Value{}, d.syntax()
		}
		break
	}
	switch set {
	case 0:
		return Value{}, awserr.Validation(msgEmptyValue)
	case 1:
		return v, nil
	}
	return Value{}, awserr.Validation(msgMultiValue)
}

func (d *decoder) payload(t Type, depth int) (Value, error) {
	switch t {
	case S:
		s, err := d.str()
		return Value{T: S, S: s}, err
	case N:
		s, err := d.str()
		if err != nil {
			return Value{}, err
		}
		c, msg := canonicalNumber(s)
		if msg != "" {
			return Value{}, numberError(s, msg)
		}
		return Value{T: N, S: c}, nil
	case B:
		b, err := d.base64()
		return Value{T: B, B: b}, err
	case BOOL:
		d.ws()
		switch {
		case d.lit("true"):
			return Value{T: BOOL, Bool: true}, nil
		case d.lit("false"):
			return Value{T: BOOL}, nil
		}
		return Value{}, d.syntax()
	case NULL:
		d.ws()
		switch {
		case d.lit("true"):
			return Value{T: NULL}, nil
		case d.lit("false"):
			return Value{}, awserr.Validation(msgNullFalse)
		}
		return Value{}, d.syntax()
	case SS, NS, BS:
		return d.set(t)
	case M:
		m, err := d.object(depth + 1)
		return Value{T: M, M: m}, err
	case L:
		if err := d.expect('['); err != nil {
			return Value{}, err
		}
		l := []Value{}
		d.ws()
		if d.peek() == ']' {
			d.i++
			return Value{T: L, L: l}, nil
		}
		for {
			x, err := d.value(depth + 1)
			if err != nil {
				return Value{}, err
			}
			l = append(l, x)
			d.ws()
			switch d.peek() {
			case ',':
				d.i++
				continue
			case ']':
				d.i++
				return Value{T: L, L: l}, nil
			}
			return Value{}, d.syntax()
		}
	}
	return Value{}, d.syntax()
}

// object decodes {"name": value, ...}; depth is that of its values.
func (d *decoder) object(depth int) (Item, error) {
	if depth > MaxDepth {
		return nil, awserr.Validation(msgNesting)
	}
	if err := d.expect('{'); err != nil {
		return nil, err
	}
	d.ws()
	if d.peek() == '}' {
		d.i++
		return Item{}, nil
	}
	m := make(Item, d.countMembers())
	for {
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if err := d.expect(':'); err != nil {
			return nil, err
		}
		x, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = x
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
			continue
		case '}':
			d.i++
			return m, nil
		}
		return nil, d.syntax()
	}
}

func (d *decoder) base64() ([]byte, error) {
	s, err := d.str()
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, awserr.Newf(awserr.CodeSerialization, "Base64 encoded value is invalid: %v", err)
	}
	return b, nil
}

func (d *decoder) set(t Type) (Value, error) {
	if err := d.expect('['); err != nil {
		return Value{}, err
	}
	v := Value{T: t}
	d.ws()
	if d.peek() != ']' {
		for {
			switch t {
			case BS:
				b, err := d.base64()
				if err != nil {
					return Value{}, err
				}
				v.BS = append(v.BS, b)
			case NS:
				s, err := d.str()
				if err != nil {
					return Value{}, err
				}
				c, msg := canonicalNumber(s)
				if msg != "" {
					return Value{}, numberError(s, msg)
				}
				v.SS = append(v.SS, c)
			default:
				s, err := d.str()
				if err != nil {
					return Value{}, err
				}
				v.SS = append(v.SS, s)
			}
			d.ws()
			if d.peek() == ',' {
				d.i++
				continue
			}
			if d.peek() == ']' {
				break
			}
			return Value{}, d.syntax()
		}
	}
	d.i++ // ']'
	if err := CheckSet(v); err != nil {
		return Value{}, err
	}
	return v, nil
}

// CheckSet validates a set value as DynamoDB does on input: non-empty and
// free of duplicates (NS members compared numerically, so they must be
// canonical, as UnmarshalJSON leaves them).
func CheckSet(v Value) error {
	n := len(v.SS)
	if v.T == BS {
		n = len(v.BS)
	}
	if n == 0 {
		switch v.T {
		case SS:
			return awserr.Validation(msgInvalidParam + "An string set  may not be empty")
		case NS:
			return awserr.Validation(msgInvalidParam + "An number set  may not be empty")
		}
		return awserr.Validation(msgInvalidParam + "Binary sets should not be empty")
	}
	if n == 1 {
		return nil
	}
	dup := false
	if n <= 8 {
		for i := 0; i < n && !dup; i++ {
			for j := i + 1; j < n; j++ {
				if v.T == BS && string(v.BS[i]) == string(v.BS[j]) || v.T != BS && v.SS[i] == v.SS[j] {
					dup = true
					break
				}
			}
		}
	} else {
		seen := make(map[string]struct{}, n)
		for i := 0; i < n; i++ {
			var k string
			if v.T == BS {
				k = string(v.BS[i])
			} else {
				k = v.SS[i]
			}
			if _, ok := seen[k]; ok {
				dup = true
				break
			}
			seen[k] = struct{}{}
		}
	}
	if !dup {
		return nil
	}
	if v.T == NS {
		return awserr.Validation(msgInvalidParam + "Input collection contains duplicates")
	}
	var b strings.Builder
	b.WriteString(msgInvalidParam + "Input collection [")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		if v.T == BS {
			b.WriteString(base64.StdEncoding.EncodeToString(v.BS[i]))
		} else {
			b.WriteString(v.SS[i])
		}
	}
	if v.T == BS {
		b.WriteString("]of type BS contains duplicates.") // sic, as DynamoDB words it
	} else {
		b.WriteString("] contains duplicates.")
	}
	return awserr.Validation("%s", b.String())
}
