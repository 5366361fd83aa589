package stream

import (
	"math"
	"strconv"
	"strings"
)

// Sequence numbers are decimal strings of 21 digits: "1" followed by the
// stream's 64-bit counter, zero-padded to 20 digits. They compare the same
// way as numbers and as strings, and they increase strictly within a shard
// (and across the whole stream).

func appendSeq(b []byte, n uint64) []byte {
	b = append(b, '1')
	var tmp [20]byte
	d := strconv.AppendUint(tmp[:0], n, 10)
	for i := len(d); i < 20; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}

func formatSeq(n uint64) string { return string(appendSeq(make([]byte, 0, 21), n)) }

// validSeqSyntax reports whether s is a decimal string of AWS's allowed
// length (21 to 40 characters).
func validSeqSyntax(s string) bool {
	if len(s) < 21 || len(s) > 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// seqValue maps a syntactically valid sequence number onto the counter
// space: 0 if it is below every number this engine issues, MaxUint64 if
// above.
func seqValue(s string) uint64 {
	s = strings.TrimLeft(s, "0")
	switch {
	case len(s) < 21:
		return 0
	case len(s) > 21 || s[0] > '1':
		return math.MaxUint64
	}
	v, err := strconv.ParseUint(s[1:], 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return v
}
