// Package natstest is the tests' one way to start a nats-server: in this
// process, on a free loopback port, with JetStream storing under the
// test's temporary directory, stopped when the test ends. A test may stop
// it and start it again on the same port and store (Stop, Restart), with
// other options (a user's new password, say).
//
// It is the one file of the repository's tests that starts a nats-server
// (TestNATSServerStarters, internal/housetest).
package natstest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyWithin bounds the wait for a started server to take connections (a
// generous bound on a loaded machine, not a timing assertion).
const readyWithin = 30 * time.Second

// Server is one nats-server of a test.
type Server struct {
	t    testing.TB
	opts server.Options
	addr string

	mu  sync.Mutex
	srv *server.Server // nil while stopped
}

// Start starts a nats-server with JetStream on 127.0.0.1 (a free port,
// the store in t.TempDir()), each tweak applied to its options first
// (max_payload, users, accounts...), and stops it when the test ends.
func Start(t testing.TB, tweaks ...func(*server.Options)) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	for _, tweak := range tweaks {
		tweak(&s.opts)
	}
	s.start()
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port // a restart keeps the port
	s.addr = fmt.Sprintf("127.0.0.1:%d", s.opts.Port)
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("nats-server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyWithin) {
		s.t.Fatalf("nats-server not ready within %s", readyWithin)
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// Addr is the server's host:port, the same across restarts.
func (s *Server) Addr() string { return s.addr }

// URL is nats://host:port.
func (s *Server) URL() string { return "nats://" + s.addr }

// Stop shuts the server down and waits until it has; stopping a stopped
// server does nothing. Safe from any goroutine.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart stops the server (when it runs) and starts it again on the same
// port and store, each tweak applied to its options first (they stay for
// later restarts).
func (s *Server) Restart(tweaks ...func(*server.Options)) {
	s.t.Helper()
	s.Stop()
	for _, tweak := range tweaks {
		tweak(&s.opts)
	}
	s.start()
}

// Running is the running server, for its monitoring calls (Connz, Varz);
// nil while stopped.
func (s *Server) Running() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Connect connects a plain client (for a test's set-up and checks) to
// addr, a host:port with or without a user:password@ or a nats:// URL,
// and closes it when the test ends.
func Connect(t testing.TB, addr string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	if !strings.Contains(addr, "://") {
		addr = "nats://" + addr
	}
	nc, err := nats.Connect(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// StreamMessages returns how many messages the JetStream stream on addr
// holds.
func StreamMessages(t testing.TB, addr, stream string) uint64 {
	t.Helper()
	_, js := Connect(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
