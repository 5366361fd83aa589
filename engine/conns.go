package engine

import (
	"net"
	"net/http"
	"sync"
)

// newConns tracks the server's connections that have not yet started a
// request. http.Server.Shutdown closes idle connections at once, but it
// waits up to five seconds for a connection that was accepted and never
// sent a byte (state New), which SDK clients leave behind whenever a dial
// they started loses the race to a connection that became free. The
// engine closes those at shutdown instead: no request is on them.
type newConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// track is the http.Server's ConnState hook.
func (c *newConns) track(conn net.Conn, state http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if state == http.StateNew {
		if c.conns == nil {
			c.conns = map[net.Conn]struct{}{}
		}
		c.conns[conn] = struct{}{}
		return
	}
	delete(c.conns, conn)
}

// closeAll closes every connection still waiting for its first request.
func (c *newConns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn := range c.conns {
		conn.Close()
		delete(c.conns, conn)
	}
}
