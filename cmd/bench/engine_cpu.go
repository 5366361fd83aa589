package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
)

// The server-CPU figures: what one PutItem and one GetItem cost the server
// in CPU time, for the engine and for dynalite, each running as its own
// process under the same load from this process, read from the server's
// own utime+stime in /proc/PID/stat. The client's CPU is not in them.
const (
	// serverCPUGetKeys bounds the keys GetItem reads, so that every server
	// answers reads from a working set of the same size.
	serverCPUGetKeys = 20_000
	// serverCPUEnvProfile names an environment variable: when set, the
	// in-memory engine process writes a CPU profile of its whole run to
	// that file (archiver engine --cpuprofile).
	serverCPUEnvProfile = "BENCH_ENGINE_CPUPROFILE"
)

// cpuSizes are the server-CPU bench's sizes.
type cpuSizes struct {
	rounds int
	phase  time.Duration // each timed load
	// install: dynalite is installed with npm when it is missing.
	install bool
}

func cpuSizesFor(tiny bool) cpuSizes {
	if tiny {
		return cpuSizes{rounds: 1, phase: 200 * time.Millisecond}
	}
	return cpuSizes{rounds: 5, phase: 2 * time.Second, install: true}
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
func runServerCPUBench(ctx context.Context, w io.Writer, tiny bool) error {
	return serverCPU(ctx, w, cpuSizesFor(tiny))
}

// serverCPU is runServerCPUBench at sizes sz.
func serverCPU(ctx context.Context, w io.Writer, sz cpuSizes) error {
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
	if err := c.start(ctx, w, archiver, nullServer, filepath.Join(tmp, "data"), sz.install); err != nil {
		return err
	}
	for _, s := range c.all {
		if s != c.null {
			if err := s.createTable(ctx); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	puts, gets, peerErr, err := serverCPURoundsRun(ctx, sz, c.all, c.null, c.disk, c.dynalite)
	if err != nil {
		return err
	}
	if peerErr != nil {
		fmt.Fprintf(w, "  dynalite: n/a (it failed a request: %v); the engine's figures alone follow\n", peerErr)
		c.dynalite = nil
	}
	printServerCPU(w, sz, puts, gets, c.engine, c.dynalite, c.null, c.disk)
	return nil
}

// start starts the engine in memory, dynalite (or says on w why not), the
// null server and, when the archiver has the flag, the engine with
// --data-dir dataDir; install: dynalite is installed when missing.
func (c *cpuServers) start(ctx context.Context, w io.Writer, archiver, nullServer, dataDir string, install bool) error {
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
	if c.dynalite, err = startServerProc(ctx, "dynalite", dynalite(install)); err != nil {
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
// keeps items in memory. It returns the phases per server. A failure of
// peer (dynalite: it has reset connections under this load) drops it
// from the rounds and is returned as peerErr; any other server's failure
// ends the run.
func serverCPURoundsRun(ctx context.Context, sz cpuSizes, servers []*serverProc, null, disk, peer *serverProc) (puts, gets map[*serverProc][]phase, peerErr, err error) {
	puts, gets = map[*serverProc][]phase{}, map[*serverProc][]phase{}
	failed := func(s *serverProc, op string, e error) error {
		if s != peer || peer == nil {
			return fmt.Errorf("%s %s: %w", s.name, op, e)
		}
		peerErr = fmt.Errorf("%s: %w", op, e)
		servers = slices.DeleteFunc(slices.Clone(servers), func(x *serverProc) bool { return x == peer })
		delete(puts, peer)
		delete(gets, peer)
		return nil
	}
	for range sz.rounds {
		for _, s := range servers {
			p, err := s.measure(ctx, sz.phase, s.putOne)
			if err != nil {
				if err := failed(s, "PutItem", err); err != nil {
					return nil, nil, nil, err
				}
				continue
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
			p, err := s.measure(ctx, sz.phase, get)
			if err != nil {
				if err := failed(s, "GetItem", err); err != nil {
					return nil, nil, nil, err
				}
				continue
			}
			gets[s] = append(gets[s], p)
		}
	}
	return puts, gets, peerErr, nil
}

// printServerCPU prints per request: the engine's and dynalite's server CPU
// and their ratio against the target, the null server's share of the
// engine's CPU and the cost of --data-dir. Figures are medians over the
// rounds with min-max; ratios are the median of each round's own ratio.
func printServerCPU(w io.Writer, sz cpuSizes, puts, gets map[*serverProc][]phase, engine, dynalite, null, disk *serverProc) {
	fmt.Fprintf(w, "  server CPU per request, each server its own process (utime+stime from /proc/PID/stat), %d clients over plain HTTP, %d rounds of %v phases; median (min-max):\n",
		benchClients, sz.rounds, sz.phase)
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
	return benchkit.Spread("%.0f", xs)
}

// ratioSpread renders the median of the rounds' own ratios
// scale*f(a[i])/f(b[i]) with their range, each number in format.
func ratioSpread(a, b []phase, f func(phase) float64, scale float64, format string) string {
	xs := make([]float64, min(len(a), len(b)))
	for i := range xs {
		xs[i] = scale * f(a[i]) / f(b[i])
	}
	return benchkit.Spread(format, xs)
}
