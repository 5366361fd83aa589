package stream

import (
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// expiredItem is the shape the engine bench streams: a small item with a
// TTL attribute, deleted by the sweeper (REMOVE with its OldImage).
func expiredItem(i int) Change {
	id := "item-" + strconv.Itoa(i)
	old := attr.Item{"pk": attr.Str(id), "exp": attr.MustNum("1700000000"), "payload": attr.Str("some archived payload of modest size"), "gsi": attr.Str("g" + strconv.Itoa(i%100))}
	return Change{EventName: "REMOVE", Keys: attr.Item{"pk": attr.Str(id)}, Old: old, Service: true}
}

func BenchmarkAppend(b *testing.B) {
	reg := NewRegistry(Options{Shards: 4})
	s := reg.Create("", "bench", NewAndOldImages)
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Append(expiredItem(int(n.Add(1))))
		}
	})
}

func BenchmarkAppendEncoded(b *testing.B) {
	reg := NewRegistry(Options{Shards: 4})
	s := reg.Create("", "bench", NewAndOldImages)
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c := expiredItem(int(n.Add(1)))
			_ = s.AppendEncoded(EncodedChange{EventName: c.EventName, Keys: attr.AppendItemJSON(nil, c.Keys), Old: attr.AppendItemJSON(nil, c.Old),
				Size: attr.ItemSize(c.Keys) + attr.ItemSize(c.Old), Service: true})
		}
	})
}

func BenchmarkGetRecordsDrain(b *testing.B) {
	reg := NewRegistry(Options{Shards: 1})
	s := reg.Create("", "bench", NewAndOldImages)
	for i := 0; i < 100000; i++ {
		s.Append(expiredItem(i))
	}
	shard := s.Shards()[0].ID
	b.ResetTimer()
	recs := 0
	for i := 0; i < b.N; i++ {
		resp, err := reg.Handle(bg, "", "GetShardIterator", []byte(fmt.Sprintf(`{"StreamArn":%q,"ShardId":%q,"ShardIteratorType":"TRIM_HORIZON"}`, s.ARN(), shard)))
		if err != nil {
			b.Fatal(err)
		}
		it := resp.(*getShardIteratorOut).ShardIterator
		for {
			out, err := reg.Handle(bg, "", "GetRecords", []byte(`{"ShardIterator":"`+it+`"}`))
			if err != nil {
				b.Fatal(err)
			}
			o := out.(*getRecordsOut)
			if _, err := o.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
			recs += len(o.records)
			if len(o.records) == 0 {
				break
			}
			it = o.next
		}
	}
	b.ReportMetric(float64(recs)/b.Elapsed().Seconds(), "records/s")
}

// TestMemoryPerRecord reports (never asserts) the heap a million expired
// items' records take. Skipped in -short runs.
func TestMemoryPerRecord(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measurement only")
	}
	const n = 200000
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	reg := NewRegistry(Options{Shards: 4})
	s := reg.Create("", "bench", NewAndOldImages)
	for i := 0; i < n; i++ {
		s.Append(expiredItem(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d records: %.0f bytes of heap per record (%.0f MB per million)", n, per, per*1e6/(1<<20))
	runtime.KeepAlive(s)
}
