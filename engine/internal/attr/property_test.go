package attr

import (
	"bytes"
	"math/big"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// randomNumber returns a random valid DynamoDB number literal, in decimal
// or exponent form, across the whole exponent range.
func randomNumber(r *rand.Rand) string {
	var b strings.Builder
	switch r.Intn(3) {
	case 0:
		b.WriteByte('-')
	case 1:
		b.WriteByte('+')
	}
	nd := r.Intn(20) + 1
	for i := 0; i < nd; i++ {
		b.WriteByte(byte('0' + r.Intn(10)))
	}
	if r.Intn(2) == 0 {
		b.WriteByte('.')
		for i := r.Intn(18); i > 0; i-- {
			b.WriteByte(byte('0' + r.Intn(10)))
		}
	}
	if r.Intn(2) == 0 {
		b.WriteString("e")
		b.WriteString(strconv.Itoa(r.Intn(200) - 100))
	}
	return b.String()
}

func rat(t *testing.T, s string) *big.Rat {
	t.Helper()
	q, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("big.Rat cannot parse %q", s)
	}
	return q
}

// TestNumberAgainstBigRat checks parsing, canonical form, ordering, key
// encoding and arithmetic against math/big's exact rationals.
func TestNumberAgainstBigRat(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var nums []Number
	var rats []*big.Rat
	for len(nums) < 3000 {
		s := randomNumber(r)
		n, err := ParseNumber(s)
		if err != nil {
			continue // out of range or too precise: covered elsewhere
		}
		q := rat(t, strings.TrimPrefix(s, "+"))
		if got := rat(t, n.String()); got.Cmp(q) != 0 {
			t.Fatalf("%q canonical %q has a different value", s, n.String())
		}
		nums = append(nums, n)
		rats = append(rats, q)
	}
	for i := 0; i+1 < len(nums); i++ {
		a, b := nums[i], nums[i+1]
		want := rats[i].Cmp(rats[i+1])
		if got := a.Cmp(b); got != want {
			t.Fatalf("Cmp(%s, %s) = %d, want %d", a, b, got, want)
		}
		if got := bytes.Compare(AppendNumberKey(nil, a), AppendNumberKey(nil, b)); got != want {
			t.Fatalf("key order of %s, %s = %d, want %d", a, b, got, want)
		}
		sum, err := a.Add(b)
		exact := new(big.Rat).Add(rats[i], rats[i+1])
		if err == nil {
			if rat(t, sum.String()).Cmp(exact) != 0 {
				t.Fatalf("%s + %s = %s, want %s", a, b, sum, exact.FloatString(40))
			}
		} else if !strings.Contains(err.Error(), "38 significant digits") && !strings.Contains(err.Error(), "flow") {
			t.Fatalf("%s + %s: unexpected error %v", a, b, err)
		}
		diff, err := a.Sub(b)
		exact = new(big.Rat).Sub(rats[i], rats[i+1])
		if err == nil && rat(t, diff.String()).Cmp(exact) != 0 {
			t.Fatalf("%s - %s = %s", a, b, diff)
		}
	}
}
