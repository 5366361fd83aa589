package main

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// TestHealthEngine: `health --engine` is the engine's container health
// check: 0 while an engine serves at --addr or $ARCHIVER_ENGINE_ADDR, 1
// where none listens, and a usage error with --live, which only the
// archiver's ops server tells apart.
func TestHealthEngine(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1})
	addr := strings.TrimPrefix(bed.Server.Endpoint(), "http://")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"--addr", []string{"--engine", "--addr", addr}, nil, 0},
		{"$ARCHIVER_ENGINE_ADDR", []string{"--engine"}, map[string]string{"ARCHIVER_ENGINE_ADDR": addr, "ARCHIVER_METRICS_ADDR": closed}, 0},
		{"no engine there", []string{"--engine", "--addr", closed}, nil, 1},
		{"an engine is no archiver", []string{"--addr", addr}, nil, 1},
		{"--live", []string{"--engine", "--live", "--addr", addr}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			code := dispatch(t.Context(), append([]string{"health", "--timeout", "2s"}, tc.args...),
				env{stdout: io.Discard, stderr: &out, getenv: envMap(tc.env)})
			if code != tc.want {
				t.Fatalf("exit %d, want %d: %s", code, tc.want, out.String())
			}
		})
	}
}
