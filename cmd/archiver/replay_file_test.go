package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

// replayDispatch runs `archiver replay args...` as main does and returns
// its exit code, stdout and stderr.
func replayDispatch(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), append([]string{"replay"}, args...),
		env{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	return code, stdout.String(), stderr.String()
}

// replaySource writes n expired events, IDs Sessions-first... , into a new
// file:// archive, all in two hours so that the replays below append to
// the same few files, and returns its directory.
func replaySource(t *testing.T, first, n int) string {
	t.Helper()
	evs := verifyEvents("Sessions", fmt.Sprintf("shard-%d", first), first, n)
	for i := range evs {
		evs[i].ApproximateCreationTime = verifyT0.Add(time.Duration(i) * 500 * time.Millisecond)
	}
	dir := t.TempDir()
	var batches [][]event.Event
	for len(evs) > 0 {
		k := min(1000, len(evs))
		batches, evs = append(batches, evs[:k]), evs[k:]
	}
	archiveWith(t, "file://"+dir, batches...)
	return dir
}

// archiveLines reads every .jsonl file under dir and returns how often
// each event ID appears and the lines that do not decode.
func archiveLines(t *testing.T, dir string) (map[string]int, []string) {
	t.Helper()
	ids, torn := map[string]int{}, []string(nil)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			torn = append(torn, p+": no final newline")
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			e, err := event.DecodeLine(sc.Bytes())
			if err != nil {
				torn = append(torn, fmt.Sprintf("%s: %.80q", p, sc.Text()))
				continue
			}
			ids[e.EventID]++
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, torn
}

// TestReplayIntoLockedFileSinkIsRefused: while another archiver holds a
// file:// directory, `archiver replay` into it exits 1 at start-up with an
// error naming the directory, and writes nothing there.
func TestReplayIntoLockedFileSinkIsRefused(t *testing.T) {
	src := replaySource(t, 0, 50)
	dst := t.TempDir()
	holder, err := sinks.NewFileSink(dst, sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	code, stdout, stderr := replayDispatch("--from", "file://"+src, "--sink", "file://"+dst)
	if code != 1 || !strings.Contains(stderr, dst) || !strings.Contains(stderr, "another archiver") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 naming %s and another archiver", code, stderr, dst)
	}
	if strings.Contains(stdout, "sent") {
		t.Errorf("the refused replay read the archive:\n%s", stdout)
	}
	if ids, torn := archiveLines(t, dst); len(ids) != 0 || len(torn) != 0 {
		t.Errorf("the refused replay wrote %d events, %d bad lines", len(ids), len(torn))
	}
}

// TestTwoReplaysIntoOneFileSink is issue 19's point 7: two `archiver
// replay`s of 10,000 events each into one file:// directory at once lost
// acknowledged lines and tore others. Now each replay either finishes
// (exit 0) with all its events in the directory, or is refused at
// start-up (exit 1, the directory named) because the other holds it; the
// directory holds exactly the events of the replays that finished, once
// each, and no torn line, whichever way they overlapped. Small batches
// make many appends: without the lock and O_APPEND this test lost about
// 1,400 acknowledged events and tore about 90 lines.
func TestTwoReplaysIntoOneFileSink(t *testing.T) {
	const n = 10_000
	srcs := []string{replaySource(t, 0, n), replaySource(t, n, n)}
	dst := filepath.Join(t.TempDir(), "archive")
	type result struct {
		code           int
		stdout, stderr string
	}
	results := make([]result, len(srcs))
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Go(func() {
			code, stdout, stderr := replayDispatch("--from", "file://"+src, "--sink", "file://"+dst, "--log-level", "warn", "--batch", "10")
			results[i] = result{code, stdout, stderr}
		})
	}
	wg.Wait()
	want := map[string]int{}
	for i, r := range results {
		switch r.code {
		case 0:
			if !summaryHas(r.stdout, "acknowledged", n) {
				t.Errorf("replay %d exited 0 without acknowledging %d events:\n%s", i, n, r.stdout)
			}
			for seq := i * n; seq < (i+1)*n; seq++ {
				want[fmt.Sprintf("Sessions-%d", seq)] = 1
			}
		case 1:
			if !strings.Contains(r.stderr, dst) || !strings.Contains(r.stderr, "another archiver") {
				t.Errorf("replay %d exited 1 for another reason:\n%s", i, r.stderr)
			}
			t.Logf("replay %d was refused: %s", i, strings.TrimSpace(r.stderr))
		default:
			t.Errorf("replay %d exited %d:\n%s", i, r.code, r.stderr)
		}
	}
	if len(want) == 0 {
		t.Fatal("neither replay finished")
	}
	ids, torn := archiveLines(t, dst)
	if len(torn) > 0 {
		t.Errorf("%d torn lines, first %s", len(torn), torn[0])
	}
	missing, extra := 0, 0
	for id := range want {
		if ids[id] != 1 {
			missing++
		}
	}
	for id := range ids {
		if want[id] == 0 {
			extra++
		}
	}
	if missing > 0 || extra > 0 || len(ids) != len(want) {
		t.Errorf("the directory holds %d events (%d of those acknowledged missing or repeated, %d unexpected), want %d once each",
			len(ids), missing, extra, len(want))
	}
}
