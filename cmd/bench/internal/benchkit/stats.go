package benchkit

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Median returns the median of xs (xs is reordered).
func Median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// Spread renders the median of xs with its range, each number in format:
// Spread("%.0f", xs) is e.g. "31 (29-35)". xs is left as it is.
func Spread(format string, xs []float64) string {
	return fmt.Sprintf(format+" ("+format+"-"+format+")", Median(slices.Clone(xs)), slices.Min(xs), slices.Max(xs))
}

// Percents renders xs as whole percents, in their order.
func Percents(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f%%", 100*x)
	}
	return strings.Join(parts, " ")
}

// Best returns the shorter of two durations, treating 0 as unset.
func Best(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// FmtInt renders f rounded to a whole number with thousands separators.
func FmtInt(f float64) string {
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Tail is the last n bytes of s, marked as cut when they are not all of it.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
