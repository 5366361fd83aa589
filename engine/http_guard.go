package engine

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// The engine accepts any credentials, so a web page in a browser on the
// same machine must not reach it. A page cannot read a cross-origin
// answer, and the DynamoDB API's X-Amz-Target header needs a CORS
// preflight the engine never grants; what is left is DNS rebinding (a
// name of the attacker's that resolves to 127.0.0.1 makes the page
// same-origin with the engine), which the Host check stops, and simple
// cross-site POSTs, which the control API's Content-Type and
// Origin/Sec-Fetch-Site checks stop.

// codeAccessDenied is the error code of a request refused by the Host
// check (403; the SDKs do not retry it).
const codeAccessDenied = "AccessDeniedException"

// hostError is a request refused for its Host header.
type hostError struct{ msg string }

func (h *hostError) Error() string { return h.msg }

// checkHost refuses a request whose Host names neither this engine nor a
// name of Options.AllowHosts. It applies to every request that arrived on
// a loopback address: there only localhost, a loopback address, the
// address the connection arrived at, the name Listen was given and the
// allowed names pass. A request that arrived on another address is
// checked only when AllowHosts is set (the names a network uses for the
// engine vary: service names, IPs, tunnels), and then with the same list.
// A request without a local address (a handler called directly) and
// AllowHosts "*" are not checked. The host checked is requestAuthority's,
// the one the control API's Origin check compares with.
func (e *Engine) checkHost(r *http.Request) error {
	local := localAddr(r)
	if !local.IsValid() || (!local.Addr().IsLoopback() && len(e.o.AllowHosts) == 0) {
		return nil
	}
	host := requestAuthority(r).host
	if strings.EqualFold(host, "localhost") || (e.listenHost != "" && sameHost(host, e.listenHost)) {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && (ip.Unmap().IsLoopback() || ip.Unmap() == local.Addr()) {
		return nil
	}
	for _, h := range e.o.AllowHosts {
		if h == "*" || sameHost(h, host) {
			return nil
		}
	}
	shown := r.Host
	if len(shown) > 100 {
		shown = shown[:100] + "..."
	}
	where := "on loopback, so it answers only Host localhost, a loopback address or its own address"
	if !local.Addr().IsLoopback() {
		where = "with --allow-host set, so it answers only Host localhost, a loopback address, its own address or an allowed name"
	}
	return &hostError{msg: fmt.Sprintf("request Host %q refused: the engine listens %s (a guard against DNS rebinding); "+
		"start it with --allow-host %s (Options.AllowHosts) to admit that name", shown, where, hostFlagHint(host))}
}

// localAddr is the address r arrived at, IPv4-mapped addresses unmapped;
// invalid for a request without a connection (a handler called directly).
func localAddr(r *http.Request) netip.AddrPort {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return netip.AddrPort{}
	}
	if ta, ok := a.(*net.TCPAddr); ok { // what net/http's listeners give: no string round trip
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// authority is the destination a request names: its host, without
// brackets or final dot, and its port (0 when not given, -1 when not a
// number).
type authority struct {
	host string
	port int
}

// String shows a in messages: host:port, or the host alone when no port
// was given.
func (a authority) String() string {
	if a.port == 0 {
		return a.host
	}
	return net.JoinHostPort(a.host, strconv.Itoa(a.port))
}

// requestAuthority is what r names as its destination, for the Host check
// and the Origin check alike: r.Host, which net/http takes from the
// request target when the request line has the absolute form (POST
// http://host/ HTTP/1.1, whose Host header an origin server ignores: RFC
// 9112, 3.2.2) and from the Host header otherwise. An empty Host (HTTP/1.0,
// or Host: with no value) names the address the request arrived at: it
// names no other site, and no browser sends it.
func requestAuthority(r *http.Request) authority {
	if r.Host == "" {
		if local := localAddr(r); local.IsValid() {
			return authority{host: local.Addr().String(), port: int(local.Port())}
		}
		return authority{}
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		return authority{host: hostName(r.Host)}
	}
	return authority{host: hostName(host), port: parsePort(port)}
}

// originNamesRequest reports whether an Origin header names the
// destination of r (requestAuthority): the same host (sameHost) and the
// same port, an Origin's port being by default its scheme's (http 80,
// https 443). A Host without a port stands for the Origin scheme's
// default (a browser leaves out only that one) or the port the request
// arrived at (a client that left it out reached the engine there).
// "null" and other schemes than http and https name nothing.
func originNamesRequest(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	def := 80
	switch u.Scheme {
	case "http":
	case "https":
		def = 443
	default:
		return false
	}
	port := def
	if p := u.Port(); p != "" {
		port = parsePort(p)
	}
	req := requestAuthority(r)
	if port <= 0 || !sameHost(hostName(u.Hostname()), req.host) {
		return false
	}
	if req.port != 0 {
		return port == req.port
	}
	local := localAddr(r)
	return port == def || (local.IsValid() && port == int(local.Port()))
}

// parsePort is the port number p, 0 for "" and -1 for anything else.
func parsePort(p string) int {
	if p == "" {
		return 0
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return -1
	}
	return int(n)
}

// sameHost reports whether two hosts are one: names compared
// case-insensitively, addresses as addresses (::ffff:127.0.0.1 is
// 127.0.0.1; brackets ignored).
func sameHost(a, b string) bool {
	a, b = strings.Trim(a, "[]"), strings.Trim(b, "[]")
	ia, erra := netip.ParseAddr(a)
	ib, errb := netip.ParseAddr(b)
	if erra == nil && errb == nil {
		return ia.Unmap() == ib.Unmap()
	}
	return strings.EqualFold(a, b)
}

// hostName returns the host of a Host header value, without port or
// brackets, and without a final dot.
func hostName(hostport string) string {
	h := hostport
	// Without a colon there is no port to split off: SplitHostPort would
	// only fail, allocating its error, on most hosts (names, IPv4).
	if strings.IndexByte(hostport, ':') >= 0 {
		if host, _, err := net.SplitHostPort(hostport); err == nil {
			h = host
		}
	}
	return strings.TrimSuffix(strings.Trim(h, "[]"), ".")
}

// hostFlagHint is host as --allow-host takes it, or NAME when host is not
// a name the flag would accept.
func hostFlagHint(host string) string {
	if checkAllowHost(host) != nil {
		return "NAME"
	}
	return host
}

// ParseAllowHosts parses the --allow-host flag: comma-separated host names
// or IP addresses without port ("engine,host.docker.internal"; "" is
// none), or "*" for any Host. Names are matched case-insensitively.
func ParseAllowHosts(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if err := checkAllowHost(f); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// checkAllowHost checks one entry of Options.AllowHosts.
func checkAllowHost(h string) error {
	if h == "*" {
		return nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && ip.Zone() == "" {
		return nil
	}
	if len(h) == 0 || len(h) > 253 {
		return fmt.Errorf("allowed host %.100q: want a host name of 1 to 253 characters", h)
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("allowed host %q: want a host name like engine or host.docker.internal (no port, scheme or path), or an IP address", h)
		}
	}
	return nil
}

// checkControlPost refuses a control POST a web page could have sent: one
// from another site (Sec-Fetch-Site other than same-origin or none, or an
// Origin other than the engine itself) and one whose Content-Type is not
// application/json (an HTML form or a fetch without preflight cannot send
// that). curl and the SDKs send no Origin or Sec-Fetch-Site.
func checkControlPost(r *http.Request) *controlError {
	if ce := checkSameOrigin(r); ce != nil {
		return ce
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return controlErrf(http.StatusUnsupportedMediaType, "control request refused: Content-Type %.100q; control POSTs take Content-Type: application/json (curl -H 'Content-Type: application/json')", ct)
	}
	return nil
}

// checkSameOrigin refuses a request a browser sent for a page of another
// origin: a Sec-Fetch-Site other than same-origin or none, or an Origin
// other than the engine itself. Clients outside a browser send neither.
func checkSameOrigin(r *http.Request) *controlError {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return controlErrf(http.StatusForbidden, "control request refused: Sec-Fetch-Site %.40q; the control API takes requests only from its own origin or from clients outside a browser", s)
	}
	if o := r.Header.Get("Origin"); o != "" && !originNamesRequest(o, r) {
		return controlErrf(http.StatusForbidden, "control request refused: Origin %.100q is not this engine (%.100s); the control API takes requests only from its own origin or from clients outside a browser", o, requestAuthority(r))
	}
	return nil
}
