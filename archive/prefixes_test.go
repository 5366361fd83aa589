package archive

import (
	"slices"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

// TestListPrefixes: the listing narrows to tables, kinds and days as far
// as the selection allows.
func TestListPrefixes(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 3, d, 12, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name string
		sel  Selection
		s3   bool
		want []string
	}{
		{"nothing", Selection{}, true, []string{""}},
		{"kinds alone", Selection{Kinds: []event.Kind{event.Expired}}, true, []string{""}},
		{"table", Selection{Tables: []string{"T"}}, true, []string{"table=T/"}},
		{"table and kind", Selection{Tables: []string{"T"}, Kinds: []event.Kind{event.Expired}}, true, []string{"table=T/kind=expired/"}},
		{"open range", Selection{Tables: []string{"T"}, Kinds: []event.Kind{event.Expired}, Since: day(3)}, true, []string{"table=T/kind=expired/"}},
		{"two days", Selection{Tables: []string{"T"}, Kinds: []event.Kind{event.Expired}, Since: day(3), Until: day(4)}, true,
			[]string{"table=T/kind=expired/dt=2026-03-03/", "table=T/kind=expired/dt=2026-03-04/"}},
		{"days, every kind", Selection{Tables: []string{"T"}, Since: day(3), Until: day(3).Add(time.Hour)}, true,
			[]string{"table=T/kind=expired/dt=2026-03-03/", "table=T/kind=deleted/dt=2026-03-03/", "table=T/kind=inserted/dt=2026-03-03/",
				"table=T/kind=modified/dt=2026-03-03/", "table=T/kind=undecodable/dt=2026-03-03/"}},
		{"too long for days", Selection{Tables: []string{"T"}, Kinds: []event.Kind{event.Expired}, Since: day(1), Until: day(1).AddDate(0, 3, 0)}, true,
			[]string{"table=T/kind=expired/"}},
		{"directory", Selection{Tables: []string{"T", "U"}, Since: day(3), Until: day(4)}, false, []string{"T/", "table=T/", "U/", "table=U/"}},
	} {
		if got := listPrefixes(tc.sel, tc.s3); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
