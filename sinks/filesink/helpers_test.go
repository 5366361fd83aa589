package filesink

import (
	"context"
	"testing"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// open opens a file:// or stdout:// URL as package sinks' Open does, but
// for its manifests=false wrapper (package sinks' tests hold that one).
func open(ctx context.Context, raw string, o sinkapi.Options) (sinkapi.Sink, []event.Kind, error) {
	return testkit.Open(ctx, raw, o, func(_ context.Context, p *sinkurl.Params, o sinkapi.Options) (sinkapi.Sink, error) {
		if p.URL.Scheme == "stdout" {
			item, err := ParseStdout(p)
			if err != nil {
				return nil, err
			}
			return NewWriter("stdout://", o.Stdout, item, o), nil
		}
		c, err := sinkurl.ParseFile(p)
		if err != nil {
			return nil, err
		}
		return NewWith(c, o)
	})
}

// checkComplete reads the archive in dir as verify does: its manifests
// prove it complete and it holds n events, each once, every line whole.
// It returns the coverage report.
func checkComplete(t *testing.T, dir string, n int64) *archive.CoverageReport {
	t.Helper()
	ctx := testkit.Ctx(t)
	cov := archive.NewCoverage(archive.Selection{})
	ar, err := archive.Open(ctx, "file://"+dir, cov.Hook(archive.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cov.Load(ctx, ar); err != nil {
		t.Fatal(err)
	}
	st, err := ar.Events(ctx, archive.Selection{}, func(archive.Line) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	rep := cov.Finish()
	if rep.Verdict != archive.VerdictComplete || st.Events != n || st.Duplicates != 0 || st.Undecodable != 0 {
		t.Fatalf("coverage %s, %d events read (want %d), %d duplicates, %d undecodable; findings %+v",
			rep.Summary, st.Events, n, st.Duplicates, st.Undecodable, rep.Findings)
	}
	return rep
}
