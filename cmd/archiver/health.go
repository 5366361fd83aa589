package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/internal/ops"
)

// engineStatePath is what `health --engine` asks an engine: its control
// API's state, which answers 200 once the engine serves (and only to a
// loopback client unless --control-from admits others).
const engineStatePath = "/_engine/state"

// healthCmd asks a running archiver's /readyz, or with --engine an
// engine's state, and succeeds when it answers 200. It is the container's
// health check (the image has no curl): the Dockerfile's for run and
// sweep, and, given --engine, the one a compose file sets for the engine.
func healthCmd(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("archiver health", flag.ContinueOnError)
	addr := fs.String("addr", "", "the archiver's --metrics-addr (default $ARCHIVER_METRICS_ADDR or :9090), or with --engine the engine's --listen (default $ARCHIVER_ENGINE_ADDR or 127.0.0.1:8000); an empty host means 127.0.0.1")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	quiet := fs.Bool("quiet", false, "print nothing when ready")
	live := fs.Bool("live", false, "ask /healthz (the process is alive) instead of /readyz (it can do its work)")
	engine := fs.Bool("engine", false, "ask an engine (archiver engine, archiver-engine) whether it serves: GET "+engineStatePath)
	if err := cli.ParseFlags(fs, args, e.stdout, "usage: archiver health [flags]\n\nExit 0 when the archiver's /readyz (or with --engine, the engine) answers 200, 1 otherwise.\n\nflags:"+"\n"); err != nil {
		return err
	}
	if *timeout <= 0 {
		return cli.Usagef("archiver health: --timeout: %s must be positive", *timeout)
	}
	if *engine && *live {
		return cli.Usagef("archiver health: --live asks the archiver's /healthz; an engine has one answer (--engine alone)")
	}
	path, envAddr, defAddr := "/readyz", "ARCHIVER_METRICS_ADDR", ":9090"
	switch {
	case *engine:
		path, envAddr, defAddr = engineStatePath, "ARCHIVER_ENGINE_ADDR", "127.0.0.1:8000"
	case *live:
		path = "/healthz"
	}
	if *addr == "" {
		*addr = cmp.Or(e.getenv(envAddr), defAddr)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := ops.ProbePath(ctx, *addr, path); err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	if !*quiet {
		fmt.Fprintln(e.stdout, "ready")
	}
	return nil
}
