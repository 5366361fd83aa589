package sweep

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		ttl    time.Time
		window time.Duration
		want   string
	}{
		{at("2022-07-19T21:27:31Z"), time.Minute, "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"},
		{at("2022-07-19T21:27:00Z"), time.Minute, "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"},      // on the start
		{at("2022-07-19T21:27:59.999Z"), time.Minute, "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"},  // last millisecond
		{at("2022-07-19T21:27:59.9999Z"), time.Minute, "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"}, // below a millisecond
		{at("2022-07-19T21:28:00Z"), time.Minute, "2022-07-19T21:28:00.000Z_2022-07-19T21:29:00.000Z"},      // on the end: the next window
		{at("2022-07-19T23:27:31+02:00"), time.Minute, "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"}, // zone
		{at("2022-07-19T21:27:31Z"), 7 * time.Second, "2022-07-19T21:27:30.000Z_2022-07-19T21:27:37.000Z"},  // epoch-aligned, not minute-aligned
		{at("2022-07-19T21:27:31.25Z"), 100 * time.Millisecond, "2022-07-19T21:27:31.200Z_2022-07-19T21:27:31.300Z"},
		{at("2022-07-19T21:27:31Z"), 24 * time.Hour, "2022-07-19T00:00:00.000Z_2022-07-20T00:00:00.000Z"},
		{at("1969-12-31T23:59:59.5Z"), time.Second, "1969-12-31T23:59:59.000Z_1970-01-01T00:00:00.000Z"}, // before the epoch
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := Window(tc.ttl, tc.window, 1); got != tc.want {
				t.Fatalf("Window(%v, %v) = %s", tc.ttl, tc.window, got)
			}
			span, err := ParseWindow(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if !span.Contains(tc.ttl) || !span.Start.Equal(WindowStart(tc.ttl, tc.window)) || span.End.Sub(span.Start) != tc.window || span.Shard != -1 {
				t.Fatalf("ParseWindow(%s) = %+v; WindowStart = %v", tc.want, span, WindowStart(tc.ttl, tc.window))
			}
		})
	}
}

func TestWindowShards(t *testing.T) {
	ttl := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	seen := map[int]int{}
	for i := 0; i < 400; i++ {
		attr := Window(ttl, time.Minute, 4)
		span, err := ParseWindow(attr)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(attr, "2030-01-01T00:00:00.000Z_2030-01-01T00:01:00.000Z#") || span.Shard < 0 || span.Shard > 3 {
			t.Fatalf("Window = %s (shard %d)", attr, span.Shard)
		}
		if span.String() != attr {
			t.Fatalf("%+v renders as %s, want %s", span, span, attr)
		}
		seen[span.Shard]++
	}
	if len(seen) != 4 {
		t.Fatalf("400 windows fell in shards %v, want all of 0..3", seen)
	}
}

func TestParseWindowErrors(t *testing.T) {
	tests := []struct{ attr, want string }{
		{"", "no '_'"},
		{"2022-07-19T21:27:00.000Z", "no '_'"},
		{"2022-07-19T21:27:00Z_2022-07-19T21:28:00.000Z", `start "2022-07-19T21:27:00Z"`},
		{"2022-07-19T21:27:00.000Z_tomorrow", `end "tomorrow"`},
		{"2022-07-19T21:28:00.000Z_2022-07-19T21:27:00.000Z", "the end is not after the start"},
		{"2022-07-19T21:27:00.000Z_2022-07-19T21:27:00.000Z", "the end is not after the start"},
		{"2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z#", `shard suffix "#"`},
		{"2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z#-1", `shard suffix "#-1"`},
		{"2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z#+1", `shard suffix "#+1"`},
		{"2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z#x", `shard suffix "#x"`},
	}
	for _, tc := range tests {
		t.Run(tc.attr, func(t *testing.T) {
			_, err := ParseWindow(tc.attr)
			if !errors.Is(err, ErrBadWindow) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.attr)) {
				t.Fatalf("ParseWindow(%q) = %v, want ErrBadWindow quoting the attribute and saying %s", tc.attr, err, tc.want)
			}
		})
	}
}

func TestWindowPanicsOnBadLength(t *testing.T) {
	for _, w := range []time.Duration{0, -time.Minute, time.Millisecond + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Window(..., %v, 1) did not panic", w)
				}
			}()
			Window(time.Now(), w, 1)
		}()
	}
}
