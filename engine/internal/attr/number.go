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
	msgNotNumber = "A value provided cannot be converted into a number"
	msgPrecision = "Attempting to store more than 38 significant digits in a Number"
	msgOverflow  = "Number overflow. Attempting to store a number with magnitude larger than supported range"
	msgUnderflow = "Number underflow. Attempting to store a number with magnitude smaller than supported range"
)

// Number is a DynamoDB decimal: up to 38 significant digits, magnitude
// between 1E-130 and 9.99…E+125, or zero. It is never a float64.
//
// The zero Number is 0. A non-zero Number is sign × 0.digits × 10^exp where
// digits has no leading or trailing zeros, so equal values have equal
// representations.
type Number struct {
	neg    bool
	digits string // significant digits, "" for zero
	exp    int
}

// ParseNumber parses a decimal ("12", "-0.5", "+3.") or exponent form
// ("1e3", "1.5E+2"). Surrounding spaces are not allowed. Errors are
// ValidationExceptions worded as DynamoDB words them.
func ParseNumber(s string) (Number, error) {
	n, msg := parseNumber(s)
	if msg != "" {
		return Number{}, awserr.Validation("%s", msg)
	}
	return n, nil
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
		if s[i] != 'e' && s[i] != 'E' {
			return Number{}, msgNotNumber
		}
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		if i >= len(s) {
			return Number{}, msgNotNumber
		}
		for ; i < len(s); i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return Number{}, msgNotNumber
			}
			if e < 1_000_000 { // saturate: far beyond any valid range
				e = e*10 + int(c-'0')
			}
		}
		if eneg {
			e = -e
		}
	}
	if firstNZ < 0 {
		return Number{}, "" // zero, whatever its sign and exponent
	}
	// value = 0.d(firstNZ)... × 10^(intDigits - firstNZIdx + e)
	exp := intDigits - firstNZIdx + e
	digits := s[firstNZ : lastNZ+1]
	if strings.IndexByte(digits, '.') >= 0 {
		digits = strings.Replace(digits, ".", "", 1)
	}
	if len(digits) > MaxDigits {
		return Number{}, msgPrecision
	}
	if exp > maxExp {
		return Number{}, msgOverflow
	}
	if exp < minExp {
		return Number{}, msgUnderflow
	}
	return Number{neg: neg, digits: digits, exp: exp}, ""
}

// IsZero reports whether n is 0.
func (n Number) IsZero() bool { return n.digits == "" }

// Sign returns -1, 0 or +1.
func (n Number) Sign() int {
	switch {
	case n.digits == "":
		return 0
	case n.neg:
		return -1
	}
	return 1
}

// String returns the canonical decimal form: no exponent, no leading zeros,
// no trailing zeros after the point, "0" for zero ("1.5E+2" -> "150").
func (n Number) String() string {
	if n.digits == "" {
		return "0"
	}
	var b strings.Builder
	d := n.digits
	size := len(d) + 2
	if n.exp <= 0 {
		size += -n.exp + 1
	} else if n.exp > len(d) {
		size += n.exp - len(d)
	}
	b.Grow(size)
	if n.neg {
		b.WriteByte('-')
	}
	switch {
	case n.exp <= 0:
		b.WriteString("0.")
		for i := 0; i < -n.exp; i++ {
			b.WriteByte('0')
		}
		b.WriteString(d)
	case n.exp >= len(d):
		b.WriteString(d)
		for i := len(d); i < n.exp; i++ {
			b.WriteByte('0')
		}
	default:
		b.WriteString(d[:n.exp])
		b.WriteByte('.')
		b.WriteString(d[n.exp:])
	}
	return b.String()
}

// Digits returns the number of significant digits (0 for zero).
func (n Number) Digits() int { return len(n.digits) }

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
		c = strings.Compare(n.digits, o.digits)
	}
	if sn < 0 {
		c = -c
	}
	return c
}

// Neg returns -n.
func (n Number) Neg() Number {
	if n.digits == "" {
		return n
	}
	n.neg = !n.neg
	return n
}

// Add returns n+o, or a ValidationException when the exact result needs
// more than 38 significant digits or leaves DynamoDB's range.
func (n Number) Add(o Number) (Number, error) {
	if o.digits == "" {
		return n, nil
	}
	if n.digits == "" {
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
	i, _ := new(big.Int).SetString(n.digits, 10)
	if n.neg {
		i.Neg(i)
	}
	return i, n.exp - len(n.digits)
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
	return Number{neg: neg, digits: s, exp: exp}, nil
}

// EpochSeconds returns the integer part of n (the fraction truncated toward
// zero) as an int64, and false when it does not fit.
func (n Number) EpochSeconds() (int64, bool) {
	if n.digits == "" || n.exp <= 0 {
		return 0, true
	}
	if n.exp > 19 {
		return 0, false
	}
	var u uint64
	for k := 0; k < n.exp; k++ {
		d := uint64(0)
		if k < len(n.digits) {
			d = uint64(n.digits[k] - '0')
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

// canonicalNumber parses s and returns its canonical string.
func canonicalNumber(s string) (string, string) {
	n, msg := parseNumber(s)
	if msg != "" {
		return "", msg
	}
	return n.String(), ""
}
