package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/internal/eventually"
)

// TestDemoSIGINT runs `archiver demo` as a process, as `make run` does,
// and interrupts it as Ctrl-C does: right after it says how to stop it,
// and once expiries arrive. Either way it prints its summary and exits 0
// (make reports no error).
func TestDemoSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	for _, tc := range []struct {
		name, after string // interrupt once stdout holds after
		keep        bool   // --archive: the archive is kept
	}{
		{"at start", "Press Ctrl-C to stop", true},
		{"after an expiry", "  expired  ", true},
		{"after an expiry, temporary archive", "  expired  ", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"demo"}
			if tc.keep {
				args = append(args, "--archive", filepath.Join(dir, "archive"))
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = []string{"ARCHIVER_TEST_MAIN=1", "HOME=" + dir, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir}
			stdout, stderr := &syncBuffer{}, &syncBuffer{}
			cmd.Stdout, cmd.Stderr = stdout, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Kill()
				if t.Failed() {
					t.Logf("demo stdout:\n%s\nstderr:\n%s", stdout, stderr)
				}
			}()
			eventually.True(t, time.Minute, "the demo to print "+tc.after, func() bool { return strings.Contains(stdout.String(), tc.after) })
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("demo exited with %v after SIGINT, want exit code 0", err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("demo still running two minutes after SIGINT")
			}
			out := stdout.String()
			for _, want := range []string{"Press Ctrl-C to stop", "\nsummary\n", "TTL lag p50/max:", "archive folder:"} {
				if !strings.Contains(out, want) {
					t.Errorf("demo output lacks %q", want)
				}
			}
			// Nothing is left in TMPDIR; an archive asked for is kept.
			left, _ := filepath.Glob(filepath.Join(dir, "ttl-archiver-demo-*"))
			if len(left) > 0 {
				t.Errorf("the demo left %v behind", left)
			}
			if _, err := os.Stat(filepath.Join(dir, "archive")); tc.keep != (err == nil) {
				t.Errorf("--archive given: %v; the archive folder is there: %v", tc.keep, err == nil)
			}
		})
	}
}
