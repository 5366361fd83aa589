package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// TestSweepStartUpCheck: `archiver sweep` checks its table before it
// seeks the lease: an endpoint that does not answer, a missing table or
// index, or a --ttl-attribute other than the one the table's TTL is
// enabled on make it exit 1 by itself (the context would end it with 0),
// naming what is wrong.
func TestSweepStartUpCheck(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1})
	srv := bed.Server
	createSweptTable(t, bed.DynamoDB)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name     string
		endpoint string
		args     []string
		want     []string // all in stderr
	}{
		{"no such table", srv.Endpoint(), []string{"--table", "Missing"},
			[]string{"table Missing at " + srv.Endpoint(), "ResourceNotFoundException"}},
		{"no such index", srv.Endpoint(), []string{"--table", sweptTable, "--index", "byWindow"},
			[]string{"table " + sweptTable + " at " + srv.Endpoint(), `no global secondary index "byWindow" (--index)`}},
		{"endpoint does not answer", dead, []string{"--table", sweptTable},
			[]string{"table " + sweptTable + " at " + dead, "connection refused"}},
		{"TTL enabled on another attribute", srv.Endpoint(), []string{"--table", sweptTable, "--ttl-attribute", "expiresAt"},
			[]string{`--ttl-attribute "expiresAt"`, `TTL enabled on "ttl"`, "--ttl-attribute-override"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var stderr bytes.Buffer
			args := append([]string{"sweep", "--endpoint", tc.endpoint, "--window", "1s",
				"--checkpoint", "file://" + filepath.Join(t.TempDir(), "cp.json"), "--metrics-addr", "127.0.0.1:0"}, tc.args...)
			code := dispatch(ctx, args, env{stdout: io.Discard, stderr: &stderr, getenv: envMap(nil)})
			if code != 1 || ctx.Err() != nil {
				t.Fatalf("exit %d (context ended: %v), want 1 by itself; stderr:\n%s", code, ctx.Err(), stderr.String())
			}
			if strings.Contains(stderr.String(), "Config.") {
				t.Errorf("stderr names a Go field:\n%s", stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}
