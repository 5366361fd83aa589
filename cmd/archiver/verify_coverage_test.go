package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/demo"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/s3test"
	"github.com/ttl-archiver/archiver/manifest"
)

const (
	euWest = "eu-west-1"
	usEast = "us-east-1"
)

// s3Lineages builds, in an S3 archive, shard A (three ranges of 20
// expiries, ended), its child C (one range) and shard B (three ranges,
// open): 3 shards in 2 lineages, 7 objects. It returns each shard's
// manifests.
func s3Lineages(t *testing.T, c *covArchive) (a, b, ch []manifest.Manifest) {
	t.Helper()
	for i := range 3 {
		var opts []covRange
		if i == 2 {
			opts = append(opts, ended)
		}
		a = append(a, c.record(covEvents(euWest, "shardId-A", 20*i, 20), opts...))
		b = append(b, c.record(covEvents(euWest, "shardId-B", 100+20*i, 20)))
	}
	ch = append(ch, c.record(covEvents(euWest, "shardId-C", 200, 20), c.child("shardId-A")))
	return a, b, ch
}

// verifyCoverage runs verify --json on the archive and returns its exit
// code and the coverage report.
func verifyCoverage(t *testing.T, url string, args ...string) (int, verifyReport) {
	t.Helper()
	code, out, stderr := runVerifyCmd(t, append([]string{"--from", url, "--json"}, args...)...)
	r := decodeReport(t, out)
	if r.Coverage == nil {
		t.Fatalf("no coverage in the report\n%s\n%s", out, stderr)
	}
	if (code == 1) != (r.Coverage.Verdict == archive.VerdictIncomplete) && r.Undecodable == 0 {
		t.Errorf("exit %d with verdict %q\n%s", code, r.Coverage.Verdict, stderr)
	}
	return code, r
}

// kinds returns the findings' kinds and shards, "kind shard" each, in
// order.
func kinds(fs []archive.CoverageFinding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind+" "+f.Shard)
	}
	return out
}

func wantFindings(t *testing.T, r verifyReport, want ...string) {
	t.Helper()
	if got := kinds(r.Coverage.Findings); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("findings %v, want %v:\n%+v", got, want, r.Coverage.Findings)
	}
}

// editLine rewrites the first line of the object at key holding old
// (a gzip object is decompressed and compressed again).
func editLine(t *testing.T, st covStore, key, old, new string) {
	t.Helper()
	body := st.objects(t)[key]
	gz := strings.HasSuffix(key, ".gz")
	if gz {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Contains(body, []byte(old)) {
		t.Fatalf("%s holds no %q", key, old)
	}
	body = bytes.Replace(body, []byte(old), []byte(new), 1)
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body = b.Bytes()
	}
	st.put(t, key, body)
}

// TestVerifyCoverageS3: an S3 archive written by the real sink, with
// manifests as recording sinks write them: intact it is complete; a
// deleted or edited object, a deleted or edited manifest and a trimmed
// start are findings naming the shard and range, and verify exits 1;
// lines after the newest manifest are pending and a leftover copy of a
// re-read range is counted, neither a finding.
func TestVerifyCoverageS3(t *testing.T) {
	srv := s3test.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	n := 0
	build := func(t *testing.T) (*covArchive, []manifest.Manifest, []manifest.Manifest) {
		n++
		c := newCovArchive(t, &s3CovStore{srv: srv, prefix: "cov" + string(rune('a'+n))})
		a, b, _ := s3Lineages(t, c)
		return c, a, b
	}
	t.Run("intact", func(t *testing.T) {
		c, ms, _ := build(t)
		code, r := verifyCoverage(t, c.st.url())
		cov := r.Coverage
		if code != 0 || cov.Verdict != archive.VerdictComplete || cov.Summary != "complete: 3 shards in 2 lineages covered, 7 objects verified" {
			t.Fatalf("exit %d, coverage %+v", code, cov)
		}
		if cov.Manifests != 7 || cov.ObjectsListed != 7 || len(cov.Shards) != 3 || cov.PendingLines != 0 || cov.LeftoverCopies != 0 {
			t.Errorf("coverage %+v", cov)
		}
		a := cov.Shards[0]
		if a.Shard.Shard != "shardId-A" || !a.Ended || a.Records != 60 || a.Events["expired"] != 60 || a.Objects != 3 || a.Lines != 60 ||
			a.Start != "" || a.To != covEvents(euWest, "", 59, 1)[0].SequenceNumber || !a.FirstTime.Equal(verifyT0) ||
			a.NewestDigest != manifest.Digest(manifest.Encode(ms[2])) || !strings.HasSuffix(a.NewestManifest, manifest.Key(ms[2])) {
			t.Errorf("shard A %+v", a)
		}
		wantFindings(t, r)
	})
	t.Run("data object deleted", func(t *testing.T) {
		c, a, _ := build(t)
		c.st.remove(t, a[1].Objects[0].Key)
		code, r := verifyCoverage(t, c.st.url())
		wantFindings(t, r, "missing shardId-A")
		if f := r.Coverage.Findings; code != 1 || len(f) != 1 || f[0].From != a[1].From || f[0].To != a[1].To || f[0].Region != euWest ||
			!strings.HasSuffix(f[0].Object, a[1].Objects[0].Key) || !strings.HasSuffix(f[0].Manifest, manifest.Key(a[1])) {
			t.Errorf("exit %d, findings %+v", code, f)
		}
		if !strings.HasPrefix(r.Coverage.Summary, "INCOMPLETE: 1 finding (1 missing); 3 shards in 2 lineages, 6 of 7 listed objects verified") {
			t.Errorf("summary %q", r.Coverage.Summary)
		}
	})
	t.Run("a line edited", func(t *testing.T) {
		c, _, b := build(t)
		editLine(t, c.st, b[2].Objects[0].Key, `"item-145"`, `"item-999"`)
		code, r := verifyCoverage(t, c.st.url())
		wantFindings(t, r, "altered shardId-B")
		if f := r.Coverage.Findings; code != 1 || len(f) != 1 || !strings.HasSuffix(f[0].Object, b[2].Objects[0].Key) || f[0].To != b[2].To {
			t.Errorf("exit %d, findings %+v", code, f)
		}
	})
	t.Run("middle manifest deleted", func(t *testing.T) {
		c, a, _ := build(t)
		c.st.remove(t, manifest.Key(a[1]))
		code, r := verifyCoverage(t, c.st.url())
		// The gap, the broken link, and the lines of the range's object,
		// now listed by no manifest.
		wantFindings(t, r, "gap shardId-A", "chain shardId-A", "outside shardId-A")
		f := r.Coverage.Findings
		if code != 1 || len(f) != 3 || f[0].From != a[0].To || f[0].To != a[1].To || !f[0].After.Equal(a[0].LastTime) || !f[0].Before.Equal(a[2].FirstTime) {
			t.Fatalf("exit %d, findings %+v", code, f)
		}
		if o := f[2]; o.Lines != 20 || o.Line != 1 || o.LastLine != 20 || o.From != a[0].To || o.To != a[1].To || !strings.HasSuffix(o.Object, a[1].Objects[0].Key) {
			t.Errorf("outside %+v", o)
		}
	})
	t.Run("first manifest deleted", func(t *testing.T) {
		c, _, b := build(t)
		c.st.remove(t, manifest.Key(b[0]))
		code, r := verifyCoverage(t, c.st.url())
		wantFindings(t, r, "chain shardId-B", "outside shardId-B")
		if f := r.Coverage.Findings; code != 1 || len(f) != 2 || f[1].From != "" || f[1].To != b[0].To || f[1].Lines != 20 {
			t.Errorf("exit %d, findings %+v", code, f)
		}
	})
	t.Run("manifest edited", func(t *testing.T) {
		c, _, b := build(t)
		editLine(t, c.st, manifest.Key(b[1]), `"records":20`, `"records":19`)
		code, r := verifyCoverage(t, c.st.url())
		wantFindings(t, r, "chain shardId-B")
		if f := r.Coverage.Findings; code != 1 || f[0].From != b[2].From || !strings.Contains(f[0].Detail, "missing or was edited") {
			t.Errorf("exit %d, findings %+v", code, f)
		}
	})
	t.Run("lines after the newest manifest", func(t *testing.T) {
		c, _, _ := build(t)
		c.write(covEvents(euWest, "shardId-B", 160, 10))
		code, r := verifyCoverage(t, c.st.url())
		if cov := r.Coverage; code != 0 || cov.PendingLines != 10 || cov.PendingObjects != 1 || cov.Shards[1].PendingLines != 10 ||
			!strings.Contains(cov.Summary, "10 lines pending after the newest manifests") {
			t.Errorf("exit %d, coverage %+v", code, cov)
		}
	})
	t.Run("lines after an ended shard's end", func(t *testing.T) {
		c, _, _ := build(t)
		c.write(covEvents(euWest, "shardId-A", 60, 3))
		code, r := verifyCoverage(t, c.st.url())
		wantFindings(t, r, "outside shardId-A")
		if f := r.Coverage.Findings; code != 1 || f[0].Lines != 3 || f[0].To != "" || !strings.Contains(f[0].Detail, "where the shard ended") {
			t.Errorf("exit %d, findings %+v", code, f)
		}
	})
	t.Run("leftover copy of a re-read range", func(t *testing.T) {
		n++
		c := newCovArchive(t, &s3CovStore{srv: srv, prefix: "cov" + string(rune('a'+n))})
		c.record(covEvents(euWest, "shardId-A", 0, 20))
		c.write(covEvents(euWest, "shardId-A", 20, 15)) // then a crash: no manifest
		c.record(covEvents(euWest, "shardId-A", 20, 20))
		code, r := verifyCoverage(t, c.st.url())
		if cov := r.Coverage; code != 0 || cov.LeftoverCopies != 1 || cov.ObjectsVerified != 2 || len(cov.Findings) != 0 ||
			!strings.Contains(cov.Summary, "1 leftover copy") {
			t.Errorf("exit %d, coverage %+v", code, cov)
		}
		if r.Duplicates != 15 {
			t.Errorf("duplicates %d, want 15", r.Duplicates)
		}
	})
	t.Run("an unlisted object in a covered range", func(t *testing.T) {
		n++
		c := newCovArchive(t, &s3CovStore{srv: srv, prefix: "cov" + string(rune('a'+n))})
		var even []event.Event // the odd records are ones no sink took (inserts, say)
		for i, e := range covEvents(euWest, "shardId-A", 0, 40) {
			if i%2 == 0 {
				even = append(even, e)
			}
		}
		m := c.record(even)
		c.write(covEvents(euWest, "shardId-A", 7, 1)) // a line the manifest's objects do not hold
		code, r := verifyCoverage(t, c.st.url())
		wantFindings(t, r, "outside shardId-A")
		if f := r.Coverage.Findings; code != 1 || f[0].From != "" || f[0].To != m.To || f[0].Lines != 1 ||
			!strings.Contains(f[0].Detail, "whose manifests do not list this object, and no object they list holds these events") {
			t.Errorf("exit %d, findings %+v", code, f)
		}
	})
	t.Run("trimmed start", func(t *testing.T) {
		n++
		c := newCovArchive(t, &s3CovStore{srv: srv, prefix: "cov" + string(rune('a'+n))})
		evs := covEvents(euWest, "shardId-A", 5, 20)
		c.record(evs, trimmedStart)
		code, r := verifyCoverage(t, c.st.url())
		wantFindings(t, r, "trimmed shardId-A")
		want := "records before " + evs[0].SequenceNumber + ", created before 2026-03-04T23:00:05Z, were trimmed before the archiver first read the shard"
		if f := r.Coverage.Findings; code != 1 || f[0].To != evs[0].SequenceNumber || !f[0].Before.Equal(evs[0].ApproximateCreationTime) || f[0].Detail != want {
			t.Errorf("exit %d, findings %+v", code, f)
		}
	})
}

// TestVerifyCoverageRegions: a global table's two Regions archive shards
// of the same ID into one archive, each with its manifests (region= in
// their keys): each is its own shard, and an object deleted in one is a
// finding of that Region's shard only.
func TestVerifyCoverageRegions(t *testing.T) {
	srv := s3test.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	c := newCovArchive(t, &s3CovStore{srv: srv, prefix: "regions"})
	var us []manifest.Manifest
	for i := range 2 {
		c.record(covEvents(euWest, "shardId-1", 20*i, 20))
		us = append(us, c.record(covEvents(usEast, "shardId-1", 20*i, 20)))
	}
	if !strings.Contains(manifest.Key(us[0]), "/region=us-east-1/") {
		t.Fatalf("key %s", manifest.Key(us[0]))
	}
	code, r := verifyCoverage(t, c.st.url())
	if cov := r.Coverage; code != 0 || len(cov.Shards) != 2 || cov.Lineages != 2 || cov.ObjectsVerified != 4 ||
		cov.Shards[0].Region != euWest || cov.Shards[1].Region != usEast || cov.Shards[0].Lines != 40 || cov.Shards[1].Lines != 40 {
		t.Fatalf("exit %d, coverage %+v", code, cov)
	}
	c.st.remove(t, us[0].Objects[0].Key)
	code, r = verifyCoverage(t, c.st.url())
	wantFindings(t, r, "missing shardId-1")
	if f := r.Coverage.Findings; code != 1 || f[0].Region != usEast || f[0].Stream != us[0].Stream {
		t.Errorf("exit %d, findings %+v", code, f)
	}
}

// TestVerifyCoverageFile: a file archive, whose hour file grows after
// each manifest lists it: each listing is checked against the prefix it
// saw; lines appended since are pending; an edit inside a listed prefix
// is an altered object; an archive whose recording began mid-shard has
// lines without coverage information, no finding.
func TestVerifyCoverageFile(t *testing.T) {
	dir := t.TempDir()
	c := newCovArchive(t, &dirCovStore{dir})
	for i := range 2 {
		c.record(covEvents(euWest, "shardId-A", 20*i, 20))
		c.record(covEvents(euWest, "shardId-B", 100+20*i, 20))
	}
	c.write(covEvents(euWest, "shardId-A", 40, 5))
	code, r := verifyCoverage(t, c.st.url())
	if cov := r.Coverage; code != 0 || cov.Verdict != archive.VerdictComplete || cov.ObjectsVerified != 1 || cov.Manifests != 4 ||
		cov.PendingLines != 5 || cov.PendingObjects != 0 {
		t.Fatalf("exit %d, coverage %+v", code, cov)
	}
	hour := "Sessions/2026-03-04/23.jsonl"
	editLine(t, c.st, hour, `"item-101"`, `"item-901"`) // in B's first range: every listing from it on (B1, A2, B2) fails
	code, r = verifyCoverage(t, c.st.url())
	wantFindings(t, r, "altered shardId-A", "altered shardId-B", "altered shardId-B")
	if f := r.Coverage.Findings; code != 1 || f[0].Object != hour || !strings.Contains(f[0].Detail, "the SHA-256 of its first") {
		t.Errorf("exit %d, findings %+v", code, f)
	}

	old := newCovArchive(t, &dirCovStore{t.TempDir()})
	old.write(covEvents(euWest, "shardId-A", 0, 20)) // before recording began
	old.record(covEvents(euWest, "shardId-A", 20, 20), begunAt(covEvents(euWest, "", 19, 1)[0].SequenceNumber))
	code, r = verifyCoverage(t, old.st.url())
	if cov := r.Coverage; code != 0 || cov.UnrecordedLines != 20 || !cov.Shards[0].Begun || len(cov.Findings) != 0 {
		t.Errorf("exit %d, coverage %+v", code, cov)
	}
}

// TestVerifyNoManifests: an archive written before manifests has no
// coverage information, which is no failure: verify says so first and
// exits 0.
func TestVerifyNoManifests(t *testing.T) {
	dir := t.TempDir()
	archiveWith(t, "file://"+dir, verifyEvents("Sessions", "s1", 0, 10))
	code, out, stderr := runVerifyCmd(t, "--from", "file://"+dir)
	want := "no coverage information: this archive holds no manifests (written before archiver run recorded them)\n"
	if code != 0 || !strings.HasPrefix(out, want) || strings.Contains(out, "coverage by shard") {
		t.Errorf("exit %d\n%s\n%s", code, out, stderr)
	}
	code, r := verifyCoverage(t, "file://"+dir)
	if code != 0 || r.Coverage.Verdict != archive.VerdictNone || r.Coverage.Findings == nil || r.Coverage.Shards == nil {
		t.Errorf("exit %d, coverage %+v", code, r.Coverage)
	}
}

// TestVerifyCoverageText: the verdict is the first line, then the table
// per shard, then the findings.
func TestVerifyCoverageText(t *testing.T) {
	dir := t.TempDir()
	c := newCovArchive(t, &dirCovStore{dir})
	ms := []manifest.Manifest{c.record(covEvents(euWest, "shardId-A", 0, 20)), c.record(covEvents(euWest, "shardId-A", 20, 20)),
		c.record(covEvents(euWest, "shardId-A", 40, 20))}
	c.st.remove(t, manifest.Key(ms[1]))
	os.WriteFile(filepath.Join(dir, "_manifests", "notes.txt"), []byte("x"), 0o644)
	code, out, stderr := runVerifyCmd(t, "--from", "file://"+dir)
	lines := strings.Split(out, "\n")
	if code != 1 || !strings.HasPrefix(lines[0], "INCOMPLETE: 3 findings (1 gap, 1 chain, 1 outside); 1 shard in 1 lineage") ||
		!strings.Contains(stderr, "do not prove it complete") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	shards, findings := strings.Index(out, "coverage by shard"), strings.Index(out, "coverage findings (3)")
	if shards < 0 || findings < shards || !strings.Contains(out, "2026-03-04T00:00:00.000  eu-west-1  Sessions  shardId-A  shard start") {
		t.Errorf("no shard table before the findings in\n%s", out)
	}
	for _, want := range []string{
		"gap      eu-west-1  Sessions  shardId-A  no manifest covers the records after " + ms[0].To + " up to " + ms[1].To +
			", created between 2026-03-04T23:00:19Z and 2026-03-04T23:00:40Z",
		"Sessions/2026-03-04/23.jsonl: 20 lines from line 21 to 40 outside coverage",
		"files under _manifests/ that are not manifests (skipped)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// TestVerifyCoverageHostileManifests: files under _manifests/ someone
// else wrote are findings naming them, never a failure of the run.
func TestVerifyCoverageHostileManifests(t *testing.T) {
	dir := t.TempDir()
	c := newCovArchive(t, &dirCovStore{dir})
	m := c.record(covEvents(euWest, "shardId-A", 0, 20))
	c.st.put(t, "_manifests/table=Sessions/garbage.json", []byte("{\"version\":1,"))
	moved := strings.Replace(manifest.Key(m), "shard=shardId-A", "shard=shardId-Z", 1)
	c.st.put(t, moved, manifest.Encode(m))
	code, r := verifyCoverage(t, c.st.url())
	wantFindings(t, r, "manifest ", "manifest ")
	for _, f := range r.Coverage.Findings {
		if code != 1 || (f.Manifest != moved && f.Manifest != "_manifests/table=Sessions/garbage.json") {
			t.Errorf("exit %d, finding %+v", code, f)
		}
	}
	// --table selects the table's manifests only.
	code, r = verifyCoverage(t, c.st.url(), "--table", "Carts", "--skip-stream")
	if code != 0 || r.Coverage.Verdict != archive.VerdictNone || !strings.Contains(r.Coverage.Summary, "no manifests of Carts") {
		t.Errorf("exit %d, coverage %+v", code, r.Coverage)
	}
}

// TestVerifyCoverageGapStream: with --table, while the stream still holds
// them, each gap lists the stream's REMOVE records in it with the keys of
// their items: what the archive should hold there.
func TestVerifyCoverageGapStream(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	arn, err := demo.CreateSessionTable(ctx, bed.DynamoDB, "SessionData")
	if err != nil {
		t.Fatal(err)
	}
	putExpired(t, ctx, bed.DynamoDB, "SessionData", 10)
	var evs []event.Event
	eventually.True(t, 30*time.Second, "10 expiries in the stream", func() bool {
		evs = expiredInStream(t, ctx, bed.Streams, arn)
		return len(evs) == 10
	})
	for _, e := range evs[1:] {
		if e.ShardID != evs[0].ShardID {
			t.Skip("the engine's stream has more than one shard")
		}
	}
	c := newCovArchive(t, &dirCovStore{t.TempDir()})
	c.record(evs[:4])
	lost := c.recordOnly(evs[4:6]) // recorded, its objects and manifest gone
	c.record(evs[6:])
	c.st.remove(t, manifest.Key(lost))
	code, r := verifyCoverage(t, c.st.url(), "--table", "SessionData", "--endpoint", bed.Server.Endpoint(), "--grace", "0s")
	wantFindings(t, r, "gap "+evs[0].ShardID, "chain "+evs[0].ShardID)
	gap := r.Coverage.Findings[0]
	if code != 1 || len(gap.InStream) != 2 || gap.From != evs[3].SequenceNumber || gap.To != evs[5].SequenceNumber {
		t.Fatalf("exit %d, gap %+v", code, gap)
	}
	for i, g := range gap.InStream {
		var keys bytes.Buffer
		json.Compact(&keys, g.Keys)
		if e := evs[4+i]; g.EventID != e.EventID || g.Sequence != e.SequenceNumber || g.Archived || keys.String() != string(event.AppendItem(nil, e.Keys)) {
			t.Errorf("in the gap: %+v, want %s", g, e.EventID)
		}
	}
	_, out, _ := runVerifyCmd(t, "--from", c.st.url(), "--table", "SessionData", "--endpoint", bed.Server.Endpoint())
	if !strings.Contains(out, "the keys of the items the archive should hold") || !strings.Contains(out, string(event.AppendItem(nil, evs[4].Keys))) {
		t.Errorf("no gap records in\n%s", out)
	}
}
