package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// TestMain lets a test run this test binary as archiver-engine itself
// (ARCHIVER_ENGINE_TEST_MAIN=1), so the process test needs no build.
func TestMain(m *testing.M) {
	if os.Getenv("ARCHIVER_ENGINE_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestRun: the command line's exit codes and what each prints (the
// engine's flags are enginecmd's tests).
func TestRun(t *testing.T) {
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"version"}, 0, "archiver-engine dev\n", ""},
		{[]string{"--version"}, 0, "archiver-engine dev\n", ""},
		{[]string{"version", "x"}, 2, "", "archiver-engine version: unexpected argument \"x\"\n"},
		{[]string{"-h"}, 0, "usage: archiver-engine [flags]\n\nflags:\n", ""},
		{[]string{"--listn", "x"}, 2, "", "archiver-engine: unknown flag --listn; did you mean --listen? (see archiver-engine -h)\n"},
		{[]string{"--listen", "127.0.0.1:0", "--data-dir", "/dev/null/x", "--log-level", "error"}, 1, "", "archiver-engine: "},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.HasPrefix(stdout.String(), c.stdout) || !strings.HasPrefix(stderr.String(), c.stderr) ||
			(c.stdout == "" && stdout.Len() > 0) || (c.stderr == "" && stderr.Len() > 0) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q…, %q…", c.args, code, stdout.String(), stderr.String(), c.code, c.stdout, c.stderr)
		}
	}
}

// TestServeUntilSIGTERM runs archiver-engine as a process: it serves the
// SDK, and SIGTERM stops it gracefully, said on stderr, with exit 0.
func TestServeUntilSIGTERM(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(os.Args[0], "--listen", addr, "--ttl-interval", "-1", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "ARCHIVER_ENGINE_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	db := enginetest.ClientAt("http://"+addr, enginetest.DefaultKey)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err = db.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListTables on archiver-engine: %v\n%s", err, stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want 0\n%s", err, stderr.String())
	}
	if want := "archiver-engine: SIGTERM: stopping: finishing the requests in flight"; !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("stderr %q, want it to start %q", stderr.String(), want)
	}
}
