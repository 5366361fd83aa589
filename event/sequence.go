package event

import "strings"

// CompareSequence compares two decimal stream sequence numbers numerically
// and returns -1, 0 or +1. Sequence numbers are unsigned decimal strings of
// up to 40 digits; comparing them as strings is wrong as soon as their
// lengths differ. Leading zeros are ignored.
func CompareSequence(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// ValidSequence reports whether s is a stream sequence number: 1 to 64
// decimal digits. (DynamoDB Streams' are up to 40 digits.)
func ValidSequence(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
