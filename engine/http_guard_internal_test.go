package engine

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
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
		{"network, allowed IPv6 address in brackets", lan, []string{"[fd00::1]"}, "", "[FD00:0::1]:8000", true},
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

// TestGuardLogRateLimited: a flood of refused requests logs one WARN per
// reason at once, then at most one a minute (by a clock the test moves),
// each line counting the requests refused since the one before; the
// reasons (Host, control client, control POST) are limited apart.
func TestGuardLogRateLimited(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	e, err := New(Options{TTLInterval: -1, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	now := time.Unix(0, 0)
	e.guardLog.now = func() time.Time { return now }
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8000}
	send := map[string]func() *http.Request{
		"host": func() *http.Request {
			r := httptest.NewRequest("POST", "/", nil)
			r.Host = "evil.example:8000"
			return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, lo))
		},
		"controlFrom": func() *http.Request {
			r := httptest.NewRequest("POST", "/_engine/ttl/sweep", nil)
			r.RemoteAddr = "10.9.9.9:1234"
			return r
		},
		"controlPost": func() *http.Request {
			r := httptest.NewRequest("POST", "/_engine/ttl/sweep", strings.NewReader("{}"))
			r.RemoteAddr = "127.0.0.1:1234"
			r.Header.Set("Content-Type", "text/plain")
			return r
		},
	}
	msg := map[string]string{
		"host":        "request refused for its Host",
		"controlFrom": "control request refused for its client address",
		"controlPost": "control request refused as one a web page could send",
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		reason  string
		n       int
		refused int64 // the count of the one line logged; 0: none
	}{
		{"first Host refusal logs at once", 0, "host", 1, 1},
		{"a flood within the minute logs nothing", 30 * time.Second, "host", 500, 0},
		{"another reason is limited apart", 0, "controlFrom", 3, 1},
		{"and a third", 0, "controlPost", 2, 1},
		{"still within the minute", 29 * time.Second, "host", 1, 0},
		{"a minute after the last line: one line counting the flood", time.Second, "host", 1, 502},
		{"the control client's line counts its own", time.Minute, "controlFrom", 1, 3},
		{"the control POST's too", 0, "controlPost", 1, 2},
	} {
		now = now.Add(step.advance)
		logs.TakeAll()
		for i := 0; i < step.n; i++ {
			w := httptest.NewRecorder()
			e.ServeHTTP(w, send[step.reason]())
			if w.Code < 400 {
				t.Fatalf("%s: request %d answered %d, want a refusal", step.name, i, w.Code)
			}
		}
		got := logs.TakeAll()
		if step.refused == 0 {
			if len(got) != 0 {
				t.Errorf("%s: logged %d lines, want none: %v", step.name, len(got), got[0].Message)
			}
			continue
		}
		if len(got) != 1 {
			t.Fatalf("%s: logged %d lines, want 1", step.name, len(got))
		}
		if !strings.HasPrefix(got[0].Message, msg[step.reason]) {
			t.Errorf("%s: logged %q, want %q", step.name, got[0].Message, msg[step.reason])
		}
		if c := got[0].ContextMap()["refused"]; c != step.refused {
			t.Errorf("%s: refused = %v, want %d", step.name, c, step.refused)
		}
	}
}
