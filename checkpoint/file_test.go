package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixtureNow is the clock of every store openT opens: fixtures name dates
// near it (finishedAt, sweep windows), and the store's pruning compares them
// with its clock, so the real clock would age them out.
var fixtureNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// openT opens the file store at path with its clock fixed at fixtureNow.
func openT(t *testing.T, path string) *FileStore {
	t.Helper()
	s, err := OpenFileWith(path, FileOptions{Now: func() time.Time { return fixtureNow }})
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFileStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.json")
	s := openT(t, path)
	got, err := s.Load(ctx, "arn:a")
	if err != nil || len(got) != 0 {
		t.Fatalf("Load on empty store = %v, %v; want empty", got, err)
	}
	saves := []struct {
		arn, shard string
		cp         Checkpoint
	}{
		{"arn:a", "shard-1", Checkpoint{SequenceNumber: "100"}},
		{"arn:a", "shard-2", Checkpoint{SequenceNumber: "200", Finished: true}},
		{"arn:b", "shard-1", Checkpoint{SequenceNumber: "5"}},
		{"arn:a", "shard-1", Checkpoint{SequenceNumber: "12345678901234567890123"}},
		{"arn:b", "shard-0", Checkpoint{Finished: true}},
	}
	for _, sv := range saves {
		if err := s.Save(ctx, sv.arn, sv.shard, sv.cp); err != nil {
			t.Fatalf("Save(%s,%s): %v", sv.arn, sv.shard, err)
		}
	}
	want := map[string]map[string]Checkpoint{
		"arn:a": {"shard-1": {SequenceNumber: "12345678901234567890123"}, "shard-2": {SequenceNumber: "200", Finished: true}},
		"arn:b": {"shard-1": {SequenceNumber: "5"}, "shard-0": {Finished: true}},
	}
	check := func(s *FileStore) {
		t.Helper()
		for arn, w := range want {
			got, err := s.Load(ctx, arn)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("Load(%s) = %v, want %v", arn, got, w)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "arn:a"); err == nil {
		t.Error("Load after Close succeeded")
	}
	if err := s.Save(ctx, "arn:a", "x", Checkpoint{}); err == nil {
		t.Error("Save after Close succeeded")
	}
	s2 := openT(t, path)
	check(s2)
	// Load returns a copy.
	m, _ := s2.Load(ctx, "arn:a")
	m["shard-1"] = Checkpoint{SequenceNumber: "1"}
	check(s2)
}

func TestFileStoreLockedInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.json")
	s := openT(t, path)
	_, err := OpenFile(path)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second OpenFile error = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the path %s", err, path)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenFile(path)
	if err != nil {
		t.Fatalf("OpenFile after Close: %v", err)
	}
	s2.Close()
}

// TestFileStoreLockHelper is the child side of TestFileStoreLockedOtherProcess.
func TestFileStoreLockHelper(t *testing.T) {
	path := os.Getenv("CHECKPOINT_LOCK_HELPER")
	if path == "" {
		t.Skip("helper process only")
	}
	s, err := OpenFile(path)
	if err != nil {
		fmt.Fprintf(os.Stdout, "OPEN-ERROR locked=%v: %v\n", errors.Is(err, ErrLocked), err)
		return
	}
	fmt.Fprintln(os.Stdout, "OPENED")
	if os.Getenv("CHECKPOINT_LOCK_HOLD") != "" {
		// Hold the lock until the parent closes our stdin.
		io.Copy(io.Discard, os.Stdin)
	}
	s.Close()
}

func TestFileStoreLockedOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.json")
	child := func(hold bool) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileStoreLockHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CHECKPOINT_LOCK_HELPER="+path)
		if hold {
			cmd.Env = append(cmd.Env, "CHECKPOINT_LOCK_HOLD=1")
		}
		return cmd
	}

	// This process holds the lock: the child must be refused.
	s := openT(t, path)
	out, err := child(false).CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OPEN-ERROR locked=true") || !strings.Contains(string(out), path) {
		t.Fatalf("child output = %s; want a locked error naming %s", out, path)
	}
	s.Close()

	// The child holds the lock: this process must be refused until it exits.
	cmd := child(true)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	tmp := make([]byte, 64)
	for !strings.Contains(string(buf), "OPENED") {
		n, err := stdout.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			t.Fatalf("child did not open the store: %v, output %q", err, buf)
		}
	}
	if _, err := OpenFile(path); !errors.Is(err, ErrLocked) {
		t.Errorf("OpenFile while another process holds the lock = %v, want ErrLocked", err)
	}
	stdin.Close()
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	s2, err := OpenFile(path)
	if err != nil {
		t.Fatalf("OpenFile after the other process exited: %v", err)
	}
	s2.Close()
}

// failingWriter writes n bytes, then fails: a torn write.
type failingWriter struct {
	w io.Writer
	n int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k, _ := f.w.Write(p[:f.n])
		f.n = 0
		return k, errors.New("disk full (simulated)")
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func TestFileStoreTornWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	s := openT(t, path)
	if err := s.Save(ctx, "arn", "s1", Checkpoint{SequenceNumber: "10"}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	// A write torn half-way fails the Save and leaves the old file intact.
	s.wrapWriter = func(w io.Writer) io.Writer { return &failingWriter{w: w, n: 20} }
	if err := s.Save(ctx, "arn", "s1", Checkpoint{SequenceNumber: "20"}); err == nil {
		t.Fatal("Save with a torn write succeeded")
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(before) {
		t.Fatalf("torn write changed the file:\n%s", after)
	}
	if tmps, _ := filepath.Glob(path + ".tmp-*"); len(tmps) != 0 {
		t.Errorf("temporary files left behind: %v", tmps)
	}
	s.wrapWriter = nil

	// A crash after the temp file is written but before the rename: the
	// process dies (simulated by the hook keeping the torn temp file and
	// the store being abandoned). A reopened store sees the old state and
	// removes the stale temp file.
	s.beforeRename = func(tmp string) error {
		// Tear the temporary file too, as a crash mid-write would.
		if err := os.WriteFile(tmp, []byte(`{"version":1,"str`), 0o644); err != nil {
			return err
		}
		return errors.New("crash (simulated)")
	}
	if err := s.Save(ctx, "arn", "s1", Checkpoint{SequenceNumber: "30"}); err == nil {
		t.Fatal("Save with a crash before rename succeeded")
	}
	// Leave a stale temp file as a killed process would.
	if err := os.WriteFile(path+".tmp-999", []byte("{garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openT(t, path)
	got, err := s2.Load(ctx, "arn")
	if err != nil {
		t.Fatal(err)
	}
	if got["s1"].SequenceNumber != "10" {
		t.Errorf("after crash the checkpoint is %+v, want the last durable one (10)", got["s1"])
	}
	if tmps, _ := filepath.Glob(path + ".tmp-*"); len(tmps) != 0 {
		t.Errorf("stale temporary files not removed: %v", tmps)
	}
}

func TestFileStoreFailedSaveIsWrittenLater(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.json")
	s := openT(t, path)
	s.beforeRename = func(string) error { return errors.New("injected") }
	if err := s.Save(ctx, "arn", "a", Checkpoint{SequenceNumber: "1"}); err == nil {
		t.Fatal("want error")
	}
	s.beforeRename = nil
	if err := s.Save(ctx, "arn", "b", Checkpoint{SequenceNumber: "2"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openT(t, path)
	got, _ := s2.Load(ctx, "arn")
	if got["a"].SequenceNumber != "1" || got["b"].SequenceNumber != "2" {
		t.Errorf("got %v", got)
	}
}

func TestFileStoreCorruptFile(t *testing.T) {
	cases := []struct{ name, content, want string }{
		{"truncated", `{"version":1,"streams":{"a":{`, "not a valid checkpoint file"},
		{"empty", ``, "not a valid checkpoint file"},
		{"wrong version", `{"version":7,"streams":{}}`, "field version"},
		{"bad sequence", `{"version":1,"streams":{"a":{"s":{"sequenceNumber":"12x"}}}}`, "sequenceNumber"},
		{"unknown field", `{"version":1,"streams":{},"extra":1}`, "extra"},
		{"trailing", `{"version":1,"streams":{}} {}`, "trailing"},
		{"bad finishedAt", `{"version":2,"streams":{"a":{"s":{"finished":true,"finishedAt":"yesterday"}}}}`, `streams["a"]["s"].finishedAt`},
		{"finishedAt unfinished", `{"version":2,"streams":{"a":{"s":{"sequenceNumber":"1","finishedAt":"2026-01-01T00:00:00Z"}}}}`, "not finished"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp.json")
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenFile(path)
			if err == nil {
				t.Fatal("OpenFile of a corrupt file succeeded")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q should name %s and say %q", err, path, c.want)
			}
			// The failed open released the lock.
			os.Remove(path)
			s, err := OpenFile(path)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			s.Close()
		})
	}
}

func TestFileStoreBadArguments(t *testing.T) {
	ctx := context.Background()
	if _, err := OpenFile(""); err == nil {
		t.Error("OpenFile(\"\") succeeded")
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing-dir", "cp.json")); err == nil {
		t.Error("OpenFile in a missing directory succeeded")
	}
	s := openT(t, filepath.Join(t.TempDir(), "cp.json"))
	for _, c := range []struct{ arn, shard, seq string }{{"", "s", "1"}, {"a", "", "1"}, {"a", "s", "-1"}} {
		if err := s.Save(ctx, c.arn, c.shard, Checkpoint{SequenceNumber: c.seq}); err == nil {
			t.Errorf("Save(%q,%q,%q) succeeded", c.arn, c.shard, c.seq)
		}
	}
}

func TestFileStoreConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.json")
	s := openT(t, path)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 1; i <= 20; i++ {
				if err := s.Save(ctx, "arn", fmt.Sprintf("shard-%02d", g), Checkpoint{SequenceNumber: fmt.Sprint(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	s.Close()
	s2 := openT(t, path)
	got, _ := s2.Load(ctx, "arn")
	if len(got) != 16 {
		t.Fatalf("got %d shards, want 16", len(got))
	}
	for id, cp := range got {
		if cp.SequenceNumber != "20" {
			t.Errorf("%s = %+v, want 20", id, cp)
		}
	}
}

func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"streams":{"a":{"s":{"sequenceNumber":"12","finished":true}}}}`))
	f.Add([]byte(`{"version":2,"streams":{"a":{"s":{"sequenceNumber":"12","finished":true,"finishedAt":"2026-11-22T09:00:00+02:00"}}}}`))
	f.Add([]byte(`{"version":1,"streams":{}}`))
	f.Add([]byte(`{"version":3,"streams":{},"sweep":{"Sessions":{"window":"2026-11-22T09:01:00.123Z"}}}`))
	f.Add([]byte(`{"version":2,"streams":{},"sweep":{"Sessions":{"window":"2026-11-22T09:01:00Z"}}}`))
	f.Add([]byte(`{"version":1,"streams":{"":{}}}`))
	f.Add([]byte(`[]`))
	opened := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeFile(b, opened)
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes to the same thing.
		enc, err := encodeFile(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeFile(enc, opened.Add(time.Hour))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(m.streams) != len(m2.streams) || len(m.sweeps) != len(m2.sweeps) {
			t.Fatalf("round trip changed %v to %v", m, m2)
		}
		for table, w := range m.sweeps {
			if !w.Equal(m2.sweeps[table]) {
				t.Fatalf("round trip changed sweep cursor %s from %v to %v", table, w, m2.sweeps[table])
			}
		}
		for arn, shards := range m.streams {
			if len(shards) != len(m2.streams[arn]) {
				t.Fatalf("round trip changed %v to %v", m, m2)
			}
			for id, e := range shards {
				e2 := m2.streams[arn][id]
				if e.cp != e2.cp || !e.finishedAt.Equal(e2.finishedAt) {
					t.Fatalf("round trip changed %s/%s from %+v to %+v", arn, id, e, e2)
				}
			}
		}
	})
}

// TestFileStorePrunesFinished: a finished shard's checkpoint is dropped
// PruneFinishedAfter after it was first saved finished, from memory and
// from the file; unfinished ones stay however old they are.
func TestFileStorePrunesFinished(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.json")
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := OpenFileWith(path, FileOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	save := func(id string, cp Checkpoint) {
		t.Helper()
		if err := s.Save(ctx, "arn", id, cp); err != nil {
			t.Fatal(err)
		}
	}
	save("parent", Checkpoint{SequenceNumber: "10", Finished: true})
	save("open", Checkpoint{SequenceNumber: "11"})
	now = now.Add(DefaultPruneFinishedAfter - time.Minute)
	// Saving finished again keeps the first finishedAt.
	save("parent", Checkpoint{SequenceNumber: "10", Finished: true})
	save("child", Checkpoint{SequenceNumber: "20", Finished: true})
	now = now.Add(2 * time.Minute)
	save("open", Checkpoint{SequenceNumber: "12"})
	got, err := s.Load(ctx, "arn")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["parent"]; ok || len(got) != 2 || got["open"].SequenceNumber != "12" || !got["child"].Finished {
		t.Fatalf("after %v: %v, want open and child only", DefaultPruneFinishedAfter, got)
	}
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"parent"`) || !strings.Contains(string(b), `"finishedAt"`) {
		t.Errorf("file still names the pruned shard or lacks finishedAt:\n%s", b)
	}
	// Reopened later, the store prunes what expired meanwhile.
	now = now.Add(DefaultPruneFinishedAfter)
	s2, err := OpenFileWith(path, FileOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, _ = s2.Load(ctx, "arn")
	if len(got) != 1 || got["open"].SequenceNumber != "12" {
		t.Fatalf("after reopening: %v, want open only", got)
	}
}

// TestFileStoreReadsVersion1: files written before finishedAt existed are
// read; their finished shards count as finished when the file was opened.
func TestFileStoreReadsVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"streams":{"arn":{"a":{"sequenceNumber":"5","finished":true},"b":{"sequenceNumber":"7"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	s, err := OpenFileWith(path, FileOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Save(ctx, "arn", "b", Checkpoint{SequenceNumber: "8"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"version": 2`) || !strings.Contains(string(b), `"finishedAt": "2026-11-22T09:00:00Z"`) {
		t.Errorf("rewritten file:\n%s", b)
	}
	got, _ := s.Load(ctx, "arn")
	if !got["a"].Finished || got["b"].SequenceNumber != "8" {
		t.Errorf("got %v", got)
	}
}
