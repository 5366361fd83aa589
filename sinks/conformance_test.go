package sinks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
)

// harness adapts one sink kind to the conformance suite.
type harness struct {
	name string
	// open opens a fresh sink on a fresh destination.
	open func(t *testing.T) (Sink, destination)
	// broken opens a sink whose destination fails once the sink is open.
	broken func(t *testing.T) Sink
}

// destination reads what reached a sink's destination.
type destination interface {
	// stored returns the events at the destination now, in destination
	// order (file order, object order, stream order).
	stored(t testing.TB) []event.Event
}

type destFunc func(t testing.TB) []event.Event

func (f destFunc) stored(t testing.TB) []event.Event { return f(t) }

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func decodeAll(t testing.TB, data []byte) []event.Event {
	var out []event.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		e, err := event.DecodeLine(sc.Bytes())
		if err != nil {
			t.Errorf("decode: %v", err)
			return out
		}
		out = append(out, e)
	}
	return out
}

func harnesses(t *testing.T) []harness {
	return []harness{
		{
			name: "file",
			open: func(t *testing.T) (Sink, destination) {
				dir := t.TempDir()
				s, _, err := Open(testkit.Ctx(t), "file://"+dir, Options{})
				if err != nil {
					t.Fatal(err)
				}
				return s, destFunc(func(t testing.TB) []event.Event {
					var files []string
					filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
						if err == nil && !d.IsDir() {
							files = append(files, p)
						}
						return nil
					})
					sort.Strings(files)
					var out []event.Event
					for _, f := range files {
						data, _ := os.ReadFile(f)
						out = append(out, decodeAll(t, data)...)
					}
					return out
				})
			},
			broken: func(t *testing.T) Sink {
				dir := t.TempDir()
				s, err := NewFileSink(filepath.Join(dir, "archive"), Options{})
				if err != nil {
					t.Fatal(err)
				}
				// The directory is replaced by a file.
				os.RemoveAll(filepath.Join(dir, "archive"))
				os.WriteFile(filepath.Join(dir, "archive"), nil, 0o644)
				return s
			},
		},
		{
			name: "stdout",
			open: func(t *testing.T) (Sink, destination) {
				buf := &syncBuffer{}
				s, _, err := Open(testkit.Ctx(t), "stdout://", Options{Stdout: buf})
				if err != nil {
					t.Fatal(err)
				}
				return s, destFunc(func(t testing.TB) []event.Event { return decodeAll(t, buf.lines()) })
			},
			broken: func(t *testing.T) Sink { return NewWriterSink("stdout://", testkit.FailingWriter{}, false, Options{}) },
		},
		{
			name: "s3",
			open: func(t *testing.T) (Sink, destination) {
				v := testkit.StartVersity(t)
				s, _, err := Open(testkit.Ctx(t), "s3://archive/ttl?endpoint="+v.Endpoint+"&path-style=true&flush-bytes=16KiB&flush-interval=100ms", Options{AWSConfig: testkit.AWSConfig})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close(context.Background()) })
				return s, destFunc(func(t testing.TB) []event.Event {
					var out []event.Event
					for _, k := range v.Objects(t, "ttl/") {
						evs, _ := v.Read(t, k)
						out = append(out, evs...)
					}
					return out
				})
			},
			broken: func(t *testing.T) Sink {
				s, err := NewS3(testkit.Ctx(t), S3Config{Bucket: "archive", Endpoint: "http://" + testkit.FreePort(t), PathStyle: true, MaxAttempts: 2, RetryBase: 5 * time.Millisecond, FlushInterval: 50 * time.Millisecond}, Options{AWSConfig: testkit.AWSConfig})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
		},
		{
			name: "nats",
			open: func(t *testing.T) (Sink, destination) {
				ns := testkit.StartNATS(t, nil)
				s, _, err := Open(testkit.Ctx(t), "nats://"+ns.URL+"?create-stream=CONF", Options{})
				if err != nil {
					t.Fatal(err)
				}
				_, js := ns.Client(t)
				return s, destFunc(func(t testing.TB) []event.Event {
					st, err := js.Stream(testkit.Ctx(t), "CONF")
					if err != nil {
						t.Fatal(err)
					}
					var out []event.Event
					for _, m := range testkit.StreamMsgs(t, st) {
						out = append(out, decodeAll(t, append(m.Data(), '\n'))...)
					}
					return out
				})
			},
			broken: func(t *testing.T) Sink {
				ns := testkit.StartNATS(t, nil)
				s, _, err := Open(testkit.Ctx(t), "nats://"+ns.URL+"?create-stream=CONF", Options{})
				if err != nil {
					t.Fatal(err)
				}
				ns.Stop()
				return s
			},
		},
	}
}

// TestConformance runs the Sink contract against every sink.
func TestConformance(t *testing.T) {
	for _, h := range harnesses(t) {
		t.Run(h.name, func(t *testing.T) {
			t.Run("OrderPerShardAndAckAfterDurable", func(t *testing.T) { conformOrderAndDurability(t, h) })
			t.Run("ConcurrentShards", func(t *testing.T) { conformConcurrentShards(t, h) })
			t.Run("CloseFlushes", func(t *testing.T) { conformCloseFlushes(t, h) })
			t.Run("ErrorsSurface", func(t *testing.T) { conformErrorsSurface(t, h) })
		})
	}
}

func conformOrderAndDurability(t *testing.T, h harness) {
	ctx := testkit.Ctx(t)
	s, dest := h.open(t)
	defer s.Close(ctx)
	shards := []string{"shardId-a", "shardId-b", "shardId-c"}
	const batches, per = 5, 7
	var mu sync.Mutex
	var problems []string
	type sent struct{ ids []string }
	a := testkit.NewAcks()
	for i := 0; i < batches; i++ {
		for _, sh := range shards {
			evs := testkit.Events("conf", sh, i*per, per)
			ids := make([]string, len(evs))
			for j := range evs {
				ids[j] = evs[j].EventID
			}
			id := fmt.Sprintf("%s/%d", sh, i)
			inner := a.Ack(id)
			// The acknowledgement must find every event of the batch at
			// the destination already.
			ack := func(err error) {
				if err == nil {
					have := map[string]bool{}
					for _, e := range dest.stored(t) {
						have[e.EventID] = true
					}
					for _, want := range ids {
						if !have[want] {
							mu.Lock()
							problems = append(problems, fmt.Sprintf("batch %s acknowledged before event %s was stored", id, want))
							mu.Unlock()
							break
						}
					}
				}
				inner(err)
			}
			if err := s.Write(ctx, Batch{ShardID: sh, Events: evs}, ack); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := a.All()
	if len(got) != batches*len(shards) {
		t.Fatalf("after Flush %d of %d batches acknowledged", len(got), batches*len(shards))
	}
	for id := range got {
		if n, err := a.Get(id); n != 1 || err != nil {
			t.Fatalf("batch %s: %d acks, err %v", id, n, err)
		}
	}
	mu.Lock()
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	mu.Unlock()
	last := map[string]string{}
	count := map[string]int{}
	for _, e := range dest.stored(t) {
		if prev, ok := last[e.ShardID]; ok && event.CompareSequence(prev, e.SequenceNumber) >= 0 {
			t.Fatalf("shard %s: sequence %s after %s", e.ShardID, e.SequenceNumber, prev)
		}
		last[e.ShardID] = e.SequenceNumber
		count[e.ShardID]++
	}
	for _, sh := range shards {
		if count[sh] != batches*per {
			t.Fatalf("shard %s: %d events stored, want %d", sh, count[sh], batches*per)
		}
	}
}

func conformCloseFlushes(t *testing.T, h harness) {
	ctx := testkit.Ctx(t)
	s, dest := h.open(t)
	a := testkit.NewAcks()
	evs := testkit.Events("conf", "shardId-a", 1, 5)
	if err := s.Write(ctx, Batch{ShardID: "shardId-a", Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Get("b"); n != 1 || err != nil {
		t.Fatalf("after Close: %d acks, err %v", n, err)
	}
	if got := len(dest.stored(t)); got != 5 {
		t.Fatalf("after Close %d events stored, want 5", got)
	}
	if err := s.Write(ctx, Batch{Events: evs}, a.Ack("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// conformErrorsSurface: with the destination failing, a batch is either
// refused by Write or acknowledged with an error — never acknowledged as
// durable, never left without an answer once Close returns.
func conformErrorsSurface(t *testing.T, h harness) {
	ctx := testkit.Ctx(t)
	s := h.broken(t)
	a := testkit.NewAcks()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	werr := s.Write(wctx, Batch{Events: testkit.Events("conf", "shardId-a", 1, 3)}, a.Ack("b"))
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	defer ccancel()
	s.Close(cctx)
	n, aerr := a.Get("b")
	switch {
	case werr != nil && n != 0:
		t.Fatalf("Write refused the batch (%v) but it was acknowledged too", werr)
	case werr != nil:
	case n != 1:
		t.Fatalf("Write took the batch, Close returned, and it was acknowledged %d times", n)
	case aerr == nil:
		t.Fatal("a batch was acknowledged as durable although the destination is broken")
	}
}

// conformConcurrentShards writes each shard from its own goroutine, as the
// consumer does, and checks every event arrives once, in order per shard.
func conformConcurrentShards(t *testing.T, h harness) {
	ctx := testkit.Ctx(t)
	s, dest := h.open(t)
	defer s.Close(ctx)
	const shards, batches, per = 6, 10, 20
	a := testkit.NewAcks()
	var wg sync.WaitGroup
	errs := make(chan error, shards)
	for sh := 0; sh < shards; sh++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shard := fmt.Sprintf("shardId-%d", sh)
			for i := 0; i < batches; i++ {
				if err := s.Write(ctx, Batch{ShardID: shard, Events: testkit.Events("conc", shard, i*per, per)}, a.Ack(fmt.Sprintf("%s/%d", shard, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(a.All()); n != shards*batches {
		t.Fatalf("%d of %d batches acknowledged after Flush", n, shards*batches)
	}
	seen := map[string]int{}
	last := map[string]string{}
	for _, e := range dest.stored(t) {
		if prev, ok := last[e.ShardID]; ok && event.CompareSequence(prev, e.SequenceNumber) >= 0 {
			t.Fatalf("shard %s: sequence %s after %s", e.ShardID, e.SequenceNumber, prev)
		}
		last[e.ShardID] = e.SequenceNumber
		seen[e.EventID]++
	}
	if len(seen) != shards*batches*per {
		t.Fatalf("%d distinct events stored, want %d", len(seen), shards*batches*per)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s stored %d times", id, n)
		}
	}
}
