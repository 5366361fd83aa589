package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/natstest"
	"github.com/ttl-archiver/archiver/restore/restoretest"
)

// restoreBed is an engine whose Sessions items expired and were archived
// under dir, and an empty table Restored (with a stream) to restore into.
func restoreBed(t *testing.T, n int) (*restoretest.Bed, string) {
	t.Helper()
	b := restoretest.Start(t, engine.Options{})
	b.CreateTable("Sessions", "expires", st.StreamViewTypeNewAndOldImages)
	b.PutExpiring("Sessions", n)
	b.ExpireAll()
	dir := t.TempDir()
	b.Archive("Sessions", "expires", dir)
	b.CreateTable("Restored", "expires", st.StreamViewTypeNewAndOldImages)
	return b, dir
}

// execCmd runs a command function with args and returns its stdout; its
// stderr (the logs) goes to *stderr when stderr is not nil.
func execCmd(t *testing.T, cmd func(context.Context, []string, env) error, args ...string) (string, error) {
	return execCmdErr(t, cmd, nil, args...)
}

func execCmdErr(t *testing.T, cmd func(context.Context, []string, env) error, stderr *bytes.Buffer, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	if stderr == nil {
		stderr = &bytes.Buffer{}
	}
	err := cmd(context.Background(), args, env{stdout: &out, stderr: stderr, getenv: func(string) string { return "" }})
	if err != nil && stderr.Len() > 0 {
		t.Logf("stderr: %s", stderr.String())
	}
	return out.String(), err
}

func TestRestoreCommandRestoresAndSummarises(t *testing.T) {
	b, dir := restoreBed(t, 9)
	common := []string{"--from", "file://" + dir, "--table", "Sessions", "--to-table", "Restored", "--endpoint", b.Srv.Endpoint()}
	var dryLogs bytes.Buffer
	out, err := execCmdErr(t, restoreCmd, &dryLogs, append(common, "--dry-run", "--key", "pk=user#1")...)
	if err != nil {
		t.Fatal(err)
	}
	// stdout carries the plan alone; the summary goes to stderr.
	if n := strings.Count(out, "put if absent"); n != 2 || summaryValue(out, "would be written") != -1 || !summaryHas(dryLogs.String(), "would be written", 2) {
		t.Errorf("dry run of user#1 (sk 1 and 8): stdout\n%s\nstderr\n%s", out, dryLogs.String())
	}
	if len(b.Scan("Restored")) != 0 {
		t.Fatal("the dry run wrote")
	}
	var logs bytes.Buffer
	out, err = execCmdErr(t, restoreCmd, &logs, append(common, "--where", "sk < 5")...)
	if err != nil {
		t.Fatal(err)
	}
	// Off a terminal, progress is a JSON log line (here only the last one).
	if !strings.Contains(logs.String(), `"msg":"progress","job":"restore","objects_done":1,"objects_total":1,"items_done":9,`) {
		t.Errorf("progress log lines:\n%s", logs.String())
	}
	if !strings.Contains(out, "restore into Restored\n") || !summaryHas(out, "written", 5) || !summaryHas(out, "left out by --key/--where", 4) {
		t.Errorf("summary:\n%s", out)
	}
	out, err = execCmd(t, restoreCmd, common...)
	if err != nil {
		t.Fatal(err)
	}
	if !summaryHas(out, "written", 4) || !summaryHas(out, "skipped: item exists", 5) {
		t.Errorf("second restore:\n%s", out)
	}
}

// summaryHas reports whether a summary table has the row name with value n.
func summaryHas(out, name string, n int) bool { return summaryValue(out, name) == n }

// summaryValue is the number in a summary table's row name (-1: no such row).
func summaryValue(out, name string) int {
	m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` +(\d+)$`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestRestoreCommandRejectsBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--table", "Sessions"}, "--from: required"},
		{[]string{"--from", "nats://x:4222", "--table", "Sessions"}, "--from: want s3://BUCKET/PREFIX or file://DIR"},
		{[]string{"--from", "file:///tmp/a"}, "--table: required, once"},
		{[]string{"--from", "file:///tmp/a", "--table", "A1x,B2y"}, "--table: required, once"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--where", "pk = :v"}, "--where: at position 6"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--key", "novalue"}, "want ATTR=VALUE"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--since", "yesterday"}, "--since: \"yesterday\" is not a time"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--kind", "gone"}, `"gone" is not expired`},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--keep-ttl", "--remove-ttl"}, "choose one"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--rate", "-1"}, "--rate: -1 must be 0"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--parallel", "0"}, "--parallel: 0 must be from 1"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--ttl-extend", "0s"}, "--ttl-extend: 0s must be positive"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--dry-run", "--resume", "f"}, "--dry-run and --resume"},
		{[]string{"--from", "file:///tmp/a", "--table", "Sessions", "--ttl-attribute", strings.Repeat("x", 256)}, "--ttl-attribute: \"xxx"},
	}
	for _, c := range cases {
		_, err := execCmd(t, restoreCmd, c.args...)
		var ue *cli.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want a usage error with %q", c.args, err, c.want)
		}
	}
	_, err := execCmd(t, replayCmd, "--from", "file:///tmp/a")
	if err == nil || !strings.Contains(err.Error(), "--sink: required") {
		t.Errorf("replay without --sink: %v", err)
	}
	for _, n := range []string{"0", "-3", "100000001"} {
		_, err := execCmd(t, replayCmd, "--from", "file:///tmp/a", "--sink", "nats://127.0.0.1:4222", "--max-stream-ids", n)
		var ue *cli.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--max-stream-ids: "+n+" must be from 1 to 100000000") {
			t.Errorf("replay --max-stream-ids %s: %v", n, err)
		}
	}
}

// TestRestoreKilledAndResumedWritesEachItemOnce runs archiver restore as a
// process, kills it with SIGKILL midway, runs it again with the same
// --resume file, and finds exactly one INSERT per item in the restored
// table's stream and nothing else: with conditional writes, and with
// --overwrite (where the one write per worker in flight at the kill may
// be repeated, with identical content, which makes no stream record).
func TestRestoreKilledAndResumedWritesEachItemOnce(t *testing.T) {
	for _, mode := range []string{"conditional", "overwrite"} {
		t.Run(mode, func(t *testing.T) {
			var extra []string
			if mode == "overwrite" {
				extra = []string{"--overwrite"}
			}
			killAndResume(t, extra)
		})
	}
}

func killAndResume(t *testing.T, extra []string) {
	const n = 300
	b, dir := restoreBed(t, n)
	resume := t.TempDir() + "/restore.progress"
	args := append([]string{"restore", "--from", "file://" + dir, "--table", "Sessions", "--to-table", "Restored",
		"--endpoint", b.Srv.Endpoint(), "--resume", resume, "--log-level", "warn"}, extra...)
	start := func(extra ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(os.Args[0], append(args, extra...)...)
		home := t.TempDir() // a clean environment: no AWS credentials, no shared config
		cmd.Env = []string{"ARCHIVER_TEST_MAIN=1", "HOME=" + home, "PATH=" + os.Getenv("PATH"),
			"AWS_CONFIG_FILE=" + home + "/none", "AWS_SHARED_CREDENTIALS_FILE=" + home + "/none"}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, &out
	}
	// At 50 items/s the kill, once a third of the items are in (2 s), comes
	// after the resume file's first periodic fsync (every second) and
	// leaves 4 s before the end, more than a poll of the table takes even
	// on a loaded machine. The wait is long because under -race on two
	// loaded cores the process can take far longer to get there; nothing
	// here is timed.
	first, _ := start("--rate", "50")
	eventually.True(t, 3*time.Minute, "a third of the items restored", func() bool { return len(b.Scan("Restored")) >= n/3 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	killedAt := len(b.Scan("Restored"))
	if killedAt >= n {
		t.Fatalf("the first run finished (%d items) before it was killed", killedAt)
	}
	second, outBuf := start()
	if err := second.Wait(); err != nil {
		t.Fatalf("resumed restore: %v\n%s", err, outBuf.String())
	}
	out := outBuf.String()
	names := b.EventNames("Restored")
	if len(names) != n {
		t.Errorf("%d keys in the restored table's stream, want %d", len(names), n)
	}
	for k, m := range names {
		if m["INSERT"] != 1 || len(m) != 1 {
			t.Errorf("%s: stream records %v, want one INSERT", k, m)
		}
	}
	resumed, exists, written := summaryValue(out, "skipped: done by an earlier run"), summaryValue(out, "skipped: item exists"), summaryValue(out, "written")
	if resumed <= 0 || resumed+exists+written != n {
		t.Errorf("killed at %d items; resumed run's summary:\n%s", killedAt, out)
	}
	t.Logf("killed after %d items; resumed run:\n%s", killedAt, out)
}

func TestReplayCommandIntoJetStreamTwice(t *testing.T) {
	_, dir := restoreBed(t, 6)
	addr := natstest.Start(t).Addr()
	for round := 1; round <= 2; round++ {
		out, err := execCmd(t, replayCmd, "--from", "file://"+dir, "--sink", "nats://"+addr+"?create-stream=R&subject=r.{table}.{kind}")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// The second round finds every event in the stream and sends none.
		sent, held := 6, 0
		if round == 2 {
			sent, held = 0, 6
		}
		if !summaryHas(out, "acknowledged", sent) || !summaryHas(out, "sent", sent) ||
			!summaryHas(out, "already in the stream, not sent", held) || !summaryHas(out, "sent unchecked, may be duplicates", 0) {
			t.Errorf("round %d summary:\n%s", round, out)
		}
		if got := natstest.StreamMessages(t, addr, "R"); got != 6 {
			t.Errorf("round %d: stream holds %d messages, want 6", round, got)
		}
	}
}
