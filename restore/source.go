package restore

import (
	"context"
	"fmt"
	"strings"

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
				return nil, fmt.Errorf("%q is not expired, deleted, inserted, modified or all", k)
			}
		}
	}
	return out, nil
}
