package engine

import (
	"embed"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// The web console at /_engine/ui/: a page, a script and a style sheet
// embedded in the binary (engine/ui/), no build step. It is as safe as the
// control API, whose guards it shares: the Host check (ServeHTTP), the
// client check (loopback or Options.ControlFrom) and, for a POST, the
// cross-site checks and Content-Type (admitControl). Every other request
// but a top-level navigation to the page must be same-origin too
// (Sec-Fetch-Site, Origin), and every answer carries a
// Content-Security-Policy that admits only the engine's own script, style
// and connections, and no framing. Its data comes from the JSON endpoints
// of ui_api.go and from the control API (the clock, a TTL sweep).

// uiPrefix is the console's path.
const uiPrefix = controlPrefix + "ui"

// uiFiles are the console's static files.
//
//go:embed ui/index.html ui/app.js ui/app.css ui/icon.svg
var uiFiles embed.FS

// uiAssets maps a path under uiPrefix to its file and Content-Type.
var uiAssets = map[string][2]string{
	"/":         {"ui/index.html", "text/html; charset=utf-8"},
	"/app.js":   {"ui/app.js", "text/javascript; charset=utf-8"},
	"/app.css":  {"ui/app.css", "text/css; charset=utf-8"},
	"/icon.svg": {"ui/icon.svg", "image/svg+xml"},
}

// uiCSP is the console's Content-Security-Policy: its own files only, no
// inline script or style, no framing, no plug-ins, no <base>, no form
// submissions (the page's forms are handled by its script).
const uiCSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"frame-ancestors 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"

// isUIPath reports whether a request path is the console's.
func isUIPath(p string) bool { return p == uiPrefix || strings.HasPrefix(p, uiPrefix+"/") }

// setUIHeaders sets the security headers every answer of the console
// carries.
func setUIHeaders(h http.Header) {
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// serveUI serves a request under /_engine/ui: the page and its files, or
// the console's JSON endpoints under /_engine/ui/api/.
func (e *Engine) serveUI(w http.ResponseWriter, r *http.Request) {
	defer e.controlPanic(w, r)
	setUIHeaders(w.Header())
	if !e.o.UI {
		writeControl(w, http.StatusNotFound, map[string]string{"error": "the web console is off: the engine was started with --ui=false (Options.UI)"})
		return
	}
	if !e.admitControl(w, r) {
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, uiPrefix)
	if r.Method != http.MethodPost && !(rest == "/" && isNavigation(r)) {
		if ce := checkSameOrigin(r); ce != nil {
			e.logRefusal(&e.guardLog.controlPost, "console request refused as one another site's page sent", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path), zap.Error(ce))
			writeControl(w, ce.status, map[string]string{"error": ce.msg})
			return
		}
	}
	if api, ok := strings.CutPrefix(rest, "/api/"); ok {
		e.serveUIAPI(w, r, api)
		return
	}
	e.serveUIAsset(w, r, rest)
}

// isNavigation reports whether r is a browser's top-level navigation (a
// link followed, an address typed): another site may send the user to
// the page, which it can neither frame nor read.
func isNavigation(r *http.Request) bool {
	return r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
}

// serveUIAsset serves one of the console's files (rest is its path under
// uiPrefix); /_engine/ui redirects to /_engine/ui/.
func (e *Engine) serveUIAsset(w http.ResponseWriter, r *http.Request, rest string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeControl(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " " + r.URL.Path + ": method not allowed (use GET)"})
		return
	}
	if rest == "" {
		http.Redirect(w, r, uiPrefix+"/", http.StatusFound)
		return
	}
	a, ok := uiAssets[rest]
	if !ok {
		writeControl(w, http.StatusNotFound, map[string]string{"error": "no console file " + r.URL.Path + "; the console is at " + uiPrefix + "/"})
		return
	}
	b, err := uiFiles.ReadFile(a[0])
	if err != nil { // embedded at build time: cannot fail
		writeControl(w, http.StatusInternalServerError, map[string]string{"error": "reading " + a[0] + ": " + err.Error()})
		return
	}
	h := w.Header()
	h.Set("Content-Type", a[1])
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}
