package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// TestAbandonedReport reads what a forced stop leaves from the metrics.
func TestAbandonedReport(t *testing.T) {
	reg := prometheus.NewRegistry()
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archiver_checkpoint_lag_records"}, []string{"table", "shard"})
	held := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archiver_sink_buffered_bytes"}, []string{"sink"})
	reg.MustRegister(lag, held)
	lag.WithLabelValues("t", "a").Set(7)
	lag.WithLabelValues("t", "b").Set(0)
	lag.WithLabelValues("t", "c").Set(3)
	held.WithLabelValues("s3://b/p").Set(1024)
	want := "not checkpointed: 10 records in 2 shards (read again from the stream on the next start); unflushed in sinks: s3://b/p 1024 bytes"
	if got := abandoned(reg); got != want {
		t.Errorf("abandoned = %q\nwant %q", got, want)
	}
}

// TestRunSignals runs `archiver run` as a process whose S3 sink never
// answers, so its flush cannot finish: two SIGTERMs at once (as GNU
// timeout sends them) are one graceful stop, said on stderr; a second
// signal after cli.SameStopWindow stops it at once, exit 1, with the ERROR
// line saying what was abandoned.
func TestRunSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the archiver")
	}
	bed := enginetest.Start(t, engine.Options{TTLInterval: 100 * time.Millisecond})
	bed.CreateTable(t, enginetest.Table{Name: "Quiet"})
	bed.CreateTable(t, enginetest.Table{Name: "SessionData", Hash: "UserName", Range: "SessionId", TTL: "ExpirationTime"})
	putExpired(t, t.Context(), bed.DynamoDB, "SessionData", 20) // the S3 sink holds them: its flush cannot finish
	silent, err := net.Listen("tcp", "127.0.0.1:0")             // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var uploads atomic.Int64 // connections the S3 sink opened: it holds events
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			uploads.Add(1)
			defer c.Close()
		}
	}()
	for _, tc := range []struct {
		name  string
		table string
		apart time.Duration
		code  int
		says  []string
	}{
		{"twice at once", "Quiet", 0, 0, []string{"archiver: SIGTERM: stopping", "archiver stopped"}},
		{"a second signal", "SessionData", cli.SameStopWindow + 500*time.Millisecond, 1, []string{"second signal (SIGTERM): stopping at once", "the flush is abandoned", "not checkpointed:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "run", "--endpoint", bed.Server.Endpoint(), "--table", tc.table,
				"--checkpoint", "file://"+filepath.Join(dir, "cp.json"), "--skip-preflight", "--metrics-addr", "127.0.0.1:0",
				"--sink", "s3://bucket/p?endpoint=http://"+silent.Addr().String()+"&path-style=true&flush-interval=100ms", "--shutdown-timeout", "20s")
			cmd.Env = append(os.Environ(), "ARCHIVER_TEST_MAIN=1", "AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s")
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			before := uploads.Load()
			eventually.True(t, time.Minute, "archiver running", func() bool { return strings.Contains(out.String(), "archiver running") })
			if tc.code != 0 {
				eventually.True(t, time.Minute, "an upload in flight", func() bool { return uploads.Load() > before })
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			time.Sleep(tc.apart)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			err := cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, out.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output does not say %q:\n%s", s, out.String())
				}
			}
		})
	}
}

// TestStoppingWords: the signal lines name what the command does, so
// `archiver engine` does not claim to flush sinks or release leases.
func TestStoppingWords(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "flushing sinks"},
		{[]string{"run"}, "flushing sinks"},
		{[]string{"engine", "--addr", ":8000"}, "stopping the engine"},
		{[]string{"demo"}, "flushing sinks"},
	} {
		if got := stopping(tc.args); got.Prog != "archiver" || !strings.Contains(got.Graceful, tc.want) {
			t.Errorf("stopping(%q) = %+v, want %q in it", tc.args, got, tc.want)
		}
	}
}
