package wal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// replayAll returns every payload from segment 1 on, as strings.
func replayAll(t *testing.T, dir string) ([]string, error) {
	t.Helper()
	var got []string
	_, err := Replay(dir, 1, func(p []byte) error {
		got = append(got, string(p))
		return nil
	})
	return got, err
}

func TestConcurrentAppendSyncRotate(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				pos := l.Append(func(b []byte) []byte { return fmt.Appendf(b, "w%d-%d", w, i) })
				if err := l.Sync(pos); err != nil {
					t.Error(err)
					return
				}
				if !l.Durable(pos) {
					t.Error("Sync returned before the position was durable")
				}
				if w == 0 && i%50 == 0 {
					if _, err := l.Rotate(); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := replayAll(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers*each {
		t.Fatalf("replayed %d entries, want %d", len(got), writers*each)
	}
	// Each writer's entries are in its order.
	next := map[string]int{}
	for _, g := range got {
		var w, i int
		fmt.Sscanf(g, "w%d-%d", &w, &i)
		k := fmt.Sprint(w)
		if i != next[k] {
			t.Fatalf("writer %d: entry %d after %d", w, i, next[k]-1)
		}
		next[k]++
	}
}

func TestReplayTail(t *testing.T) {
	frame := func(p string) []byte { return AppendFrame(nil, []byte(p)) }
	good := append(frame("one"), frame("two")...)
	bad := frame("three")
	bad[len(bad)-1] ^= 1
	for _, c := range []struct {
		name    string
		newest  []byte // appended to the newest segment after two good entries
		older   bool   // the damage is in an older segment
		want    int    // entries replayed
		errPart string
	}{
		{"clean", nil, false, 2, ""},
		{"torn header", []byte{5, 0}, false, 2, ""},
		{"torn payload", frame("three")[:10], false, 2, ""},
		{"bad checksum last", bad, false, 2, ""},
		{"zeros", make([]byte, 100), false, 2, ""},
		{"bad checksum then more", append(append([]byte(nil), bad...), frame("four")...), false, 0, "corrupt entry at offset 22"},
		{"torn in an older segment", []byte{5, 0}, true, 0, "corrupt entry at offset 22"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			seg1 := append(append([]byte(nil), good...), c.newest...)
			if err := os.WriteFile(filepath.Join(dir, SegmentName(1)), seg1, 0o644); err != nil {
				t.Fatal(err)
			}
			if c.older {
				if err := os.WriteFile(filepath.Join(dir, SegmentName(2)), frame("later"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := replayAll(t, dir)
			if c.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), c.errPart) || !strings.Contains(err.Error(), SegmentName(1)) {
					t.Fatalf("Replay: %v, want an error naming %s and containing %q", err, SegmentName(1), c.errPart)
				}
				return
			}
			if err != nil || len(got) != c.want {
				t.Fatalf("Replay: %d entries (%v), err %v; want %d", len(got), got, err, c.want)
			}
			st, _ := os.Stat(filepath.Join(dir, SegmentName(1)))
			if st.Size() != int64(len(good)) {
				t.Fatalf("segment is %d bytes after replay, want the torn tail cut at %d", st.Size(), len(good))
			}
		})
	}
}

func TestReplayMissingSegment(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []uint64{1, 3} {
		if err := os.WriteFile(filepath.Join(dir, SegmentName(n)), AppendFrame(nil, []byte("x")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := replayAll(t, dir); err == nil || !strings.Contains(err.Error(), SegmentName(2)) {
		t.Fatalf("Replay with a gap: %v, want an error naming the missing segment", err)
	}
}

func TestAppendFrameLayout(t *testing.T) {
	f := AppendFrame(nil, []byte("abc"))
	if binary.LittleEndian.Uint32(f) != 3 || binary.LittleEndian.Uint32(f[4:]) != Checksum([]byte("abc")) || string(f[8:]) != "abc" {
		t.Fatalf("frame %x", f)
	}
}
