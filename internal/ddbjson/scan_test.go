package ddbjson

import (
	"strings"
	"testing"
)

// TestPlainString holds plainString's word-at-a-time search to a byte
// loop, with every byte value at every position of a word and of the
// tail, before and after a closing quote.
func TestPlainString(t *testing.T) {
	for n := range 20 {
		for pos := range n {
			for c := range 256 {
				for _, end := range []int{-1, n / 2, n - 1} {
					s := []byte(strings.Repeat("a", n))
					if end >= 0 {
						s[end] = '"'
					}
					s[pos] = byte(c)
					wantN, wantOK := 0, false
				scan:
					for i, c := range s {
						switch {
						case c == '"':
							wantN, wantOK = i, true
							break scan
						case c < 0x20 || c >= 0x80 || c == '\\':
							break scan
						}
					}
					if gotN, gotOK := plainString(s); gotN != wantN || gotOK != wantOK {
						t.Fatalf("plainString(%q) = %d, %v; want %d, %v", s, gotN, gotOK, wantN, wantOK)
					}
				}
			}
		}
	}
}
