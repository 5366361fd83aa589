package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The server-CPU figures: what one PutItem and one GetItem cost the server
// in CPU time, for the engine and for dynalite, each running as its own
// process under the same load from this process, read from the server's
// own utime+stime in /proc/PID/stat. The client's CPU is not in them.
const (
	serverCPURounds = 5
	serverCPUPhase  = 2 * time.Second
	// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
	// (sysconf(_SC_CLK_TCK), 100 on every Linux architecture Go runs on).
	clockTicks = 100
	// serverCPUGetKeys bounds the keys GetItem reads, so that every server
	// answers reads from a working set of the same size.
	serverCPUGetKeys = 20_000
	// serverCPUEnvProfile names an environment variable: when set, the
	// in-memory engine process writes a CPU profile of its whole run to
	// that file (archiver engine --cpuprofile).
	serverCPUEnvProfile = "BENCH_ENGINE_CPUPROFILE"
)

// serverProc is a DynamoDB-speaking server in a process of its own.
type serverProc struct {
	name     string
	cmd      *exec.Cmd
	endpoint string
	next     atomic.Int64 // the next PutItem key
	exited   chan struct{}
	// hc keeps its connections open between phases, so that no phase
	// pays for connection setup.
	hc *http.Client
}

// phase is one timed load against one server.
type phase struct {
	cpuPerOp float64 // server CPU seconds per request
	rate     float64 // requests/s
}

// cpuServers are the servers under measurement: all of them in the order
// each round visits them (engine, dynalite, null, disk), and each by role.
// dynalite is nil when it cannot be started, disk when the archiver has no
// --data-dir flag.
type cpuServers struct {
	all                          []*serverProc
	engine, dynalite, null, disk *serverProc
}

// stop stops every server started.
func (c *cpuServers) stop() {
	for _, s := range c.all {
		s.stop()
	}
}

// runServerCPUBench builds the archiver and the null server, starts the
// servers, and runs rounds of PutItem then GetItem phases against each back
// to back. It prints the medians over the rounds and their spread.
func runServerCPUBench(ctx context.Context, w io.Writer) error {
	tmp, err := os.MkdirTemp("", "ttl-bench-cpu-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	archiver, nullServer, err := buildServers(ctx, tmp)
	if err != nil {
		return err
	}
	var c cpuServers
	defer c.stop()
	if err := c.start(ctx, w, archiver, nullServer, filepath.Join(tmp, "data")); err != nil {
		return err
	}
	for _, s := range c.all {
		if s != c.null {
			if err := s.createTable(ctx); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	puts, gets, err := serverCPURoundsRun(ctx, c.all, c.null, c.disk)
	if err != nil {
		return err
	}
	printServerCPU(w, puts, gets, c.engine, c.dynalite, c.null, c.disk)
	return nil
}

// start starts the engine in memory, dynalite (or says on w why not), the
// null server and, when the archiver has the flag, the engine with
// --data-dir dataDir.
func (c *cpuServers) start(ctx context.Context, w io.Writer, archiver, nullServer, dataDir string) error {
	engineArgs := []string{"--ttl-interval=-1s", "--log-level", "warn"}
	memArgs := engineArgs
	if f := os.Getenv(serverCPUEnvProfile); f != "" {
		memArgs = append(slices.Clone(engineArgs), "--cpuprofile", f)
	}
	engineCmd := func(args ...string) func(int) (*exec.Cmd, error) {
		return func(port int) (*exec.Cmd, error) {
			return exec.Command(archiver, append([]string{"engine", "--listen", loopback(port)}, args...)...), nil
		}
	}
	var err error
	if c.engine, err = startServerProc(ctx, "engine", engineCmd(memArgs...)); err != nil {
		return fmt.Errorf("engine process: %w", err)
	}
	c.all = append(c.all, c.engine)
	if c.dynalite, err = startServerProc(ctx, "dynalite", startDynalite); err != nil {
		fmt.Fprintf(w, "  dynalite: n/a (%v); the engine's figures alone follow\n", err)
	} else {
		c.all = append(c.all, c.dynalite)
	}
	if c.null, err = startServerProc(ctx, "null server", func(port int) (*exec.Cmd, error) { return exec.Command(nullServer, loopback(port)), nil }); err != nil {
		return fmt.Errorf("null server: %w", err)
	}
	c.all = append(c.all, c.null)
	if !hasFlag(ctx, archiver, "engine", "--data-dir") {
		return nil
	}
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		return err
	}
	if c.disk, err = startServerProc(ctx, "engine --data-dir", engineCmd(append([]string{"--data-dir", dataDir}, engineArgs...)...)); err != nil {
		return fmt.Errorf("engine --data-dir process: %w", err)
	}
	c.all = append(c.all, c.disk)
	return nil
}

// serverCPURoundsRun runs the rounds: in each, a PutItem phase against
// every server in turn, then a GetItem phase against every server that
// keeps items in memory. It returns the phases per server.
func serverCPURoundsRun(ctx context.Context, servers []*serverProc, null, disk *serverProc) (puts, gets map[*serverProc][]phase, err error) {
	puts, gets = map[*serverProc][]phase{}, map[*serverProc][]phase{}
	for range serverCPURounds {
		for _, s := range servers {
			p, err := s.measure(ctx, s.putOne)
			if err != nil {
				return nil, nil, fmt.Errorf("%s PutItem: %w", s.name, err)
			}
			puts[s] = append(puts[s], p)
		}
		for _, s := range servers {
			if s == disk {
				continue // reads do not touch the disk
			}
			get := s.getOne
			if s == null {
				get = s.putOne // it answers {} to anything
			}
			p, err := s.measure(ctx, get)
			if err != nil {
				return nil, nil, fmt.Errorf("%s GetItem: %w", s.name, err)
			}
			gets[s] = append(gets[s], p)
		}
	}
	return puts, gets, nil
}

// printServerCPU prints per request: the engine's and dynalite's server CPU
// and their ratio against the target, the null server's share of the
// engine's CPU and the cost of --data-dir. Figures are medians over the
// rounds with min-max; ratios are the median of each round's own ratio.
func printServerCPU(w io.Writer, puts, gets map[*serverProc][]phase, engine, dynalite, null, disk *serverProc) {
	fmt.Fprintf(w, "  server CPU per request, each server its own process (utime+stime from /proc/PID/stat), %d clients over plain HTTP, %d rounds of %v phases; median (min-max):\n",
		benchClients, serverCPURounds, serverCPUPhase)
	for _, op := range []struct {
		name   string
		phases map[*serverProc][]phase
	}{{"PutItem", puts}, {"GetItem", gets}} {
		e := op.phases[engine]
		fmt.Fprintf(w, "  %-8s engine   %s\n", op.name, cpuAndRate(e))
		if dynalite != nil {
			d := op.phases[dynalite]
			fmt.Fprintf(w, "  %-8s dynalite %s\n", "", cpuAndRate(d))
			fmt.Fprintf(w, "  %-8s engine/dynalite CPU per op %sx (target <= 0.25x)\n", "", ratioSpread(e, d, cpuUS, 1, "%.2f"))
		}
		n := op.phases[null]
		fmt.Fprintf(w, "  %-8s null net/http server %s: %s%% of the engine's CPU\n", "", cpuAndRate(n), ratioSpread(n, e, cpuUS, 100, "%.0f"))
	}
	if disk == nil {
		fmt.Fprintln(w, "  PutItem with --data-dir: skipped, this archiver has no --data-dir flag")
		return
	}
	d, m := puts[disk], puts[engine]
	fmt.Fprintf(w, "  PutItem  engine --data-dir %s: %sx the CPU and %sx the rate of in memory\n",
		cpuAndRate(d), ratioSpread(d, m, cpuUS, 1, "%.2f"), ratioSpread(d, m, opsRate, 1, "%.2f"))
}

func cpuUS(p phase) float64   { return p.cpuPerOp * 1e6 }
func opsRate(p phase) float64 { return p.rate }

// cpuAndRate renders a server's CPU per op and rate over its phases.
func cpuAndRate(ps []phase) string {
	return fmt.Sprintf("%s us CPU per op, %s ops/s", spread(ps, cpuUS), spread(ps, opsRate))
}

// spread renders the median of f over ps with its range, e.g. "31 (29-35)".
func spread(ps []phase, f func(phase) float64) string {
	xs := make([]float64, len(ps))
	for i, p := range ps {
		xs[i] = f(p)
	}
	return fmt.Sprintf("%.0f (%.0f-%.0f)", median(slices.Clone(xs)), slices.Min(xs), slices.Max(xs))
}

// ratioSpread renders the median of the rounds' own ratios
// scale*f(a[i])/f(b[i]) with their range, each number in format.
func ratioSpread(a, b []phase, f func(phase) float64, scale float64, format string) string {
	xs := make([]float64, min(len(a), len(b)))
	for i := range xs {
		xs[i] = scale * f(a[i]) / f(b[i])
	}
	return fmt.Sprintf(format+" ("+format+"-"+format+")", median(slices.Clone(xs)), slices.Min(xs), slices.Max(xs))
}

// buildServers builds the archiver and the null server into dir.
func buildServers(ctx context.Context, dir string) (archiver, null string, err error) {
	root, err := plModuleRoot()
	if err != nil {
		return "", "", err
	}
	archiver, null = filepath.Join(dir, "archiver"), filepath.Join(dir, "nullserver")
	for bin, pkg := range map[string]string{archiver: "./cmd/archiver", null: "./cmd/bench/nullserver"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return archiver, null, nil
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// hasFlag reports whether `bin sub --help` lists flag.
func hasFlag(ctx context.Context, bin, sub, flag string) bool {
	out, _ := exec.CommandContext(ctx, bin, sub, "--help").CombinedOutput()
	return bytes.Contains(out, []byte(" -"+strings.TrimLeft(flag, "-")+" ")) || bytes.Contains(out, []byte(" -"+strings.TrimLeft(flag, "-")+"\n"))
}

// startServerProc starts the command that command returns for a free
// loopback port and waits until it answers ListTables.
func startServerProc(ctx context.Context, name string, command func(port int) (*exec.Cmd, error)) (*serverProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := loopback(port)
	cmd, err := command(port)
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	s := &serverProc{name: name, cmd: cmd, endpoint: "http://" + addr, exited: make(chan struct{}),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.post(ctx, "ListTables", []byte("{}"))
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("exited: %s", strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("did not come up in 60s: %v", err)
		}
	}
}

// stop interrupts the server (so that a CPU profile is written) and kills
// it if it has not exited 10 s later.
func (s *serverProc) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// cpuSeconds is the server's CPU time so far (user + system, all threads).
func (s *serverProc) cpuSeconds() (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Field 2, the command name, may hold spaces and parentheses: count
	// fields after its closing parenthesis, from field 3 (state) on.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", s.cmd.Process.Pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(utime+stime) / clockTicks, nil
}

// measure runs one phase of call from benchClients clients and reads the
// server's CPU time around it.
func (s *serverProc) measure(ctx context.Context, call func(ctx context.Context, r *rand.Rand) error) (phase, error) {
	settle()
	cpu0, err := s.cpuSeconds()
	if err != nil {
		return phase{}, err
	}
	var ops atomic.Int64
	start := time.Now()
	_, err = runClients(ctx, serverCPUPhase, func(_, _ int, r *rand.Rand) error {
		if err := call(ctx, r); err != nil {
			return err
		}
		ops.Add(1)
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return phase{}, err
	}
	cpu1, err := s.cpuSeconds()
	if err != nil {
		return phase{}, err
	}
	n := float64(ops.Load())
	return phase{cpuPerOp: (cpu1 - cpu0) / n, rate: n / elapsed.Seconds()}, nil
}

// createTable creates the bench table (no stream, no index: dynalite has
// neither) and waits until it is ACTIVE (dynalite creates tables
// asynchronously, as DynamoDB does).
func (s *serverProc) createTable(ctx context.Context) error {
	_, err := s.post(ctx, "CreateTable", []byte(`{"TableName":"cpu","BillingMode":"PAY_PER_REQUEST",`+
		`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],`+
		`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"}]}`))
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, err := s.post(ctx, "DescribeTable", []byte(`{"TableName":"cpu"}`))
		if err != nil {
			return err
		}
		if bytes.Contains(out, []byte(`"TableStatus":"ACTIVE"`)) {
			return nil
		}
	}
	return errors.New("table cpu not ACTIVE after 30s")
}

// putOne writes the next item: the same items, in the same order, on every
// server.
func (s *serverProc) putOne(ctx context.Context, _ *rand.Rand) error {
	k := s.next.Add(1) - 1
	body := fmt.Appendf(make([]byte, 0, 256), `{"TableName":"cpu","Item":{"pk":{"S":"%s"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"}}}`,
		benchPartition(int(k)), k, payload, k*7)
	_, err := s.post(ctx, "PutItem", body)
	return err
}

// getOne reads one of the items written so far (every key below next
// less the writes that may have been in flight) and fails if it is missing.
func (s *serverProc) getOne(ctx context.Context, r *rand.Rand) error {
	n := min(s.next.Load()-benchClients, serverCPUGetKeys)
	if n <= 0 {
		return errors.New("no items written")
	}
	k := r.Int64N(n)
	body := fmt.Appendf(make([]byte, 0, 128), `{"TableName":"cpu","Key":{"pk":{"S":"%s"},"sk":{"N":"%d"}}}`, benchPartition(int(k)), k)
	out, err := s.post(ctx, "GetItem", body)
	if err == nil && !bytes.Contains(out, []byte(`"Item"`)) {
		err = fmt.Errorf("item %d missing: %s", k, out)
	}
	return err
}

// post sends one DynamoDB request with the headers of a signed one (dynalite
// refuses a request without them; no server here checks the signature) and
// returns the body of a 200 answer.
func (s *serverProc) post(ctx context.Context, op string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["X-Amz-Target"] = []string{"DynamoDB_20120810." + op}
	h["Content-Type"] = []string{"application/x-amz-json-1.0"}
	h["X-Amz-Date"] = []string{"20260101T000000Z"}
	h["Authorization"] = []string{"AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/dynamodb/aws4_request, " +
		"SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + strings.Repeat("0", 64)}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s", op, resp.StatusCode, out)
	}
	return out, nil
}
