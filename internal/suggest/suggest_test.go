package suggest

import "testing"

func TestNearest(t *testing.T) {
	s3 := []string{"compression", "endpoint", "events", "flush-interval", "path-style", "region", "sse"}
	cases := []struct {
		s     string
		names []string
		want  string
	}{
		{"pathstyle", s3, "path-style"},
		{"PathStyle", s3, "path-style"},
		{"path_style", s3, "path-style"},
		{"PATH-STYLE", s3, "path-style"},
		{"path-styel", s3, "path-style"},
		{"flushinterval", s3, "flush-interval"},
		{"regoin", s3, "region"},
		{"Regin", s3, "region"},
		{"colour", s3, ""},
		{"", s3, ""},
		{"anything", nil, ""},
		{"tabel", []string{"table", "tail"}, "table"},
		{"ab", []string{"ac", "ad"}, "ac"}, // a tie: the first in sorted order
	}
	for _, c := range cases {
		if got := Nearest(c.s, c.names); got != c.want {
			t.Errorf("Nearest(%q, %q) = %q, want %q", c.s, c.names, got, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"table", "table", 0}, {"tabel", "table", 1}, {"tble", "table", 1},
		{"tablee", "table", 1}, {"from", "form", 1}, {"abc", "", 3}, {"kitten", "sitting", 3},
		{"añb", "abñ", 1},
	}
	for _, c := range cases {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
