package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Server: the engine on a TCP listener, with the connection bounds of
// http_conns.go and net/http's header and idle timeouts.

// Server is an Engine listening on a TCP address.
type Server struct {
	e     *Engine
	ln    net.Listener
	srv   *http.Server
	done  chan struct{}
	conns *conns
}

// Listen starts an engine with options o serving on addr (use
// "127.0.0.1:0" for a free port) and logs one line with its endpoint.
func Listen(addr string, o Options) (*Server, error) {
	e, err := New(o)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("engine: listen on %s: %w", addr, err)
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		e.listenHost = strings.Trim(host, "[]")
	}
	s := &Server{e: e, ln: ln, done: make(chan struct{}), conns: newConns(e.o.MaxConns)}
	// No ReadTimeout or WriteTimeout: ServeHTTP bounds each body's read
	// (BodyTimeout), and a response may take as long as its request does.
	s.srv = &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: e.o.IdleTimeout,
		MaxHeaderBytes: 64 << 10, ErrorLog: zap.NewStdLog(e.log), ConnState: s.conns.track}
	s.srv.RegisterOnShutdown(s.conns.closeNew) // runs once the listener is closed
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(&capListener{Listener: ln, c: s.conns}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("engine server stopped", zap.Error(err))
		}
	}()
	e.log.Info("engine listening", zap.String("endpoint", s.Endpoint()), zap.String("region", e.o.Region))
	return s, nil
}

// Endpoint is the server's base URL, e.g. "http://127.0.0.1:8000".
func (s *Server) Endpoint() string { return "http://" + s.ln.Addr().String() }

// Engine returns the server's engine (for SweepTTL and fault injection).
func (s *Server) Engine() *Engine { return s.e }

// Shutdown stops accepting connections, waits for requests in flight (until
// ctx is done) and stops the engine's background work.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	<-s.done
	return errors.Join(err, s.e.Close())
}

// Close shuts the server down gracefully, waiting at most 10 s for requests
// in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}
