package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/demo"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/s3test"
)

const (
	versityAccessKey = s3test.AccessKey
	versitySecretKey = s3test.SecretKey
)

// startVersity starts versitygw (internal/s3test; its one bucket is not
// the one these tests name) and returns its endpoint.
func startVersity(t *testing.T) string {
	t.Helper()
	return s3test.Start(t).Endpoint
}

// syncBuffer is a bytes.Buffer safe to write from a subprocess's copier
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRun starts `archiver run` as a subprocess archiving SessionData of
// the engine at endpoint into sink, with extra arguments.
func startRun(t *testing.T, endpoint, sink string, extra ...string) (cmd *exec.Cmd, exited <-chan error, stdout, stderr *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	cmd = exec.Command(os.Args[0], append([]string{"run",
		"--endpoint", endpoint,
		"--table", "SessionData",
		"--checkpoint", "file://" + filepath.Join(dir, "checkpoints.json"),
		"--sink", sink,
		"--metrics-addr", "127.0.0.1:0",
	}, extra...)...)
	cmd.Env = []string{"ARCHIVER_TEST_MAIN=1", "HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"AWS_ACCESS_KEY_ID=" + versityAccessKey, "AWS_SECRET_ACCESS_KEY=" + versitySecretKey,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("archiver stdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
	})
	return cmd, ch, stdout, stderr
}

// TestRunPreflightMissingBucket: `archiver run` with an S3 sink whose
// bucket does not exist exits 1 within 10 s (the bound), with one
// message naming the sink, the check and the bucket, and no
// --skip-preflight (skipping cannot help).
func TestRunPreflightMissingBucket(t *testing.T) {
	s3 := startVersity(t)
	bed := enginetest.Start(t, engine.Options{})
	srv := bed.Server
	if _, err := demo.CreateSessionTable(t.Context(), bed.DynamoDB, "SessionData"); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	_, exited, _, stderr := startRun(t, srv.Endpoint(), "s3://nosuchbucket/x?endpoint="+s3+"&path-style=true")
	var err error
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		t.Fatal("archiver still running a minute after start with a missing bucket")
	}
	took := time.Since(begin)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("archiver exited with %v, want exit code 1", err)
	}
	if took >= 10*time.Second {
		t.Fatalf("archiver took %s to fail, want under 10s", took)
	}
	msg := strings.TrimSuffix(stderr.String(), "\n")
	for _, want := range []string{"archiver run: sink s3://nosuchbucket/x", `preflight check "bucket exists" failed`, `bucket "nosuchbucket" does not exist`, "create it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "--skip-preflight") {
		t.Errorf("stderr %q suggests --skip-preflight, which cannot help a missing bucket", msg)
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, versitySecretKey) {
		t.Errorf("stderr is not one line without secrets: %q", msg)
	}
}

// TestRunSkipPreflight: with --skip-preflight the same configuration
// starts, runs and stops cleanly on SIGTERM (nothing to archive, so the
// missing bucket is never written to).
func TestRunSkipPreflight(t *testing.T) {
	s3 := startVersity(t)
	bed := enginetest.Start(t, engine.Options{})
	srv := bed.Server
	if _, err := demo.CreateSessionTable(t.Context(), bed.DynamoDB, "SessionData"); err != nil {
		t.Fatal(err)
	}
	cmd, exited, stdout, _ := startRun(t, srv.Endpoint(), "s3://nosuchbucket/x?endpoint="+s3+"&path-style=true", "--skip-preflight")
	eventually.True(t, time.Minute, "the archiver to start", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("archiver exited with %v despite --skip-preflight", err)
		default:
		}
		return strings.Contains(stdout.String(), "archiver running")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("archiver exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("archiver still running a minute after SIGTERM")
	}
}

func TestSkipPreflightOption(t *testing.T) {
	base := []string{"--table", "T1x", "--checkpoint", "file://./cp.json", "--sink", "stdout://"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		file string
		want bool
	}{
		{"default", base, nil, "", false},
		{"flag", append(base, "--skip-preflight"), nil, "", true},
		{"env", base, map[string]string{"ARCHIVER_SKIP_PREFLIGHT": "true"}, "", true},
		{"file", base, nil, "skip-preflight: true\n", true},
		{"flag over env", append(base, "--skip-preflight=false"), map[string]string{"ARCHIVER_SKIP_PREFLIGHT": "true"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, tc.file)}, args...)
			}
			c, err := loadRunConfig(args, envMap(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.SkipPreflight != tc.want {
				t.Fatalf("SkipPreflight = %v, want %v", c.SkipPreflight, tc.want)
			}
		})
	}
	_, err := loadRunConfig(base, envMap(map[string]string{"ARCHIVER_SKIP_PREFLIGHT": "perhaps"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--skip-preflight (from ARCHIVER_SKIP_PREFLIGHT): "perhaps" is not true or false`) {
		t.Fatalf("bad value: %v", err)
	}
}
