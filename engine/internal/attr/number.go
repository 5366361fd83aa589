package attr

import (
	"math/big"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Limits of DynamoDB's Number type.
const (
	// MaxDigits is the most significant digits a Number may hold.
	MaxDigits = 38
	// A non-zero Number is 0.d1d2... × 10^exp with d1 != 0; DynamoDB's
	// magnitude range 1E-130 .. 9.99...E+125 is exp in [minExp, maxExp].
	minExp = -129
	maxExp = 126
)

// Messages DynamoDB sends for bad numbers.
const (
	msgNotNumber = "The parameter cannot be converted to a numeric value"
	msgPrecision = "Attempting to store more than 38 significant digits in a Number"
	msgOverflow  = "Number overflow. Attempting to store a number with magnitude larger than supported range"
	msgUnderflow = "Number underflow. Attempting to store a number with magnitude smaller than supported range"
)

// Number is a DynamoDB decimal: up to 38 significant digits, magnitude
// between 1E-130 and 9.99…E+125, or zero. It is never a float64.
//
// The zero Number is 0. A non-zero Number is sign × 0.d1d2…dk × 10^exp
// where the significant digits d have no leading or trailing zeros. To
// parse without allocating, the digits are kept as the span of the input
// they were read from, which may contain one decimal point (at index dot).
// Compare Numbers with Cmp, not ==.
type Number struct {
	neg  bool
	mant string // significant digits, possibly with one '.'; "" for zero
	dot  int    // index of '.' in mant, or -1
	exp  int
}

// nd returns the number of significant digits.
func (n Number) nd() int {
	if n.dot > 0 {
		return len(n.mant) - 1
	}
	return len(n.mant)
}

// digit returns the i-th significant digit character.
func (n Number) digit(i int) byte {
	if n.dot > 0 && i >= n.dot {
		return n.mant[i+1]
	}
	return n.mant[i]
}

// digits returns the significant digits without the point.
func (n Number) digits() string {
	if n.dot <= 0 {
		return n.mant
	}
	return n.mant[:n.dot] + n.mant[n.dot+1:]
}

// ParseNumber parses a decimal ("12", "-0.5", "+3.") or exponent form
// ("1e3", "1.5E+2"). Surrounding spaces are not allowed. Errors are
// ValidationExceptions worded as DynamoDB words them.
func ParseNumber(s string) (Number, error) {
	n, msg := parseNumber(s)
	if msg != "" {
		return Number{}, numberError(s, msg)
	}
	return n, nil
}

// numberError words a parse failure as DynamoDB does, naming the bad input.
func numberError(s, msg string) error {
	if msg == msgNotNumber && s != "" {
		return awserr.Validation("%s: %s", msg, s)
	}
	return awserr.Validation("%s", msg)
}

// parseNumber is ParseNumber without allocating an error.
func parseNumber(s string) (Number, string) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	// Mantissa: digits [. digits], at least one digit.
	nDigits := 0    // mantissa digits seen
	intDigits := -1 // digits before the point, -1 until a point is seen
	firstNZ := -1   // index in s of the first non-zero digit
	firstNZIdx := 0 // its index among the mantissa digits
	lastNZ := -1    // index in s of the last non-zero digit
	for ; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			if c != '0' {
				if firstNZ < 0 {
					firstNZ, firstNZIdx = i, nDigits
				}
				lastNZ = i
			}
			nDigits++
			continue
		}
		if c == '.' && intDigits < 0 {
			intDigits = nDigits
			continue
		}
		break
	}
	if nDigits == 0 {
		return Number{}, msgNotNumber
	}
	if intDigits < 0 {
		intDigits = nDigits
	}
	e := 0
	if i < len(s) {
		var ok bool
		if e, ok = parseExponent(s[i:]); !ok {
			return Number{}, msgNotNumber
		}
	}
	if firstNZ < 0 {
		return Number{}, "" // zero, whatever its sign and exponent
	}
	// value = 0.d(firstNZ)... × 10^(intDigits - firstNZIdx + e)
	exp := intDigits - firstNZIdx + e
	n := Number{neg: neg, mant: s[firstNZ : lastNZ+1], dot: -1, exp: exp}
	n.dot = strings.IndexByte(n.mant, '.')
	if n.nd() > MaxDigits {
		return Number{}, msgPrecision
	}
	if exp > maxExp {
		return Number{}, msgOverflow
	}
	if exp < minExp {
		return Number{}, msgUnderflow
	}
	return n, ""
}

// parseExponent parses what follows a number's mantissa: e or E, an
// optional sign, at least one digit. It saturates far beyond any valid
// exponent.
func parseExponent(s string) (int, bool) {
	if s[0] != 'e' && s[0] != 'E' {
		return 0, false
	}
	i := 1
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i >= len(s) {
		return 0, false
	}
	e := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if e < 1_000_000 { // saturate: far beyond any valid range
			e = e*10 + int(c-'0')
		}
	}
	if neg {
		e = -e
	}
	return e, true
}

// IsZero reports whether n is 0.
func (n Number) IsZero() bool { return n.mant == "" }

// Sign returns -1, 0 or +1.
func (n Number) Sign() int {
	switch {
	case n.mant == "":
		return 0
	case n.neg:
		return -1
	}
	return 1
}

// String returns the canonical decimal form: no exponent, no leading zeros,
// no trailing zeros after the point, "0" for zero ("1.5E+2" -> "150").
func (n Number) String() string {
	if n.mant == "" {
		return "0"
	}
	var buf [64]byte
	return string(n.appendCanonical(buf[:0]))
}

// Digits returns the number of significant digits (0 for zero).
func (n Number) Digits() int { return n.nd() }

// Cmp compares n and o numerically: -1, 0 or +1.
func (n Number) Cmp(o Number) int {
	sn, so := n.Sign(), o.Sign()
	if sn != so {
		if sn < so {
			return -1
		}
		return 1
	}
	if sn == 0 {
		return 0
	}
	c := 0
	switch {
	case n.exp < o.exp:
		c = -1
	case n.exp > o.exp:
		c = 1
	default:
		c = compareDigits(n, o)
	}
	if sn < 0 {
		c = -c
	}
	return c
}

// compareDigits compares significant digit strings as 0.d fractions: a
// proper prefix is the smaller.
func compareDigits(n, o Number) int {
	a, b := n.nd(), o.nd()
	for i := 0; i < a && i < b; i++ {
		x, y := n.digit(i), o.digit(i)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Neg returns -n.
func (n Number) Neg() Number {
	if n.mant == "" {
		return n
	}
	n.neg = !n.neg
	return n
}

// Add returns n+o, or a ValidationException when the exact result needs
// more than 38 significant digits or leaves DynamoDB's range.
func (n Number) Add(o Number) (Number, error) {
	if o.mant == "" {
		return n, nil
	}
	if n.mant == "" {
		return o, nil
	}
	a, as := n.big()
	b, bs := o.big()
	s := as
	if bs < s {
		s = bs
	}
	ten := big.NewInt(10)
	if as > s {
		a.Mul(a, new(big.Int).Exp(ten, big.NewInt(int64(as-s)), nil))
	}
	if bs > s {
		b.Mul(b, new(big.Int).Exp(ten, big.NewInt(int64(bs-s)), nil))
	}
	a.Add(a, b)
	return fromBig(a, s)
}

// Sub returns n-o, with Add's errors.
func (n Number) Sub(o Number) (Number, error) { return n.Add(o.Neg()) }

// big returns n as an integer i and scale s with n = i × 10^s.
func (n Number) big() (*big.Int, int) {
	i, _ := new(big.Int).SetString(n.digits(), 10)
	if n.neg {
		i.Neg(i)
	}
	return i, n.exp - n.nd()
}

func fromBig(i *big.Int, scale int) (Number, error) {
	if i.Sign() == 0 {
		return Number{}, nil
	}
	neg := i.Sign() < 0
	s := new(big.Int).Abs(i).String()
	exp := len(s) + scale
	s = strings.TrimRight(s, "0")
	if exp > maxExp {
		return Number{}, awserr.Validation(msgOverflow)
	}
	if exp < minExp {
		return Number{}, awserr.Validation(msgUnderflow)
	}
	if len(s) > MaxDigits {
		return Number{}, awserr.Validation(msgPrecision)
	}
	return Number{neg: neg, mant: s, dot: -1, exp: exp}, nil
}

// EpochSeconds returns the integer part of n (the fraction truncated toward
// zero) as an int64, and false when it does not fit.
func (n Number) EpochSeconds() (int64, bool) {
	if n.mant == "" || n.exp <= 0 {
		return 0, true
	}
	if n.exp > 19 {
		return 0, false
	}
	var u uint64
	for k := 0; k < n.exp; k++ {
		d := uint64(0)
		if k < n.nd() {
			d = uint64(n.digit(k) - '0')
		}
		u = u*10 + d
	}
	// 19 digits fit in uint64 (max ~1.8e19).
	if n.neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// canonicalNumber parses s and returns its canonical string, reusing s
// when it already is canonical (the usual case) so nothing is allocated.
func canonicalNumber(s string) (string, string) {
	n, msg := parseNumber(s)
	if msg != "" {
		return "", msg
	}
	var buf [64]byte
	if c := n.appendCanonical(buf[:0]); string(c) == s {
		return s, ""
	}
	return n.String(), ""
}

// appendCanonical appends String()'s form of n to dst.
func (n Number) appendCanonical(dst []byte) []byte {
	if n.mant == "" {
		return append(dst, '0')
	}
	if n.neg {
		dst = append(dst, '-')
	}
	nd := n.nd()
	switch {
	case n.exp <= 0:
		dst = append(dst, '0', '.')
		for i := 0; i < -n.exp; i++ {
			dst = append(dst, '0')
		}
		for i := 0; i < nd; i++ {
			dst = append(dst, n.digit(i))
		}
	case n.exp >= nd:
		for i := 0; i < nd; i++ {
			dst = append(dst, n.digit(i))
		}
		for i := nd; i < n.exp; i++ {
			dst = append(dst, '0')
		}
	default:
		for i := 0; i < n.exp; i++ {
			dst = append(dst, n.digit(i))
		}
		dst = append(dst, '.')
		for i := n.exp; i < nd; i++ {
			dst = append(dst, n.digit(i))
		}
	}
	return dst
}
