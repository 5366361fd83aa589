package attr

// OrderedKey encodes an S, N or B key value as bytes whose bytewise order
// equals DynamoDB's key order: S and B bytewise, N numerically (negatives,
// zero, fractions and exponents included). Values of one key attribute
// always share a type, so S and B are their raw bytes. Other types (which
// cannot be keys) yield nil; an invalid N string sorts as zero.
func OrderedKey(v Value) []byte {
	switch v.T {
	case S, B, N:
		return AppendOrderedKey([]byte{}, v)
	}
	return nil
}

// AppendOrderedKey appends OrderedKey(v) to dst, without a buffer of its
// own: for keys built in one buffer.
func AppendOrderedKey(dst []byte, v Value) []byte {
	switch v.T {
	case S:
		return append(dst, v.S...)
	case B:
		return append(dst, v.B...)
	case N:
		n, msg := parseNumber(v.S)
		if msg != "" {
			n = Number{}
		}
		return AppendNumberKey(dst, n)
	}
	return dst
}

// Leading bytes of encoded numbers: negatives < zero < positives.
const (
	keyNeg  = 0x01
	keyZero = 0x02
	keyPos  = 0x03
	keyTerm = 0xFF // terminates a negative number's complemented digits
)

// AppendNumberKey appends n's order-preserving encoding to dst.
//
// Positive: 0x03, exp+129 (0..255), the digit characters. A shorter digit
// string that is a prefix of a longer one is the smaller value, which is
// also what bytewise comparison says. Negative: 0x01, 255-(exp+129), each
// digit complemented ('9'-d), then 0xFF so that the longer (more negative)
// of two prefix-related strings sorts first.
func AppendNumberKey(dst []byte, n Number) []byte {
	switch n.Sign() {
	case 0:
		return append(dst, keyZero)
	case 1:
		dst = append(dst, keyPos, byte(n.exp-minExp))
		for i := 0; i < len(n.mant); i++ {
			if n.mant[i] != '.' {
				dst = append(dst, n.mant[i])
			}
		}
		return dst
	}
	dst = append(dst, keyNeg, byte(255-(n.exp-minExp)))
	for i := 0; i < len(n.mant); i++ {
		if n.mant[i] != '.' {
			dst = append(dst, '9'-n.mant[i]+'0')
		}
	}
	return append(dst, keyTerm)
}
