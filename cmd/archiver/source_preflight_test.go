package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/restore/restoretest"
)

// deadEndpoint is the URL of a loopback port nothing listens on.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

// sourceBed is an engine whose table SessionData (when view is not "none")
// has a stream of view type view ("": no stream) and TTL on "expires".
func sourceBed(t *testing.T, view st.StreamViewType, o engine.Options) *restoretest.Bed {
	t.Helper()
	b := restoretest.Start(t, o)
	if view != "none" {
		b.CreateTable("SessionData", "expires", view)
	}
	return b
}

// waitExit waits for the archiver to exit, at most 30 s (issue 19's bound
// for a source that cannot work), and returns its exit code.
func waitExit(t *testing.T, exited <-chan error) int {
	t.Helper()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err == nil {
			return 0
		}
		if !errors.As(err, &ee) {
			t.Fatalf("archiver: %v", err)
		}
		return ee.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatal("archiver still running 30 s after start")
	}
	return -1
}

// TestRunSourcePreflight: `archiver run` against a source that cannot work
// exits 1 within 30 s, its error one line naming the table or endpoint,
// the problem and the way out (issue 19's "done when").
func TestRunSourcePreflight(t *testing.T) {
	refuseAll := engine.Options{Hooks: engine.Hooks{OnRequest: func(string, *http.Request) error {
		return &engine.Error{Code: "UnrecognizedClientException", Message: "The security token included in the request is invalid."}
	}}}
	bed := func(view st.StreamViewType, o engine.Options) func(*testing.T) string {
		return func(t *testing.T) string { return sourceBed(t, view, o).Srv.Endpoint() }
	}
	for _, tc := range []struct {
		name     string
		endpoint func(t *testing.T) string
		mentions []string
	}{
		{"missing table", bed("none", engine.Options{}),
			[]string{"table SessionData in us-east-1: no such table", "--wait-for-table"}},
		{"no stream", bed("", engine.Options{}),
			[]string{"table SessionData in us-east-1: no stream enabled", "--table-name SessionData", "StreamViewType=NEW_AND_OLD_IMAGES"}},
		{"keys only", bed(st.StreamViewTypeKeysOnly, engine.Options{}),
			[]string{"table SessionData in us-east-1: the stream carries no old image: view type KEYS_ONLY", "StreamViewType=NEW_AND_OLD_IMAGES", "new ARN", "--allow-keys-only"}},
		{"new image", bed(st.StreamViewTypeNewImage, engine.Options{}),
			[]string{"view type NEW_IMAGE", "--allow-keys-only"}},
		{"dead endpoint", deadEndpoint, []string{"table SessionData in us-east-1: endpoint unreachable: endpoint http://127.0.0.1:", "refused the connection"}},
		{"credentials refused", bed("none", refuseAll),
			[]string{"table SessionData in us-east-1: credentials refused (UnrecognizedClientException)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, exited, _, stderr := startRun(t, tc.endpoint(t), "file://"+t.TempDir())
			if code := waitExit(t, exited); code != 1 {
				t.Fatalf("archiver exited %d, want 1", code)
			}
			msg := strings.TrimSuffix(stderr.String(), "\n")
			for _, m := range tc.mentions {
				if !strings.Contains(msg, "archiver run: ") || !strings.Contains(msg, m) {
					t.Errorf("stderr %q does not say %q", msg, m)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, versitySecretKey) {
				t.Errorf("stderr is not one line without secrets: %q", msg)
			}
		})
	}
}

// TestRunWaitsForTable: with --wait-for-table, run waits for a table a
// deployment creates later, logging that it waits, then runs; a table
// whose TTL is off gets a WARN naming it.
func TestRunWaitsForTable(t *testing.T) {
	b := sourceBed(t, "none", engine.Options{})
	cmd, exited, stdout, _ := startRun(t, b.Srv.Endpoint(), "file://"+t.TempDir(), "--wait-for-table", "1h")
	running := func(what string) func() bool {
		return func() bool {
			select {
			case err := <-exited:
				t.Fatalf("archiver exited with %v while waiting for %s", err, what)
			default:
			}
			return strings.Contains(stdout.String(), what)
		}
	}
	eventually.True(t, time.Minute, "the archiver to wait for the table", running(`"msg":"waiting for the table","table":"SessionData"`))
	b.CreateTable("SessionData", "", st.StreamViewTypeNewAndOldImages)
	eventually.True(t, time.Minute, "the archiver to start", running("archiver running"))
	if !strings.Contains(stdout.String(), `"msg":"the table's TTL is off`) || !strings.Contains(stdout.String(), `"table":"SessionData"`) {
		t.Errorf("no WARN about the table's TTL:\n%s", stdout)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, exited); code != 0 {
		t.Fatalf("archiver exited %d after SIGTERM, want 0", code)
	}
}

// TestRunAllowKeysOnly: with --allow-keys-only a KEYS_ONLY table is
// archived, with a WARN at start-up, and every line says its image was
// missing.
func TestRunAllowKeysOnly(t *testing.T) {
	b := sourceBed(t, st.StreamViewTypeKeysOnly, engine.Options{})
	b.PutExpiring("SessionData", 3)
	b.ExpireAll()
	dir := t.TempDir()
	cmd, exited, stdout, _ := startRun(t, b.Srv.Endpoint(), "file://"+dir, "--allow-keys-only")
	var lines []string
	eventually.True(t, time.Minute, "3 archived expiries", func() bool {
		lines = archivedLines(t, filepath.Join(dir, "SessionData"))
		return len(lines) >= 3
	})
	for _, l := range lines {
		if !strings.Contains(l, `"image":"keys-only"`) || !strings.Contains(l, `"kind":"expired"`) {
			t.Errorf("line not marked keys-only: %s", l)
		}
	}
	if !strings.Contains(stdout.String(), `"msg":"the stream carries no old image`) || !strings.Contains(stdout.String(), `"view_type":"KEYS_ONLY"`) {
		t.Errorf("no WARN about the keys-only stream:\n%s", stdout)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, exited); code != 0 {
		t.Fatalf("archiver exited %d after SIGTERM, want 0", code)
	}
}

// archivedLines reads every line the file sink wrote under dir.
func archivedLines(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			if len(l) > 0 {
				out = append(out, string(l))
			}
		}
		return nil
	})
	return out
}

// TestVerifyAndRestoreCheckTheirSources: verify --table needs the table's
// stream, restore the table written to; both name what is wrong.
func TestVerifyAndRestoreCheckTheirSources(t *testing.T) {
	b := sourceBed(t, "", engine.Options{}) // SessionData without a stream
	archive := "file://" + t.TempDir()
	dead := deadEndpoint(t)
	for _, tc := range []struct {
		name     string
		run      func() error
		mentions []string
	}{
		{"verify: no stream", func() error {
			_, err := execCmd(t, verifyCmd, "--from", archive, "--table", "SessionData", "--endpoint", b.Srv.Endpoint())
			return err
		}, []string{"--table: table SessionData in us-east-1: no stream enabled", "--skip-stream"}},
		{"verify: no such table", func() error {
			_, err := execCmd(t, verifyCmd, "--from", archive, "--table", "Nope", "--endpoint", b.Srv.Endpoint())
			return err
		}, []string{"table Nope in us-east-1: no such table"}},
		{"restore: no such table", func() error {
			_, err := execCmd(t, restoreCmd, "--from", archive, "--table", "SessionData", "--to-table", "Nope", "--endpoint", b.Srv.Endpoint())
			return err
		}, []string{"the table written to: table Nope in us-east-1: no such table"}},
		{"restore: dead endpoint", func() error {
			_, err := execCmd(t, restoreCmd, "--from", archive, "--table", "SessionData", "--endpoint", dead)
			return err
		}, []string{"table SessionData in us-east-1: endpoint unreachable: endpoint " + dead + " refused the connection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil {
				t.Fatal("no error")
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
	// A restore into a table without a stream is fine: it only writes.
	if _, err := execCmd(t, restoreCmd, "--from", archive, "--table", "SessionData", "--endpoint", b.Srv.Endpoint()); err != nil {
		t.Fatalf("restore into a table without a stream: %v", err)
	}
}

func TestSourceOptions(t *testing.T) {
	base := []string{"--table", "T1x", "--checkpoint", "file://./cp.json", "--sink", "stdout://"}
	for _, tc := range []struct {
		args      []string
		env       map[string]string
		allowKeys bool
		wait      time.Duration
		problem   string
	}{
		{base, nil, false, 0, ""},
		{append(base, "--allow-keys-only", "--wait-for-table", "5m"), nil, true, 5 * time.Minute, ""},
		{base, map[string]string{"ARCHIVER_ALLOW_KEYS_ONLY": "true", "ARCHIVER_WAIT_FOR_TABLE": "30s"}, true, 30 * time.Second, ""},
		{append(base, "--wait-for-table", "-1s"), nil, false, 0, "--wait-for-table: -1s must not be negative"},
		{append(base, "--wait-for-table", "soon"), nil, false, 0, `--wait-for-table: "soon" is not a duration`},
	} {
		c, err := loadRunConfig(tc.args, envMap(tc.env), io.Discard)
		if tc.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.problem)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.AllowKeysOnly != tc.allowKeys || c.WaitForTable != tc.wait {
			t.Errorf("%v %v: AllowKeysOnly %v, WaitForTable %s", tc.args, tc.env, c.AllowKeysOnly, c.WaitForTable)
		}
	}
}
