package filesink

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// newTestFileSink opens a file sink on a fresh directory, closed when the
// test ends.
func newTestFileSink(t *testing.T) (*Sink, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := New(dir, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, dir
}

// readLines decodes every archive line of a file.
func readLines(t testing.TB, path string) []event.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		e, err := event.DecodeLine(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	return out
}

func TestFileSinkLayoutAndContent(t *testing.T) {
	ctx := testkit.Ctx(t)
	dir := t.TempDir()
	s, _, err := open(ctx, "file://"+dir, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := testkit.NewAcks()
	evs := testkit.Events("sessions", "shard-1", 1, 10)
	// The last event falls in the next hour.
	evs[9].ApproximateCreationTime = time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)
	other := testkit.Events("carts", "shard-2", 1, 3)
	if err := s.Write(ctx, sinkapi.Batch{ShardID: "shard-1", Events: evs[:5]}, a.Ack("b1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, sinkapi.Batch{ShardID: "shard-2", Events: other}, a.Ack("b2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, sinkapi.Batch{ShardID: "shard-1", Events: evs[5:]}, a.Ack("b3")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b1", "b2", "b3"} {
		if err := a.WaitAck(t, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	h05 := readLines(t, filepath.Join(dir, "sessions", "2026-03-04", "05.jsonl"))
	h06 := readLines(t, filepath.Join(dir, "sessions", "2026-03-04", "06.jsonl"))
	carts := readLines(t, filepath.Join(dir, "carts", "2026-03-04", "05.jsonl"))
	if len(h05) != 9 || len(h06) != 1 || len(carts) != 3 {
		t.Fatalf("lines per file: %d %d %d", len(h05), len(h06), len(carts))
	}
	for i := range h05 {
		if !testkit.SameEvent(h05[i], evs[i]) {
			t.Fatalf("line %d differs:\n%+v\n%+v", i, h05[i], evs[i])
		}
	}
	if !testkit.SameEvent(h06[0], evs[9]) {
		t.Fatal("06.jsonl differs")
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, sinkapi.Batch{Events: evs[:1]}, a.Ack("late")); !errors.Is(err, sinkapi.ErrClosed) {
		t.Fatalf("Write after Close: %v, want sinkapi.ErrClosed", err)
	}
	if n, _ := a.Get("late"); n != 0 {
		t.Fatal("a refused batch was acknowledged")
	}
}

func TestFileSinkAppendsAcrossOpens(t *testing.T) {
	ctx := testkit.Ctx(t)
	dir := t.TempDir()
	evs := testkit.Events("t1", "s", 1, 4)
	for i := 0; i < 2; i++ {
		s, err := New(dir, sinkapi.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a := testkit.NewAcks()
		if err := s.Write(ctx, sinkapi.Batch{Events: evs[i*2 : i*2+2]}, a.Ack("b")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := a.Get("b"); n != 1 || err != nil {
			t.Fatalf("Close did not flush: %d %v", n, err)
		}
	}
	if got := readLines(t, filepath.Join(dir, "t1", "2026-03-04", "05.jsonl")); len(got) != 4 {
		t.Fatalf("%d lines, want 4", len(got))
	}
}

// TestFileSinkRejectsBadTableNames: an event whose table name would escape
// the directory is rejected alone; the rest of its batch is written.
func TestFileSinkRejectsBadTableNames(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, dir := newTestFileSink(t)
	a := testkit.NewAcks()
	evs := testkit.Events("t", "s", 1, 4)
	evs[0].Table = "../escape"
	evs[2].Table = "a/b"
	if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	testkit.AssertRejected(t, a.WaitAck(t, "b"), []int{0, 2}, "table name")
	lines := readLines(t, filepath.Join(dir, "t", "2026-03-04", "05.jsonl"))
	if len(lines) != 2 || lines[0].EventID != evs[1].EventID || lines[1].EventID != evs[3].EventID {
		t.Fatalf("file holds %d lines, want events 1 and 3", len(lines))
	}
}

func TestFileSinkUnwritableDirectory(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, dir := newTestFileSink(t)
	// A regular file where the table directory should be.
	if err := os.WriteFile(filepath.Join(dir, "blocked"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("blocked", "s", 1, 1)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err == nil {
		t.Fatal("append under a file was acknowledged without error")
	}
}

func TestStdoutSink(t *testing.T) {
	ctx := testkit.Ctx(t)
	for _, format := range []string{"envelope", "item"} {
		var buf bytes.Buffer
		s, _, err := open(ctx, "stdout://?format="+format, sinkapi.Options{Stdout: &buf})
		if err != nil {
			t.Fatal(err)
		}
		evs := testkit.Events("t", "s", 1, 3)
		a := testkit.NewAcks()
		if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := a.Get("b"); n != 1 || err != nil {
			t.Fatalf("after Flush: %d acks, err %v", n, err)
		}
		s.Close(ctx)
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("%s: %d lines", format, len(lines))
		}
		for i, l := range lines {
			want := string(event.MarshalLine(&evs[i]))
			if format == "item" {
				want = string(event.PlainJSON(evs[i].OldImage))
			}
			if l != want {
				t.Fatalf("%s line %d:\n%s\nwant\n%s", format, i, l, want)
			}
		}
	}
}

func TestWriterSinkErrorSurfaces(t *testing.T) {
	ctx := testkit.Ctx(t)
	s := NewWriter("test://", testkit.FailingWriter{}, false, sinkapi.Options{})
	defer s.Close(ctx)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 1)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("ack error %v", err)
	}
}

// TestFileSinkSamePathAcrossRounds: batches written one after another to the
// same file each land (a regression: the second round's lines were skipped).
func TestFileSinkSamePathAcrossRounds(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, dir := newTestFileSink(t)
	a := testkit.NewAcks()
	for i := 0; i < 3; i++ {
		if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", i*2, 2)}, a.Ack(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if err := a.WaitAck(t, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		if got := len(readLines(t, filepath.Join(dir, "t", "2026-03-04", "05.jsonl"))); got != (i+1)*2 {
			t.Fatalf("after batch %d: %d lines, want %d", i, got, (i+1)*2)
		}
	}
}

// TestFileSinkFsyncFailure: a failed fsync fails the batch and cuts the
// file back; retried, the file holds every line exactly once, in order.
// (The disk cannot be made to fail an fsync on demand, so the fsync is
// replaced.)
func TestFileSinkFsyncFailure(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, dir := newTestFileSink(t)
	errDisk := errors.New("injected: I/O error")
	var fail atomic.Bool
	s.fsync = func(f *os.File) error {
		if fail.Load() {
			return errDisk
		}
		return f.Sync()
	}
	path := filepath.Join(dir, "t", "2026-03-04", "05.jsonl")
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	a := testkit.NewAcks()
	write := func(id string, first int) error {
		t.Helper()
		if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", first, 5)}, a.Ack(id)); err != nil {
			t.Fatal(err)
		}
		return a.WaitAck(t, id)
	}
	if err := write("A", 0); err != nil {
		t.Fatal(err)
	}
	durable := size()
	fail.Store(true)
	if err := write("B", 5); !errors.Is(err, errDisk) {
		t.Fatalf("B acknowledged with %v, want the fsync error", err)
	}
	if got := size(); got != durable {
		t.Fatalf("file is %d bytes after the failed fsync, want %d (cut back to A)", got, durable)
	}
	fail.Store(false)
	for _, w := range []struct {
		id    string
		first int
	}{{"B2", 5}, {"C", 10}} {
		if err := write(w.id, w.first); err != nil {
			t.Fatalf("%s: %v", w.id, err)
		}
	}
	lines := readLines(t, path)
	want := testkit.Events("t", "s", 0, 15)
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for i := range lines {
		if !testkit.SameEvent(lines[i], want[i]) {
			t.Fatalf("line %d is %s, want %s", i, lines[i].EventID, want[i].EventID)
		}
	}
}
