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
