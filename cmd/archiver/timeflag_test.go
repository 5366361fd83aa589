package main

import (
	"strings"
	"testing"
	"time"
)

// TestParseTimeFlag: restore, replay and verify read --since and --until
// with this one function; each form is read against a clock the test sets.
func TestParseTimeFlag(t *testing.T) {
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "", want: time.Time{}},
		{in: "2026-11-01T12:00:00Z", want: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)},
		{in: "2026-11-01T12:00:00.5+02:00", want: time.Date(2026, 11, 1, 10, 0, 0, 5e8, time.UTC)},
		{in: "2026-11-01T12:30:15", want: time.Date(2026, 11, 1, 12, 30, 15, 0, time.UTC)},
		{in: "2026-11-01T12:30", want: time.Date(2026, 11, 1, 12, 30, 0, 0, time.UTC)},
		{in: "2026-11-01T12", want: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)},
		{in: " 2026-11-01 ", want: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{in: "36h", want: now.Add(-36 * time.Hour)},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "0s", want: now},
		{in: "7d", want: now.Add(-7 * 24 * time.Hour)},
		{in: "yesterday", bad: true},
		{in: "-5h", bad: true},
		{in: "-1d", bad: true},
		{in: "1.5d", bad: true},
		{in: "2026-13-01", bad: true},
	}
	for _, c := range cases {
		got, err := parseTimeFlag(c.in, now)
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), "is not a time") {
				t.Errorf("%q: got %v, %v; want an error saying it is not a time", c.in, got, err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%q: got %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
