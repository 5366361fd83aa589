package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayToStdoutKeepsStdoutData: with --sink stdout:// stdout carries
// the events alone, one JSON object a line (for | jq); the summary table
// goes to stderr. Into any other sink the summary stays on stdout.
func TestReplayToStdoutKeepsStdoutData(t *testing.T) {
	src := replaySource(t, 0, 25)
	code, stdout, stderr := replayDispatch("--from", "file://"+src, "--sink", "stdout://", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 25 {
		t.Errorf("%d lines on stdout, want the 25 events:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("stdout line is not JSON (%v): %q", err, l)
		}
	}
	if !summaryHas(stderr, "sent", 25) {
		t.Errorf("no summary on stderr:\n%s", stderr)
	}

	code, stdout, stderr = replayDispatch("--from", "file://"+src, "--sink", "file://"+t.TempDir(), "--log-level", "warn")
	if code != 0 || !summaryHas(stdout, "sent", 25) {
		t.Errorf("into a file sink: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestRunRefusesEMFWithStdoutSink: EMF documents and a stdout:// sink (or
// dead-letter sink) would share stdout; run refuses the pair naming both.
func TestRunRefusesEMFWithStdoutSink(t *testing.T) {
	base := []string{"--table", "Sessions", "--checkpoint", "file://./cp.json", "--metrics", "emf"}
	cases := []struct {
		extra []string
		want  string // "" for accepted
	}{
		{[]string{"--sink", "stdout://"}, `--metrics emf: writes its metrics to stdout, which stdout:// already carries`},
		{[]string{"--sink", "file:///tmp/a", "--dead-letter", "stdout://"}, `which stdout:// already carries`},
		{[]string{"--sink", "file:///tmp/a"}, ""},
	}
	for _, c := range cases {
		_, err := loadRunConfig(append(base, c.extra...), envMap(nil), io.Discard)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want it accepted", c.extra, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error saying %s", c.extra, err, c.want)
		}
	}
}

// TestRestoreFailingAtOncePrintsNoTable: a restore that fails before it
// reads or writes anything (here its --resume file cannot be created)
// exits 1 with the error alone: no summary table of zeros before it.
func TestRestoreFailingAtOncePrintsNoTable(t *testing.T) {
	b, dir := restoreBed(t, 3)
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"restore", "--from", "file://" + dir, "--table", "Sessions", "--to-table", "Restored",
		"--endpoint", b.Srv.Endpoint(), "--resume", filepath.Join(t.TempDir(), "no-such-dir", "resume.json"), "--log-level", "error"},
		env{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	if code != 1 || stdout.Len() > 0 || !strings.Contains(stderr.String(), "--resume") || summaryValue(stderr.String(), "written") != -1 {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant 1, nothing on stdout and the --resume error alone", code, stdout.String(), stderr.String())
	}
}
