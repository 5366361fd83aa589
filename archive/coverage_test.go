package archive_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
)

// TestManifestsFindings: a manifest that does not decode, and one stored
// elsewhere than the archiver puts it, are problems naming their keys;
// a manifest under its conflict key is not.
func TestManifestsFindings(t *testing.T) {
	dir := t.TempDir()
	store := func(key string, body []byte) {
		p := filepath.Join(dir, filepath.FromSlash(key))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, body, 0o644)
	}
	good, conflict := testManifest("5"), testManifest("5")
	conflict.Writer = "another worker"
	store(manifest.Key(good), manifest.Encode(good))
	store(manifest.ConflictKey(conflict, manifest.Digest(manifest.Encode(conflict))), manifest.Encode(conflict))
	store("_manifests/table=T/bad.json", []byte(`{"version":1,"stream":"x"}`))
	store("_manifests/table=T/region=us-east-1/stream=2026-03-04T00:00:00.000/shard=s9/5.json", manifest.Encode(good))
	os.Symlink("/etc/passwd", filepath.Join(dir, "_manifests", "link.json"))
	a := open(t, "file://"+dir, archive.Options{})
	set, err := a.Manifests(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, p := range set.Bad {
		bad = append(bad, p.Object+": "+p.Problem)
	}
	slices.Sort(bad)
	if len(set.Stored) != 3 || len(bad) != 2 || !strings.Contains(bad[0], "bad.json: not a manifest: manifest: stream") ||
		!strings.Contains(bad[1], "shard=s9/5.json: misplaced: a manifest of table T, Region us-east-1, shard s1 up to 5") {
		t.Errorf("stored %d, bad:\n%s", len(set.Stored), strings.Join(bad, "\n"))
	}
}

// TestCoverageSelection: listed objects outside --since/--until are not
// read, and counted as such (listed, and not read); the proof over the
// manifests still holds.
func TestCoverageSelection(t *testing.T) {
	dir := t.TempDir()
	evs := inRegion("us-east-1", events("T", "s1", event.Expired, 0, 10, 0), true)
	write(t, "file://"+dir, evs)
	body, err := os.ReadFile(filepath.Join(dir, "T", "2026-03-04", "05.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r := manifest.Range{StreamARN: evs[0].StreamARN, Region: "us-east-1", Table: "T", ShardID: "s1", To: evs[9].SequenceNumber, Records: 10,
		FirstTime: evs[0].ApproximateCreationTime, LastTime: evs[9].ApproximateCreationTime}
	m := manifest.New(r, []manifest.Object{{Key: "T/2026-03-04/05.jsonl", Bytes: int64(len(body)), SHA256: hexSHA(body)}}, "", "w", t0)
	p := filepath.Join(dir, filepath.FromSlash(manifest.Key(m)))
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, manifest.Encode(m), 0o644)
	for _, tc := range []struct {
		sel               archive.Selection
		verified, notRead int
		lines             int64
	}{
		{archive.Selection{}, 1, 0, 10},
		{archive.Selection{Since: t0.Add(time.Hour)}, 0, 1, 0},
		{archive.Selection{Tables: []string{"T"}, Until: t0.Add(time.Second)}, 1, 0, 10}, // the hour is read whole
	} {
		rep := coverageOf(t, dir, tc.sel)
		// An object outside the window is kept as a hash of its key
		// (Coverage.trim): it still counts as listed, once, in its shard.
		if rep.Verdict != archive.VerdictComplete || rep.ObjectsVerified != tc.verified || rep.ObjectsNotRead != tc.notRead || rep.Shards[0].Lines != tc.lines ||
			rep.ObjectsListed != 1 || rep.Shards[0].Objects != 1 {
			t.Errorf("selection %+v: %+v", tc.sel, rep)
		}
		if sh := rep.Shards[0]; sh.NewestWriter != "w" || !sh.NewestWritten.Equal(t0) {
			t.Errorf("selection %+v: the newest manifest written at %v by %q, want %v by w", tc.sel, sh.NewestWritten, sh.NewestWriter, t0)
		}
	}
}

// TestCoverageHostileListing: a manifest listing keys that are no archive
// objects (a stray file, a manifest) gets a finding for each, naming it.
func TestCoverageHostileListing(t *testing.T) {
	dir := t.TempDir()
	evs := inRegion("us-east-1", events("T", "s1", event.Expired, 0, 3, 0), true)
	write(t, "file://"+dir, evs)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	body, err := os.ReadFile(filepath.Join(dir, "T", "2026-03-04", "05.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r := manifest.Range{StreamARN: evs[0].StreamARN, Region: "us-east-1", Table: "T", ShardID: "s1", To: evs[2].SequenceNumber, Records: 3}
	m := manifest.New(r, []manifest.Object{{Key: "T/2026-03-04/05.jsonl", Bytes: int64(len(body)), SHA256: hexSHA(body)},
		{Key: "notes.txt", Bytes: 1, SHA256: hexSHA([]byte("x"))}, {Key: manifest.Key(testManifest("1")), Bytes: 1, SHA256: hexSHA(nil)}}, "", "w", t0)
	p := filepath.Join(dir, filepath.FromSlash(manifest.Key(m)))
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, manifest.Encode(m), 0o644)
	rep := coverageOf(t, dir, archive.Selection{})
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Kind+" "+f.Object)
		if !strings.Contains(f.Detail, "does not follow the archive layout") {
			t.Errorf("finding %+v", f)
		}
	}
	if want := []string{"missing " + manifest.Key(testManifest("1")), "missing notes.txt"}; !slices.Equal(got, want) || rep.ObjectsVerified != 1 {
		t.Errorf("findings %v, want %v; %s", got, want, rep.Summary)
	}
}

// TestCoverageWindowTrimmed: with a window, the manifests whose objects
// lie outside it are held as their chain alone (Coverage.trim), and the
// report counts what a whole load counted: every object listed, once, in
// its shard; those outside not read; those inside verified.
func TestCoverageWindowTrimmed(t *testing.T) {
	const shards, hours = 3, 12
	dir := t.TempDir()
	benchArchive(t, dir, shards, hours, 5)
	for _, tc := range []struct {
		name    string
		sel     archive.Selection
		hoursIn int
	}{
		{"all", archive.Selection{}, hours},
		{"since", archive.Selection{Since: t0.Add(9 * time.Hour)}, 3},
		{"until", archive.Selection{Until: t0.Add(2 * time.Hour)}, 2},
		{"between", archive.Selection{Since: t0.Add(4*time.Hour + time.Minute), Until: t0.Add(6 * time.Hour)}, 2},
		{"other kind", archive.Selection{Kinds: []event.Kind{event.Deleted}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := coverageOf(t, dir, tc.sel)
			in := shards * tc.hoursIn
			if rep.Verdict != archive.VerdictComplete || rep.Manifests != shards*hours || rep.ObjectsListed != shards*hours ||
				rep.ObjectsVerified != in || rep.ObjectsNotRead != shards*hours-in || len(rep.Shards) != shards {
				t.Fatalf("%s: %+v", rep.Summary, rep)
			}
			for _, sh := range rep.Shards {
				if sh.Objects != hours || sh.Lines != int64(5*tc.hoursIn) {
					t.Errorf("shard %s: %d objects, %d lines; want %d, %d", sh.Shard.Shard, sh.Objects, sh.Lines, hours, 5*tc.hoursIn)
				}
			}
		})
	}
}

// lineageArchive writes three shards, each the child of the one before,
// four hours each (an object and a manifest an hour, two events each):
// shard-0 from t0, shard-1 from t0+4h, shard-2 (open) from t0+8h.
func lineageArchive(t *testing.T, dir string) {
	prev := ""
	for s := range 3 {
		sh := archShard{shard: fmt.Sprintf("shard-%d", s), id: s, startHour: 4 * s, hours: 4, perObject: 2, prev: prev, ended: s < 2}
		if s > 0 {
			sh.parent = fmt.Sprintf("shard-%d", s-1)
		}
		_, _, prev = writeShard(t, dir, sh)
	}
}

// TestCoverageWindowReadsEnds: with --since, a shard whose last manifest
// puts all its records before the window (an hour's margin) and that has
// a child is read at its end only: its other manifests are not
// downloaded, it is not in the report's shards, and the chain from its
// child's first manifest to its last still holds, so a forged or removed
// end is a finding. A lineage's tip, and shards after --until, are read
// whole. A line of a shard read at its end only is a finding too.
func TestCoverageWindowReadsEnds(t *testing.T) {
	since9 := archive.Selection{Since: t0.Add(9 * time.Hour)}
	for _, tc := range []struct {
		name     string
		sel      archive.Selection
		edit     func(t *testing.T, dir string)
		shards   []string // in the report, read whole
		outside  int
		notRead  int
		findings []string
	}{
		{"all", archive.Selection{}, nil, []string{"shard-0", "shard-1", "shard-2"}, 0, 0, nil},
		{"since", since9, nil, []string{"shard-2"}, 2, 6, nil},
		{"until", archive.Selection{Until: t0.Add(2 * time.Hour)}, nil, []string{"shard-0", "shard-1", "shard-2"}, 0, 0, nil},
		// shard-0's last record (t0+3h) lies before the window's margin.
		{"between", archive.Selection{Since: t0.Add(5*time.Hour + time.Minute), Until: t0.Add(6 * time.Hour)}, nil, []string{"shard-1", "shard-2"}, 1, 3, nil},
		{"within the margin", archive.Selection{Since: t0.Add(4*time.Hour + time.Minute)}, nil, []string{"shard-0", "shard-1", "shard-2"}, 0, 0, nil},
		{"the tip before the window", archive.Selection{Since: t0.Add(14 * time.Hour)}, nil, []string{"shard-2"}, 2, 6, nil},
		{"whole chains", since9, nil, []string{"shard-0", "shard-1", "shard-2"}, 0, 0, nil},
		{"the parent's last manifest removed", since9, func(t *testing.T, dir string) {
			os.Remove(manifestPath(t, dir, "shard-1", 3))
		}, []string{"shard-2"}, 2, 5, []string{manifest.FindParent, manifest.FindChain}},
		{"the parent's last manifest forged to lie before the window", since9, func(t *testing.T, dir string) {
			p := manifestPath(t, dir, "shard-1", 3)
			body, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifest.Decode(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			m.FirstTime, m.LastTime = t0.Add(time.Hour), t0.Add(time.Hour)
			if err := os.WriteFile(p, manifest.Encode(m), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"shard-2"}, 2, 6, []string{manifest.FindChain}},
		{"a line of a shard outside the window", since9, func(t *testing.T, dir string) {
			writeShard(t, dir, archShard{shard: "shard-0", id: 9, startHour: 10, hours: 1, perObject: 1})
			os.Remove(manifestPath(t, dir, "shard-0", 4)) // the stray object's own
		}, []string{"shard-2"}, 2, 6, []string{archive.FindOutside}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lineageArchive(t, dir)
			if tc.edit != nil {
				tc.edit(t, dir)
			}
			cov := archive.NewCoverage(tc.sel)
			if tc.name == "whole chains" {
				cov.WholeChains()
			}
			rep := coverageWith(t, dir, cov, tc.sel)
			var shards, kinds []string
			for _, sh := range rep.Shards {
				shards = append(shards, sh.Shard.Shard)
			}
			for _, f := range rep.Findings {
				kinds = append(kinds, f.Kind)
			}
			if !slices.Equal(shards, tc.shards) || rep.ShardsOutside != tc.outside || rep.ManifestsNotRead != tc.notRead || !slices.Equal(kinds, tc.findings) {
				t.Fatalf("%s\nshards %v, %d outside, %d manifests not read, findings %v (%+v); want %v, %d, %d, %v",
					rep.Summary, shards, rep.ShardsOutside, rep.ManifestsNotRead, kinds, rep.Findings, tc.shards, tc.outside, tc.notRead, tc.findings)
			}
			if (tc.findings == nil) != (rep.Verdict == archive.VerdictComplete) || (tc.outside > 0) != strings.Contains(rep.Summary, "read at their end only") {
				t.Errorf("summary %q", rep.Summary)
			}
			for _, f := range rep.Findings {
				if f.Kind == archive.FindOutside && !strings.Contains(f.Detail, "end only") {
					t.Errorf("finding %q does not say its shard was read at its end only", f.Detail)
				}
			}
		})
	}
}

// manifestPath is the path of the manifest of shard's hour-th range
// (from 0) in a lineageArchive.
func manifestPath(t *testing.T, dir, shard string, hour int) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "_manifests", "*", "*", "*", "shard="+shard, "*.json"))
	if err != nil || len(paths) <= hour {
		t.Fatalf("%d manifests of %s (%v), want more than %d", len(paths), shard, err, hour)
	}
	slices.Sort(paths)
	return paths[hour]
}
