package attr

import "testing"

// TestMemberEnd: a member's end, past nested values and escaped quotes,
// and -1 where no member starts.
func TestMemberEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		at   int
		want int
	}{
		{`{"a":{"S":"x"},"b":1}`, 1, 14},
		{`{"a":{"S":"x"},"b":1}`, 15, 20},
		{`{"a\"":{"L":[{"S":"]}"},{"M":{}}]}}`, 1, 34},
		{`{"a":"}"}`, 1, 8},
		{`{"a":{"S":"x"}}`, 0, -1},
		{`{"a" :1}`, 1, -1},
		{`{"a`, 1, -1},
		{`{"a":`, 1, 5},
		{`{}`, 1, -1},
		{`{"a":1}`, 9, -1},
	} {
		if got := MemberEnd([]byte(c.in), c.at); got != c.want {
			t.Errorf("MemberEnd(%s, %d) = %d, want %d", c.in, c.at, got, c.want)
		}
	}
}
