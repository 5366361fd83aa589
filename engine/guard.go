package engine

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
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

// checkHost refuses a request whose Host header names neither this engine
// nor a name of Options.AllowHosts. It applies to every request that
// arrived on a loopback address: there only localhost, a loopback
// address, the address the connection arrived at, the name Listen was
// given and the allowed names pass. A request that arrived on another
// address is checked only when AllowHosts is set (the names a network
// uses for the engine vary: service names, IPs, tunnels), and then with
// the same list. A request without a local address (a handler called
// directly) and AllowHosts "*" are not checked.
func (e *Engine) checkHost(r *http.Request) error {
	var local netip.Addr
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			local = ap.Addr().Unmap()
		}
	}
	if !local.IsValid() || (!local.IsLoopback() && len(e.o.AllowHosts) == 0) {
		return nil
	}
	host := hostName(r.Host)
	if host == "" || strings.EqualFold(host, "localhost") || strings.EqualFold(host, e.listenHost) {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && (ip.Unmap().IsLoopback() || ip.Unmap() == local) {
		return nil
	}
	for _, h := range e.o.AllowHosts {
		if h == "*" || strings.EqualFold(h, host) {
			return nil
		}
	}
	shown := r.Host
	if len(shown) > 100 {
		shown = shown[:100] + "..."
	}
	where := "on loopback, so it answers only Host localhost, a loopback address or its own address"
	if !local.IsLoopback() {
		where = "with --allow-host set, so it answers only Host localhost, a loopback address, its own address or an allowed name"
	}
	return &hostError{msg: fmt.Sprintf("request Host %q refused: the engine listens %s (a guard against DNS rebinding); "+
		"start it with --allow-host %s (Options.AllowHosts) to admit that name", shown, where, hostFlagHint(host))}
}

// hostName returns the host of a Host header value, without port or
// brackets, and without a final dot.
func hostName(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
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
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return controlErrf(http.StatusForbidden, "control request refused: Sec-Fetch-Site %.40q; the control API takes requests only from its own origin or from clients outside a browser", s)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) || (u.Scheme != "http" && u.Scheme != "https") {
			return controlErrf(http.StatusForbidden, "control request refused: Origin %.100q is not this engine (%.100s); the control API takes requests only from its own origin or from clients outside a browser", o, r.Host)
		}
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return controlErrf(http.StatusUnsupportedMediaType, "control request refused: Content-Type %.100q; control POSTs take Content-Type: application/json (curl -H 'Content-Type: application/json')", ct)
	}
	return nil
}
