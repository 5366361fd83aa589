package engine_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine"
)

// TestHostAndOriginRaw: the Host check (DynamoDB API and control API) and
// the control API's Origin check read one destination, sent by hand over
// TCP: the request target's host when the request line has the absolute
// form (its Host header ignored, RFC 9112 3.2.2), else the Host header; a
// Host without a port names the port the request arrived at, and no Host
// at all (HTTP/1.0, or Host: empty) the address it arrived at. An Origin
// passes when it names that host and port, its own port by default its
// scheme's (http 80, https 443); a Host without a port matches that
// default (what a browser leaves out) or the port the request arrived at.
// The DynamoDB API does not read Origin: a browser cannot send it
// X-Amz-Target across origins without the preflight the engine never
// grants.
func TestHostAndOriginRaw(t *testing.T) {
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.Endpoint(), "http://"))
	p, _ := strconv.Atoi(port)
	self := "127.0.0.1:" + port
	other := "127.0.0.1:" + strconv.Itoa(p%65535+1)
	const hostRefused, originRefused = "--allow-host", "Origin"
	for _, c := range []struct {
		name   string
		target string // "" is origin-form; else the absolute form's scheme and authority
		proto  string
		host   string // the Host header line's value; "-" sends none
		origin string
		api    int
		ctl    int
		why    string // what a refusal names
	}{
		// (a) no Host: the address the request arrived at.
		{"HTTP/1.0 without Host", "", "HTTP/1.0", "-", "", 200, 200, ""},
		{"Host: empty", "", "HTTP/1.1", "", "", 200, 200, ""},
		{"Host: empty, Origin the engine", "", "HTTP/1.1", "", "http://" + self, 200, 200, ""},
		{"HTTP/1.0 without Host, Origin the engine", "", "HTTP/1.0", "-", "http://" + self, 200, 200, ""},
		{"HTTP/1.0 without Host, foreign Origin", "", "HTTP/1.0", "-", "http://evil.example", 200, 403, originRefused},
		{"HTTP/1.0 without Host, Origin on another port", "", "HTTP/1.0", "-", "http://" + other, 200, 403, originRefused},
		// (b) the absolute form: its host, not the Host header's.
		{"absolute form naming another host", "http://evil.example", "HTTP/1.1", self, "", 403, 403, hostRefused},
		{"absolute form naming another host, Origin the engine", "http://evil.example", "HTTP/1.1", self, "http://" + self, 403, 403, hostRefused},
		{"absolute form naming another host with the port", "http://evil.example:" + port, "HTTP/1.1", self, "http://evil.example:" + port, 403, 403, hostRefused},
		{"absolute form naming the engine, Host another", "http://" + self, "HTTP/1.1", "evil.example", "", 200, 200, ""},
		{"absolute form naming the engine, Origin the engine", "http://" + self, "HTTP/1.1", "evil.example", "http://" + self, 200, 200, ""},
		{"absolute form naming the engine, Origin the Host header's", "http://" + self, "HTTP/1.1", "evil.example", "http://evil.example", 200, 403, originRefused},
		// (c) ports.
		{"Host without port, Origin with the engine's", "", "HTTP/1.1", "127.0.0.1", "http://" + self, 200, 200, ""},
		{"Host without port, Origin on another port", "", "HTTP/1.1", "127.0.0.1", "http://" + other, 200, 403, originRefused},
		{"Host without port, Origin without (80, as a browser sends both)", "", "HTTP/1.1", "127.0.0.1", "http://127.0.0.1", 200, 200, ""},
		{"Host without port, https Origin without (443, behind a proxy)", "", "HTTP/1.1", "127.0.0.1", "https://127.0.0.1", 200, 200, ""},
		{"Host without port, Origin naming 80 on https", "", "HTTP/1.1", "127.0.0.1", "https://127.0.0.1:80", 200, 403, originRefused},
		{"Host with an empty port, Origin with the engine's", "", "HTTP/1.1", "127.0.0.1:", "http://" + self, 200, 200, ""},
		{"Host with port, Origin on another port", "", "HTTP/1.1", self, "http://" + other, 200, 403, originRefused},
		{"Host with port, Origin without (80)", "", "HTTP/1.1", self, "http://127.0.0.1", 200, 403, originRefused},
		{"Host with port, Origin the engine", "", "HTTP/1.1", self, "http://" + self, 200, 200, ""},
		{"names in another case", "", "HTTP/1.1", "LocalHost.:" + port, "http://localhost:" + port, 200, 200, ""},
		{"ipv6 loopback", "", "HTTP/1.1", "[::1]:" + port, "http://[0:0::1]:" + port, 200, 200, ""},
		{"another name for the engine's address", "", "HTTP/1.1", self, "http://localhost:" + port, 200, 403, originRefused},
		{"foreign Host", "", "HTTP/1.1", "evil.example:" + port, "http://evil.example:" + port, 403, 403, hostRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			head := func(path string) string {
				s := fmt.Sprintf("POST %s%s %s\r\n", c.target, path, c.proto)
				if c.host != "-" {
					s += "Host: " + c.host + "\r\n"
				}
				if c.origin != "" {
					s += "Origin: " + c.origin + "\r\n"
				}
				return s + "Content-Type: application/json\r\nContent-Length: 2\r\n"
			}
			for _, r := range []struct {
				name, req, ok string
				code          int
			}{
				{"api", head("/") + "X-Amz-Target: DynamoDB_20120810.ListTables\r\n\r\n{}", "TableNames", c.api},
				{"control", head("/_engine/ttl/sweep") + "\r\n{}", `"deleted"`, c.ctl},
			} {
				conn := dialRaw(t, srv)
				conn.send(t, r.req)
				code, body := conn.response(t)
				want := r.ok
				if r.code != 200 {
					want = c.why
				}
				if code != r.code || !strings.Contains(body, want) {
					t.Errorf("%s: %d %s, want %d naming %s", r.name, code, body, r.code, want)
				}
			}
		})
	}
}
