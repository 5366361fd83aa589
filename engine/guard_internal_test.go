package engine

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCheckHostPolicy: which Host headers pass, by the address the
// request arrived on (a loopback listener, a non-loopback one, a handler
// called without a connection) and Options.AllowHosts.
func TestCheckHostPolicy(t *testing.T) {
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8000}
	lo6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8000}
	lan := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8000}
	for _, c := range []struct {
		name       string
		local      net.Addr
		allow      []string
		listenHost string
		host       string
		ok         bool
	}{
		{"loopback: own address", lo, nil, "", "127.0.0.1:8000", true},
		{"loopback: localhost, no port", lo, nil, "", "localhost", true},
		{"loopback: localhost with final dot", lo, nil, "", "localhost.:8000", true},
		{"loopback: ipv6", lo6, nil, "", "[::1]:8000", true},
		{"loopback: ipv4-mapped", lo, nil, "", "[::ffff:127.0.0.1]:8000", true},
		{"loopback: no Host (HTTP/1.0)", lo, nil, "", "", true},
		{"loopback: foreign name", lo, nil, "", "evil.example:8000", false},
		{"loopback: foreign address", lo, nil, "", "10.1.2.3:8000", false},
		{"loopback: the name Listen was given", lo, nil, "devbox", "devbox:8000", true},
		{"loopback: allowed name", lo, []string{"engine"}, "", "ENGINE:8000", true},
		{"loopback: any host allowed", lo, []string{"*"}, "", "evil.example", true},
		{"network, nothing allowed: unchecked", lan, nil, "", "whatever.example", true},
		{"network, allowed name", lan, []string{"engine"}, "", "engine:8000", true},
		{"network, its own address", lan, []string{"engine"}, "", "10.1.2.3:8000", true},
		{"network, localhost", lan, []string{"engine"}, "", "localhost:8000", true},
		{"network, another name", lan, []string{"engine"}, "", "evil.example:8000", false},
		{"no connection: unchecked", nil, nil, "", "evil.example", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &Engine{o: Options{AllowHosts: c.allow}, listenHost: c.listenHost}
			r := httptest.NewRequest("GET", "/", nil)
			r.Host = c.host
			if c.local != nil {
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, c.local))
			}
			err := e.checkHost(r)
			if c.ok != (err == nil) {
				t.Fatalf("Host %q on %v, allowed %v: %v, want allowed %v", c.host, c.local, c.allow, err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "--allow-host") {
				t.Fatalf("refusal %q does not name --allow-host", err)
			}
		})
	}
}
