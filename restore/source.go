package restore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
)

// ArchiveSource reads sel's events from an archive; stats, when not nil,
// receives the reader's counts once the read ends.
func ArchiveSource(a *archive.Archive, sel archive.Selection, stats *archive.Stats) Source {
	return func(ctx context.Context, fn func(*event.Event) error) error {
		st, err := a.Events(ctx, sel, func(l archive.Line) error { return fn(&l.Event) })
		if stats != nil {
			*stats = st
		}
		return err
	}
}

// ParseTime reads a --since or --until value: RFC 3339
// (2026-11-01T12:00:00Z), a day (2026-11-01, midnight UTC), an hour
// (2026-11-01T12, UTC) or a duration before now (36h, 90m).
func ParseTime(flag, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("--%s: %q is not a time: want RFC 3339 (2026-11-01T12:00:00Z), a day (2026-11-01), an hour (2026-11-01T12) or a duration before now (36h)", flag, s)
}

// ParseKinds reads --kind values (expired, deleted, inserted, modified, or
// all).
func ParseKinds(vals []string) ([]event.Kind, error) {
	var out []event.Kind
	for _, v := range vals {
		for _, k := range strings.Split(v, ",") {
			k = strings.TrimSpace(strings.ToLower(k))
			switch {
			case k == "":
			case k == "all":
				out = append(out, event.Kinds...)
			case event.Kind(k).Valid():
				out = append(out, event.Kind(k))
			default:
				return nil, fmt.Errorf("--kind: %q is not expired, deleted, inserted, modified or all", k)
			}
		}
	}
	return out, nil
}
