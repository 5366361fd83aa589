// Package attr is the engine's value model: DynamoDB attribute values, their
// strict DynamoDB-JSON codec, decimal numbers, comparison, key ordering and
// item size accounting.
package attr

import (
	"bytes"
	"slices"
)

// Type is a DynamoDB attribute type.
type Type uint8

// The DynamoDB attribute types. The zero Type is invalid.
const (
	S Type = iota + 1
	N
	B
	BOOL
	NULL
	SS
	NS
	BS
	M
	L
)

var typeNames = [...]string{"", "S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "M", "L"}

// String returns the DynamoDB type descriptor ("S", "N", ..., "L").
func (t Type) String() string {
	if int(t) < len(typeNames) && t != 0 {
		return typeNames[t]
	}
	return "?"
}

// ParseType maps a type descriptor ("S", "NS", ...) to its Type.
func ParseType(s string) (Type, bool) {
	for i := 1; i < len(typeNames); i++ {
		if typeNames[i] == s {
			return Type(i), true
		}
	}
	return 0, false
}

// Value is one attribute value; T says which fields are used.
//
// The fields are ordered so that a Value is 128 bytes: Go maps store
// values up to that size inline, so an Item insert does not allocate.
type Value struct {
	T    Type
	Bool bool             // BOOL (NULL has no payload: T==NULL)
	S    string           // S; for N: the canonical decimal string (see Number)
	B    []byte           // B
	SS   []string         // SS; NS (canonical decimal strings)
	BS   [][]byte         // BS
	M    map[string]Value // M (non-nil, may be empty)
	L    []Value          // L (non-nil, may be empty)
}

// Item is a whole item: attribute name to value.
type Item = map[string]Value

// Str returns an S value.
func Str(s string) Value { return Value{T: S, S: s} }

// Num returns an N value holding the canonical form of s. It never panics:
// an invalid s is kept as given (use MustNum for literals in tests, or
// ParseNumber to validate).
func Num(s string) Value {
	if c, msg := canonicalNumber(s); msg == "" {
		return Value{T: N, S: c}
	}
	return Value{T: N, S: s}
}

// MustNum is Num for literals known to be valid; it panics otherwise.
func MustNum(s string) Value {
	c, msg := canonicalNumber(s)
	if msg != "" {
		panic("attr.MustNum(" + s + "): " + msg)
	}
	return Value{T: N, S: c}
}

// NumberValue returns the N value of n.
func NumberValue(n Number) Value { return Value{T: N, S: n.String()} }

// Bin returns a B value.
func Bin(b []byte) Value { return Value{T: B, B: b} }

// Bool returns a BOOL value.
func Bool(b bool) Value { return Value{T: BOOL, Bool: b} }

// Null returns the NULL value.
func Null() Value { return Value{T: NULL} }

// Map returns an M value; a nil m becomes an empty map.
func Map(m Item) Value {
	if m == nil {
		m = Item{}
	}
	return Value{T: M, M: m}
}

// List returns an L value.
func List(l ...Value) Value {
	if l == nil {
		l = []Value{}
	}
	return Value{T: L, L: l}
}

// StrSet returns an SS value.
func StrSet(s ...string) Value { return Value{T: SS, SS: s} }

// NumSet returns an NS value with canonical members (invalid ones kept as given).
func NumSet(s ...string) Value {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = Num(x).S
	}
	return Value{T: NS, SS: out}
}

// BinSet returns a BS value.
func BinSet(b ...[]byte) Value { return Value{T: BS, BS: b} }

// AsNumber parses an N value's number.
func (v Value) AsNumber() (Number, error) { return ParseNumber(v.S) }

// IsSet reports whether v is an SS, NS or BS.
func (v Value) IsSet() bool { return v.T == SS || v.T == NS || v.T == BS }

// Clone returns a deep copy of v: nothing in the result aliases v.
func (v Value) Clone() Value {
	switch v.T {
	case B:
		if v.B != nil {
			v.B = append([]byte{}, v.B...)
		}
	case SS, NS:
		v.SS = append([]string(nil), v.SS...)
	case BS:
		bs := make([][]byte, len(v.BS))
		for i, b := range v.BS {
			bs[i] = append([]byte{}, b...)
		}
		v.BS = bs
	case M:
		m := make(map[string]Value, len(v.M))
		for k, x := range v.M {
			m[k] = x.Clone()
		}
		v.M = m
	case L:
		l := make([]Value, len(v.L))
		for i, x := range v.L {
			l[i] = x.Clone()
		}
		v.L = l
	}
	return v
}

// CloneItem returns a deep copy of it (nil stays nil).
func CloneItem(it Item) Item {
	if it == nil {
		return nil
	}
	out := make(Item, len(it))
	for k, v := range it {
		out[k] = v.Clone()
	}
	return out
}

// Compare orders two N (numerically), S (bytewise UTF-8) or B (bytewise)
// values of the same type. ok is false when the types differ or are not
// N, S or B, in which case DynamoDB's ordered comparisons are false.
func Compare(a, b Value) (int, bool) {
	if a.T != b.T {
		return 0, false
	}
	switch a.T {
	case S:
		switch {
		case a.S < b.S:
			return -1, true
		case a.S > b.S:
			return 1, true
		}
		return 0, true
	case B:
		return bytes.Compare(a.B, b.B), true
	case N:
		return compareNumStrings(a.S, b.S)
	}
	return 0, false
}

// compareNumStrings compares two number strings; ok is false if either is
// not a valid number.
func compareNumStrings(x, y string) (int, bool) {
	nx, m1 := parseNumber(x)
	ny, m2 := parseNumber(y)
	if m1 != "" || m2 != "" {
		return 0, false
	}
	return nx.Cmp(ny), true
}

func numEqual(x, y string) bool {
	if x == y {
		return true
	}
	c, ok := compareNumStrings(x, y)
	return ok && c == 0
}

// Equal reports deep equality: same type and same value. Numbers compare
// numerically, sets as sets (order ignored), maps and lists deeply.
func Equal(a, b Value) bool {
	if a.T != b.T {
		return false
	}
	switch a.T {
	case S:
		return a.S == b.S
	case N:
		return numEqual(a.S, b.S)
	case B:
		return bytes.Equal(a.B, b.B)
	case BOOL:
		return a.Bool == b.Bool
	case NULL:
		return true
	case SS:
		return stringSetEqual(a.SS, b.SS)
	case NS:
		return numberSetEqual(a.SS, b.SS)
	case BS:
		return binarySetEqual(a.BS, b.BS)
	case M:
		if len(a.M) != len(b.M) {
			return false
		}
		for k, x := range a.M {
			y, ok := b.M[k]
			if !ok || !Equal(x, y) {
				return false
			}
		}
		return true
	case L:
		if len(a.L) != len(b.L) {
			return false
		}
		for i := range a.L {
			if !Equal(a.L[i], b.L[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// stringSetEqual reports whether two string sets hold the same members.
func stringSetEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) <= 16 {
		for _, x := range a {
			if !slices.Contains(b, x) {
				return false
			}
		}
		return true
	}
	set := make(map[string]struct{}, len(a))
	for _, s := range a {
		set[s] = struct{}{}
	}
	for _, s := range b {
		if _, ok := set[s]; !ok {
			return false
		}
	}
	return true
}

// numberSetEqual reports whether two number sets hold the same members,
// compared as numbers.
func numberSetEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if numEqual(x, y) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// binarySetEqual reports whether two binary sets hold the same members.
func binarySetEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	set := make(map[string]struct{}, len(a))
	for _, s := range a {
		set[string(s)] = struct{}{}
	}
	for _, s := range b {
		if _, ok := set[string(s)]; !ok {
			return false
		}
	}
	return true
}

// EqualItems reports whether two items hold the same attributes with Equal values.
func EqualItems(a, b Item) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || !Equal(x, y) {
			return false
		}
	}
	return true
}
