package wal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/ttl-archiver/archiver/internal/smallfs"
)

// fillLog appends 1 KiB entries with TryAppend, syncing each, until one is
// refused; it returns the accepted entries and the refusal.
func fillLog(t *testing.T, l *Log, prefix string) ([]string, error) {
	t.Helper()
	var acked []string
	for i := 0; i < 1<<20; i++ {
		e := fmt.Sprintf("%s-%06d-%01000d", prefix, i, 0)
		pos, err := l.TryAppend(func(b []byte) []byte { return append(b, e...) })
		if err != nil {
			return acked, err
		}
		if err := l.Sync(pos); err != nil {
			t.Fatalf("an entry TryAppend took could not be synced: %v", err)
		}
		acked = append(acked, e)
	}
	t.Fatal("a 1 MiB file system took 1 GiB of entries")
	return nil, nil
}

// TestTryAppendFullDisk fills a real 1 MiB tmpfs: TryAppend refuses an
// entry (ENOSPC, naming the segment) before taking it, every entry it took
// is durable, and once space is freed it takes entries again, with no
// restart; the log then replays exactly the entries taken.
func TestTryAppendFullDisk(t *testing.T) {
	dir := smallfs.Mount(t, "1m")
	ballast := smallfs.Fill(t, dir, 256<<10)
	l, err := Create(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	acked, err := fillLog(t, l, "a")
	if !errors.Is(err, syscall.ENOSPC) || len(acked) == 0 {
		t.Fatalf("after %d entries: refusal %v, want one wrapping ENOSPC", len(acked), err)
	}
	if want := SegmentName(1); !containsStr(err.Error(), want) {
		t.Errorf("refusal %q does not name the segment %s", err, want)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	more, err := fillLog(t, l, "b")
	if len(more) == 0 {
		t.Fatalf("no entry taken once space was freed: %v", err)
	}
	acked = append(acked, more...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := replayAll(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(acked) {
		t.Fatalf("replayed %d entries, %d were taken", len(got), len(acked))
	}
	for i := range got {
		if got[i] != acked[i] {
			t.Fatalf("entry %d: replayed %.20q, took %.20q", i, got[i], acked[i])
		}
	}
}

// TestFailedWriteRetried makes a write fail for real (Append takes no
// reservation, so its entries can outgrow a full tmpfs): Sync reports the
// failure, TryAppend refuses meanwhile, and once space is freed
// a later Sync writes every entry, in order, with no torn entry left in
// the middle of the segment.
func TestFailedWriteRetried(t *testing.T) {
	dir := smallfs.Mount(t, "1m")
	l, err := Create(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	ballast := smallfs.Fill(t, dir, 512<<10)
	var want []string
	var pos uint64
	for i := 0; i < 640; i++ { // 640 KiB: more than is left
		e := fmt.Sprintf("x-%06d-%01000d", i, 0)
		want = append(want, e)
		pos = l.Append(func(b []byte) []byte { return append(b, e...) })
	}
	if err := l.Sync(pos); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Sync on a full disk: %v, want ENOSPC", err)
	}
	if _, err := l.TryAppend(func(b []byte) []byte { return append(b, "refused"...) }); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("TryAppend while the log cannot write: %v, want a refusal naming ENOSPC", err)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for err := l.Sync(pos); err != nil; err = l.Sync(pos) {
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatal(err)
		}
	}
	if l.Failed() != nil {
		t.Errorf("Failed() = %v after a successful Sync", l.Failed())
	}
	if _, err := l.TryAppend(func(b []byte) []byte { return append(b, "after"...) }); err != nil {
		t.Fatalf("TryAppend once the log writes again: %v", err)
	}
	want = append(want, "after")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := replayAll(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("replayed %d entries, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("entry %d: replayed %.20q, want %.20q", i, got[i], want[i])
		}
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
