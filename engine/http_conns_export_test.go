package engine

import "net/http"

// Test-only access to the connection bookkeeping, for engine_test.

// BodiesInReadForTest returns how many request bodies the engine is
// receiving now (their buffers allocated).
func (e *Engine) BodiesInReadForTest() int64 { return e.bodiesInRead.Load() }

// ConnsForTest returns how many connections the server holds open, and how
// many of them are idle between keep-alive requests.
func (s *Server) ConnsForTest() (open, idle int) {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	for t := range s.conns.open {
		if http.ConnState(t.state.Load()) == http.StateIdle {
			idle++
		}
	}
	return len(s.conns.open), idle
}
