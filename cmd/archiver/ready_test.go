package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/demo"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/natstest"
	"github.com/ttl-archiver/archiver/internal/ops"
)

// TestReadyzUnreadyWhenNATSDown runs the pipeline with a NATS sink and
// checks that /readyz is 200 while NATS is up and 503 naming the sinks once
// the NATS server stopped, while /healthz stays 200.
func TestReadyzUnreadyWhenNATSDown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1})
	srv := bed.Server
	if _, err := demo.CreateSessionTable(ctx, bed.DynamoDB, "SessionData"); err != nil {
		t.Fatal(err)
	}
	ns := natstest.Start(t)
	dir := t.TempDir()
	cfg, err := loadRunConfig([]string{
		"--endpoint", srv.Endpoint(), "--table", "SessionData",
		"--checkpoint", "file://" + filepath.Join(dir, "cp.json"),
		"--sink", ns.URL() + "?subject=t.{table}.{kind}&create-stream=T",
		"--metrics-addr", "127.0.0.1:0",
	}, envMap(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runPipeline(ctx, cfg, pipelineDeps{log: zap.NewNop(), reg: ops.NewRegistry("test"), stdout: io.Discard,
			ready: func(a string) { addr <- a }})
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("pipeline ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("health server did not start")
	}
	status := func(path string) int {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually.True(t, 30*time.Second, "/readyz 200 with NATS up", func() bool { return status("/readyz") == 200 })
	health := func() int {
		return dispatch(ctx, []string{"health", "--quiet", "--addr", base[len("http://"):]}, env{stdout: io.Discard, stderr: io.Discard, getenv: envMap(nil)})
	}
	if code := health(); code != 0 {
		t.Fatalf("archiver health = %d with NATS up, want 0", code)
	}
	ns.Stop()
	// The stream check is cached for a few seconds; the sinks check is not.
	eventually.True(t, 30*time.Second, "/readyz 503 with NATS down", func() bool { return status("/readyz") == http.StatusServiceUnavailable })
	if code := status("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d while alive, want 200", code)
	}
	if code := health(); code != 1 {
		t.Fatalf("archiver health = %d with NATS down, want 1", code)
	}
	live := dispatch(ctx, []string{"health", "--live", "--quiet", "--addr", base[len("http://"):]},
		env{stdout: io.Discard, stderr: io.Discard, getenv: envMap(nil)})
	if live != 0 {
		t.Fatalf("archiver health --live = %d while alive, want 0", live)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("pipeline did not stop")
	}
}
