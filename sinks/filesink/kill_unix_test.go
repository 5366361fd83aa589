//go:build unix

package filesink

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// killChildEnv names the directory a child process of TestKilledMidAppend
// appends to until it is killed.
const killChildEnv = "FILESINK_KILL_CHILD_DIR"

// TestKilledMidAppend: a process appending 2 MB batches through a file
// sink is killed with SIGKILL, again and again, with no warning. SIGKILL
// can stop a write part way (the kernel checks for it between pages), so
// a file may be left ending in a torn line; each next sink cuts that off
// before appending. At the end every line of the file decodes, and each
// kept tail is bytes after a file's last newline. How many tails a run
// tears depends on where the kills land: the test logs it.
func TestKilledMidAppend(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		appendUntilKilled(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 28))
	const kills = 6
	for i := range kills {
		var stderr bytes.Buffer
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledMidAppend$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitGrown(t, dir, &stderr)
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		_ = cmd.Wait()
	}
	// The last sink cuts what the last kill tore, and appends.
	s, err := New(dir, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := testkit.NewAcks()
	if err := s.Write(testkit.Ctx(t), sinkapi.Batch{Events: testkit.Events("t", "s", 0, 10)}, a.Ack("last")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "last"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, p := range hourFiles(t, dir) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Fatalf("%s ends in a torn line after a sink appended to it", p)
		}
		for i, l := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			if _, err := event.DecodeLine(l); err != nil {
				t.Fatalf("%s line %d does not decode: %v", p, i+1, err)
			}
			lines++
		}
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "_archiver", "torn", "t", "*", "*.jsonl.*"))
	for _, p := range kept {
		if data, err := os.ReadFile(p); err != nil || len(data) == 0 || bytes.IndexByte(data, '\n') >= 0 {
			t.Errorf("kept tail %s: %d bytes, a newline in it: %v (%v)", p, len(data), bytes.IndexByte(data, '\n') >= 0, err)
		}
	}
	t.Logf("%d kills: %d whole lines, %d torn tails cut off and kept", kills, lines, len(kept))
}

// appendUntilKilled is the child: it appends 5,000-event batches to the
// file sink on dir, one after another, for at most 30 s.
func appendUntilKilled(t *testing.T, dir string) {
	s, err := New(dir, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	batch := sinkapi.Batch{Events: testkit.Events("t", "s", 0, 5000)}
	for ctx.Err() == nil {
		done := make(chan error, 1)
		if err := s.Write(ctx, batch, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close(context.Background())
}

// waitGrown waits until the child wrote its first batch.
func waitGrown(t *testing.T, dir string, stderr *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	start := totalSize(t, dir)
	for totalSize(t, dir) == start {
		if time.Now().After(deadline) {
			t.Fatalf("the child appended nothing in 60 s: %s", strings.TrimSpace(stderr.String()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hourFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "t", "*", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func totalSize(t *testing.T, dir string) int64 {
	var n int64
	for _, p := range hourFiles(t, dir) {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
