package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// timeLayouts are the absolute forms --since and --until take; all but
// RFC 3339 are read as UTC.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02T15", "2006-01-02"}

// parseTimeFlag reads a --since or --until value, for every command that
// has them: RFC 3339 (2026-11-01T12:00:00Z), UTC 2026-11-01T12:00:00,
// 2026-11-01T12:00, an hour (2026-11-01T12), a day (2026-11-01), or a
// duration before now (36h, 90m, 7d). "" is the zero time (no bound). Its
// errors do not name the flag: the caller does.
func parseTimeFlag(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	if d, ok := parseAgo(s); ok {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-11-01T12:00:00Z), a day (2026-11-01), an hour (2026-11-01T12) or a duration before now (36h, 7d)", s)
}

// parseAgo reads a non-negative duration: Go's (36h, 90m) or whole days
// (7d).
func parseAgo(s string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100*365 {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= 0
}

// timeFlagUsage describes the forms parseTimeFlag takes, for --since.
const timeFlagUsage = "RFC 3339 (2026-11-01T12:00:00Z), a day (2026-11-01), an hour (2026-11-01T12), UTC, or a duration before now (36h, 7d)"
