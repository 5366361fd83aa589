// Package suggest finds the name a user probably meant: the "did you mean"
// of unknown commands, flags and URL parameters.
package suggest

import (
	"slices"
	"strings"
)

// maxEdits is how far a name may be from what was typed and still be
// suggested.
const maxEdits = 2

// Nearest returns the one of names nearest to s, or "" when none is near.
// A name that differs from s only in case, '-' and '_' (pathstyle,
// PathStyle, path_style for path-style) is nearest; otherwise the nearest
// is at most two edits away, case aside ([Distance]). Ties go to the first
// in sorted order.
func Nearest(s string, names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	best, bestD := "", maxEdits+1
	ls, fs := strings.ToLower(s), fold(s)
	for _, n := range names {
		d := 0
		if fold(n) != fs {
			d = Distance(ls, strings.ToLower(n))
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// fold is s in lower case without '-' and '_'.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// Distance is the Levenshtein distance between a and b, a transposition
// of two neighbours counting as one edit (tabel -> table).
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
