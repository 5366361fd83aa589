package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Check is one readiness check: nil means ready. It must return promptly
// once ctx ends (the server gives every check a few seconds).
type Check func(ctx context.Context) error

// Readier is implemented by components that know whether they can do their
// work right now, e.g. a NATS sink whose connection is down returns an error.
// Components without it count as ready.
type Readier interface {
	Ready() error
}

// ReadyCheck turns components into one Check: each one that implements
// Readier must return nil. Components that do not implement it are skipped.
// The error names the component by its Name() when it has one.
func ReadyCheck[T any](components ...T) Check {
	return func(context.Context) error {
		var errs []error
		for _, c := range components {
			r, ok := any(c).(Readier)
			if !ok {
				continue
			}
			if err := r.Ready(); err != nil {
				if n, ok := any(c).(interface{ Name() string }); ok {
					err = fmt.Errorf("%s: %w", n.Name(), err)
				}
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// CachedCheck runs c at most once per ttl and answers from the last result in
// between, so a busy health endpoint does not turn into API calls against
// AWS.
func CachedCheck(c Check, ttl time.Duration) Check {
	var (
		mu   sync.Mutex
		at   time.Time
		last error
	)
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() && time.Since(at) < ttl {
			return last
		}
		last = c(ctx)
		at = time.Now()
		return last
	}
}

// Server serves /metrics (Prometheus text format), /healthz (200 while the
// process is alive) and /readyz (200 only when every readiness check
// passes, else 503 with the failing checks as JSON).
type Server struct {
	log          *zap.Logger
	gatherer     prometheus.Gatherer
	checkTimeout time.Duration
	pprof        bool

	mu     sync.Mutex
	checks map[string]Check
	srv    *http.Server
	ln     net.Listener
	done   chan struct{}
}

// NewServer returns a server exposing g (nil: no /metrics) and logging with
// log (nil: nop). Add checks with AddCheck, then Listen.
func NewServer(g prometheus.Gatherer, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{log: log, gatherer: g, checkTimeout: 5 * time.Second, checks: map[string]Check{}}
}

// EnableProfiling serves Go's runtime profiles under /debug/pprof/ (CPU,
// heap, goroutines, mutex and block, execution trace) beside the metrics.
// They reveal internals and a CPU profile costs a few percent while it
// runs, so it is off unless asked for; call it before Listen.
func (s *Server) EnableProfiling() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pprof = true
}

// AddCheck registers (or replaces) the readiness check called name.
func (s *Server) AddCheck(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

// CheckResult is the outcome of one readiness check.
type CheckResult struct {
	Name string
	Err  error
}

// Ready runs every check concurrently, each bounded by the server's check
// timeout, and returns the results sorted by name and whether all passed.
func (s *Server) Ready(ctx context.Context) ([]CheckResult, bool) {
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	for n := range s.checks {
		names = append(names, n)
	}
	checks := make([]Check, len(names))
	sort.Strings(names)
	for i, n := range names {
		checks[i] = s.checks[n]
	}
	s.mu.Unlock()

	res := make([]CheckResult, len(names))
	var wg sync.WaitGroup
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, s.checkTimeout)
			defer cancel()
			res[i] = CheckResult{Name: names[i], Err: runCheck(cctx, checks[i])}
		}()
	}
	wg.Wait()
	ok := true
	for _, r := range res {
		if r.Err != nil {
			ok = false
		}
	}
	return res, ok
}

func runCheck(ctx context.Context, c Check) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("check panicked: %v", r)
		}
	}()
	return c(ctx)
}

// Handler returns the HTTP handler with the three endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(s.log)}))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		res, ok := s.Ready(r.Context())
		body := struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
		}{Status: "ready", Checks: map[string]string{}}
		for _, c := range res {
			if c.Err != nil {
				body.Checks[c.Name] = c.Err.Error()
			} else {
				body.Checks[c.Name] = "ok"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			body.Status = "unready"
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
	s.mu.Lock()
	profiling := s.pprof
	s.mu.Unlock()
	if profiling {
		// Registered on this mux only: net/http/pprof's init also fills
		// http.DefaultServeMux, which nothing here serves.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Listen binds addr (host:port; ":0" picks a free port) and serves in the
// background until Close.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics server: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	s.mu.Lock()
	s.srv, s.ln, s.done = srv, ln, make(chan struct{})
	s.mu.Unlock()
	go func() {
		defer close(s.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server stopped", zap.Error(err))
		}
	}()
	s.log.Info("metrics server listening", zap.String("addr", ln.Addr().String()))
	return nil
}

// Addr returns the bound address ("" before Listen).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops the server, waiting for in-flight requests until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	<-done
	return err
}

// Probe asks the /readyz endpoint at addr (host:port; an empty host means
// 127.0.0.1) and returns nil when it answered 200. It is what `archiver
// health` runs as the container health check.
func Probe(ctx context.Context, addr string) error {
	return ProbePath(ctx, addr, "/readyz")
}

// ProbePath is Probe for another path (/healthz for liveness only).
func ProbePath(ctx context.Context, addr, path string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// Its own client, not http.DefaultClient: the address is this host's,
	// never behind an HTTP_PROXY the container sets for the rest.
	direct := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := direct.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) // a readiness answer is small
	if resp.StatusCode != http.StatusOK {
		var failing []string
		for n, v := range body.Checks {
			if v != "ok" {
				failing = append(failing, n+": "+v)
			}
		}
		sort.Strings(failing)
		return fmt.Errorf("GET %s: %s %v", url, resp.Status, failing)
	}
	return nil
}
