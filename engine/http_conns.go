package engine

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the connection options.
const (
	defaultBodyTimeout = time.Minute
	defaultMaxConns    = 1024
	defaultIdleTimeout = 2 * time.Minute
)

// checkConnOptions sets the defaults of the connection options and refuses
// negative values and malformed allowed hosts.
func checkConnOptions(o *Options) error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"BodyTimeout", &o.BodyTimeout, defaultBodyTimeout}, {"IdleTimeout", &o.IdleTimeout, defaultIdleTimeout}} {
		if *d.v < 0 {
			return fmt.Errorf("engine: %s must not be negative, got %v", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.MaxConns < 0 {
		return fmt.Errorf("engine: MaxConns must not be negative, got %d", o.MaxConns)
	}
	if o.MaxConns == 0 {
		o.MaxConns = defaultMaxConns
	}
	for _, h := range o.AllowHosts {
		if err := checkAllowHost(h); err != nil {
			return fmt.Errorf("engine: AllowHosts: %w", err)
		}
	}
	return nil
}

// boundBody puts a read deadline Options.BodyTimeout ahead on a request
// that has a body (a Content-Length or chunked), before anything answers
// it. readBody clears it once the body is in; every other answer leaves
// it in force: a refusal, an unknown operation, a control GET, a body that
// timed out or was too large. That bounds net/http too, which before it
// reuses a connection reads what is left of a body of up to 256 KiB
// (maxPostHandlerReadBytes), without a deadline of its own: a body that
// stalls under that size held its connection, and a place under
// MaxConns, for ever. With the deadline a drain that does not finish in
// time fails and the connection closes once the answer is sent; one that
// does (the rest of a body the client sent in full) keeps it for the next
// request, whose headers net/http reads under a deadline of its own.
func (e *Engine) boundBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return // no body: nothing to wait for, and no deadline to cut a long handler
	}
	// ErrNotSupported (a ResponseWriter that is not net/http's): no deadline.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(e.o.BodyTimeout))
}

// conns tracks a Server's open connections, each with its state and since
// when it has been in it, and holds their number to a cap: its listener
// makes room for a new connection by closing the one that has waited
// longest without a request in progress, or waits for one to end.
//
// It also closes, at shutdown, the connections that have not started a
// request: http.Server.Shutdown closes idle connections at once but waits
// up to five seconds for one that was accepted and never sent a byte
// (state New), which SDK clients leave behind whenever a dial they started
// loses the race to a connection that became free.
//
// A connection's state changes twice a request; each connection keeps its
// own, without a lock (trackedConn), and the lock is taken only to open or
// close one, or to wake an admit waiting for room.
type conns struct {
	max    int
	start  time.Time // the origin of the connections' since
	mu     sync.Mutex
	cond   sync.Cond // signalled when a connection closes, or goes idle while admit waits
	open   map[*trackedConn]struct{}
	closed bool // the listener is closed: Accept returns net.ErrClosed
	// waiting counts the admit calls looking for room or waiting for it;
	// raised before they look, so that a connection going idle after the
	// look sees it and wakes them (track).
	waiting atomic.Int32
}

func newConns(max int) *conns {
	c := &conns{max: max, start: time.Now(), open: map[*trackedConn]struct{}{}}
	c.cond.L = &c.mu
	return c
}

// trackedConn is a connection that leaves its conns when closed, with its
// state and since when it has been in it.
type trackedConn struct {
	net.Conn
	c     *conns
	once  sync.Once
	state atomic.Int32 // an http.ConnState
	since atomic.Int64 // when it went New or Idle: time since c.start, in ns
}

func (t *trackedConn) Close() error {
	t.once.Do(func() { t.c.remove(t) })
	return t.Conn.Close()
}

// set records that t went into state now.
func (t *trackedConn) set(state http.ConnState) {
	if state == http.StateIdle || state == http.StateNew {
		t.since.Store(int64(time.Since(t.c.start))) // before the state: whoever sees it sees this
	}
	t.state.Store(int32(state))
}

func (c *conns) remove(t *trackedConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, t)
	c.cond.Broadcast()
}

// track is the http.Server's ConnState hook.
func (c *conns) track(conn net.Conn, state http.ConnState) {
	t, ok := conn.(*trackedConn)
	if !ok {
		return
	}
	if state == http.StateClosed || state == http.StateHijacked {
		c.remove(t)
		return
	}
	t.set(state)
	if state == http.StateIdle && c.waiting.Load() > 0 {
		c.mu.Lock() // held by admit until it waits: the signal cannot come before
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// admit makes room for conn, evicting or waiting, and tracks it.
func (c *conns) admit(conn net.Conn) (*trackedConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.open) >= c.max && !c.closed {
		c.waiting.Add(1)
		if v := c.waitingLongestLocked(); v != nil {
			c.waiting.Add(-1)
			delete(c.open, v)
			v.Conn.Close() // its server goroutine ends; v.Close finds it gone
			continue
		}
		c.cond.Wait()
		c.waiting.Add(-1)
	}
	if c.closed {
		return nil, net.ErrClosed
	}
	t := &trackedConn{Conn: conn, c: c}
	t.set(http.StateNew)
	c.open[t] = struct{}{}
	return t, nil
}

// waitingLongestLocked returns the connection that has waited longest
// without a request in progress: idle between keep-alive requests, or
// accepted and not yet past its first request's header (a client that
// never sends a byte ages like an idle one). Nil when every connection is
// serving a request. c.mu is held.
func (c *conns) waitingLongestLocked() *trackedConn {
	var best *trackedConn
	var since int64
	for t := range c.open {
		if s := http.ConnState(t.state.Load()); s == http.StateIdle || s == http.StateNew {
			if ts := t.since.Load(); best == nil || ts < since {
				best, since = t, ts
			}
		}
	}
	return best
}

// closeNew closes every connection still waiting for its first request.
func (c *conns) closeNew() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range c.open {
		if http.ConnState(t.state.Load()) == http.StateNew {
			delete(c.open, t)
			t.Conn.Close()
		}
	}
	c.cond.Broadcast()
}

// capListener is a listener whose connections conns tracks and caps.
type capListener struct {
	net.Listener
	c *conns
}

func (l *capListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	t, err := l.c.admit(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return t, nil
}

// Close closes the listener and wakes an Accept waiting for room.
func (l *capListener) Close() error {
	l.c.mu.Lock()
	l.c.closed = true
	l.c.cond.Broadcast()
	l.c.mu.Unlock()
	return l.Listener.Close()
}
