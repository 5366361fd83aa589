package archive_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
)

// benchArchive writes, under dir, an S3-layout archive of gzip objects
// (shards × hours, perObject events each) with one manifest per object,
// chained per shard, as a recording S3 sink leaves it (hour h at t0+h).
func benchArchive(b testing.TB, dir string, shards, hours, perObject int) (n, size int64) {
	b.Helper()
	store := func(key string, body []byte) {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for s := range shards {
		prev, from := "", ""
		for h := range hours {
			evs := inRegion("us-east-1", events("SessionData", fmt.Sprintf("shardId-%d", s), event.Expired, 3600*h, perObject, 0), true)
			var lines, gz bytes.Buffer
			for i := range evs {
				evs[i].EventID = fmt.Sprintf("%032x", s<<32|3600*h+i)
				lines.Write(event.AppendLine(nil, &evs[i]))
			}
			zw := gzip.NewWriter(&gz)
			zw.Write(lines.Bytes())
			zw.Close()
			first, last := &evs[0], &evs[len(evs)-1]
			key := fmt.Sprintf("table=SessionData/kind=expired/dt=%s/hr=%s/us-east-1.%s-%s-%s.jsonl.gz", first.ApproximateCreationTime.Format("2006-01-02"),
				first.ApproximateCreationTime.Format("15"), first.ShardID, first.SequenceNumber, last.SequenceNumber)
			store(key, gz.Bytes())
			r := manifest.Range{StreamARN: first.StreamARN, Region: first.Region, Table: first.Table, ShardID: first.ShardID, From: from,
				To: last.SequenceNumber, FirstTime: first.ApproximateCreationTime, LastTime: last.ApproximateCreationTime,
				Records: int64(len(evs)), Events: map[event.Kind]int64{event.Expired: int64(len(evs))}}
			m := manifest.New(r, []manifest.Object{{Key: key, Bytes: int64(gz.Len()), SHA256: hexSHA(gz.Bytes())}}, prev, "bench", t0)
			enc := manifest.Encode(m)
			store(manifest.Key(m), enc)
			prev, from = manifest.Digest(enc), m.To
			n, size = n+int64(len(evs)), size+int64(gz.Len())
		}
	}
	return n, size
}

// BenchmarkVerifyRead is the read `archiver verify` makes of an archive
// of gzip objects: the reader with the Verifier (every line checked
// against its key), and with the Coverage too (manifests read, every
// object's stored bytes hashed, every line placed in its shard's
// coverage). SetBytes counts the compressed bytes.
func BenchmarkVerifyRead(b *testing.B) {
	dir := b.TempDir()
	n, size := benchArchive(b, dir, 4, 6, 2000)
	for _, withCoverage := range []bool{false, true} {
		name := "verifier"
		if withCoverage {
			name = "verifier+coverage"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				v := archive.NewVerifier()
				o := v.Hook(archive.Options{SkipImages: true})
				var cov *archive.Coverage
				if withCoverage {
					cov = archive.NewCoverage(archive.Selection{})
					o = cov.Hook(o)
				}
				a, err := archive.Open(testCtx(b), "file://"+dir, o)
				if err != nil {
					b.Fatal(err)
				}
				if cov != nil {
					if err := cov.Load(testCtx(b), a); err != nil {
						b.Fatal(err)
					}
				}
				st, err := a.Events(testCtx(b), archive.Selection{}, func(l archive.Line) error {
					v.Event(&l.Event)
					return nil
				})
				if err != nil || st.Events != n {
					b.Fatalf("read %d events, want %d: %v", st.Events, n, err)
				}
				if cov != nil {
					if r := cov.Finish(); r.Verdict != archive.VerdictComplete || r.ObjectsVerified != 24 {
						b.Fatalf("coverage: %s", r.Summary)
					}
				}
			}
		})
	}
}

// BenchmarkCoverageLoadMemory is the heap `archiver verify` holds per
// manifest once Coverage.Load read them (a manifest of one object each,
// as a shard writes every manifest-interval when it archives little):
// the figure that bounds how long an archive one verify can prove. In
// "window", --since selects the last hour: the others' manifests are held
// as their place in the chain and a hash of their object's key.
func BenchmarkCoverageLoadMemory(b *testing.B) {
	const shards, hours = 4, 2000
	dir := b.TempDir()
	benchArchive(b, dir, shards, hours, 1)
	for _, bc := range []struct {
		name string
		sel  archive.Selection
	}{{"all", archive.Selection{}}, {"window", archive.Selection{Since: t0.Add((hours - 1) * time.Hour)}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				cov := archive.NewCoverage(bc.sel)
				a, err := archive.Open(testCtx(b), "file://"+dir, cov.Hook(archive.Options{}))
				if err != nil {
					b.Fatal(err)
				}
				if err := cov.Load(testCtx(b), a); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(shards*hours), "heap-B/manifest")
				runtime.KeepAlive(cov)
			}
		})
	}
}
