//go:build unix

package filesink

import (
	"context"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// BenchmarkFileSinkAppend is the file sink's CPU per event: batches of
// the NATS bench's 250 session expiries (one shard, one hour file),
// rendered in Write and appended by the worker, with the fsync replaced
// by nothing (the disk's latency is not the sink's CPU). It reports the
// process's CPU time (user and system, from getrusage) per event beside
// the wall time; run it with -cpu 1 and a fixed -benchtime (the file
// grows by about 170 KB per batch), old and new alternately, to compare.
func BenchmarkFileSinkAppend(b *testing.B) {
	s, err := New(b.TempDir(), sinkapi.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	s.fsync = func(*os.File) error { return nil }
	evs := testkit.BenchEvents()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	ack := func(err error) {
		if err != nil {
			mu.Lock()
			failed = err
			mu.Unlock()
		}
		wg.Done()
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		wg.Add(1)
		if err := s.Write(ctx, sinkapi.Batch{StreamARN: evs[0].StreamARN, ShardID: evs[0].ShardID, Events: evs}, ack); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	cpu := cpuTime(b) - cpu0
	if failed != nil {
		b.Fatal(failed)
	}
	n := float64(b.N * len(evs))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/event")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
