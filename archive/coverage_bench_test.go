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
	for s := range shards {
		sn, ss, _ := writeShard(b, dir, archShard{shard: fmt.Sprintf("shardId-%d", s), id: s, hours: hours, perObject: perObject})
		n, size = n+sn, size+ss
	}
	return n, size
}

// archShard is one shard of a test archive: perObject expired events an
// hour for hours hours from t0 + startHour, one gzip object and one
// manifest an hour, the first naming prev (its parent's last manifest),
// the last Ended when ended. id makes its event IDs distinct.
type archShard struct {
	shard, parent, prev             string
	id, startHour, hours, perObject int
	ended                           bool
}

// writeShard writes sh's objects and manifests below dir and returns its
// events, their compressed bytes and its last manifest's digest.
func writeShard(b testing.TB, dir string, sh archShard) (n, size int64, last string) {
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
	prev, from := sh.prev, ""
	for h := sh.startHour; h < sh.startHour+sh.hours; h++ {
		evs := inRegion("us-east-1", events("SessionData", sh.shard, event.Expired, 3600*h, sh.perObject, 0), true)
		var lines, gz bytes.Buffer
		for i := range evs {
			evs[i].EventID = fmt.Sprintf("%032x", sh.id<<32|3600*h+i)
			lines.Write(event.AppendLine(nil, &evs[i]))
		}
		zw := gzip.NewWriter(&gz)
		zw.Write(lines.Bytes())
		zw.Close()
		first, lastEv := &evs[0], &evs[len(evs)-1]
		key := fmt.Sprintf("table=SessionData/kind=expired/dt=%s/hr=%s/us-east-1.%s-%s-%s.jsonl.gz", first.ApproximateCreationTime.Format("2006-01-02"),
			first.ApproximateCreationTime.Format("15"), first.ShardID, first.SequenceNumber, lastEv.SequenceNumber)
		store(key, gz.Bytes())
		r := manifest.Range{StreamARN: first.StreamARN, Region: first.Region, Table: first.Table, ShardID: first.ShardID, ParentShardID: sh.parent,
			From: from, To: lastEv.SequenceNumber, FirstTime: first.ApproximateCreationTime, LastTime: lastEv.ApproximateCreationTime,
			Records: int64(len(evs)), Events: map[event.Kind]int64{event.Expired: int64(len(evs))}, Ended: sh.ended && h == sh.startHour+sh.hours-1}
		m := manifest.New(r, []manifest.Object{{Key: key, Bytes: int64(gz.Len()), SHA256: hexSHA(gz.Bytes())}}, prev, "bench", t0)
		enc := manifest.Encode(m)
		store(manifest.Key(m), enc)
		prev, from = manifest.Digest(enc), m.To
		n, size = n+int64(len(evs)), size+int64(gz.Len())
	}
	return n, size, prev
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
//
// "lineage" is one lineage of shards that live 4 hours each, as DynamoDB
// Streams rolls them: a window of its last hour reads the shards outside
// it at their end only; manifests-read/listed says how many it
// downloaded.
func BenchmarkCoverageLoadMemory(b *testing.B) {
	const shards, hours = 4, 2000
	dir, lineage := b.TempDir(), b.TempDir()
	benchArchive(b, dir, shards, hours, 1)
	prev := ""
	for s := range shards * hours / 4 {
		sh := archShard{shard: fmt.Sprintf("shard-%05d", s), id: s, startHour: 4 * s, hours: 4, perObject: 1, prev: prev, ended: true}
		if s > 0 {
			sh.parent = fmt.Sprintf("shard-%05d", s-1)
		}
		_, _, prev = writeShard(b, lineage, sh)
	}
	for _, bc := range []struct {
		name, dir string
		sel       archive.Selection
		whole     bool
	}{
		{"all", dir, archive.Selection{}, false},
		{"window", dir, archive.Selection{Since: t0.Add((hours - 1) * time.Hour)}, false},
		{"lineage", lineage, archive.Selection{Since: t0.Add((shards*hours - 1) * time.Hour)}, false},
		{"lineage_whole_chains", lineage, archive.Selection{Since: t0.Add((shards*hours - 1) * time.Hour)}, true},
	} {
		dir := bc.dir
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				cov := archive.NewCoverage(bc.sel)
				if bc.whole {
					cov.WholeChains()
				}
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
				rep := cov.Finish()
				b.ReportMetric(float64(rep.Manifests)/(shards*hours), "manifests-read/listed")
				runtime.KeepAlive(cov)
			}
		})
	}
}
