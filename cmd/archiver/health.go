package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/internal/ops"
)

// healthCmd asks a running archiver's /readyz and succeeds when it is ready.
// It is the ECS container health check (the image has no curl).
func healthCmd(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("archiver health", flag.ContinueOnError)
	def := e.getenv("ARCHIVER_METRICS_ADDR")
	if def == "" {
		def = ":9090"
	}
	addr := fs.String("addr", def, "the archiver's --metrics-addr (an empty host means 127.0.0.1; default $ARCHIVER_METRICS_ADDR or :9090)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	quiet := fs.Bool("quiet", false, "print nothing when ready")
	live := fs.Bool("live", false, "ask /healthz (the process is alive) instead of /readyz (it can do its work)")
	if err := cli.ParseFlags(fs, args, e.stdout, "usage: archiver health [flags]\n\nExit 0 when the archiver's /readyz answers 200, 1 otherwise.\n\nflags:"+"\n"); err != nil {
		return err
	}
	if *timeout <= 0 {
		return cli.Usagef("archiver health: --timeout: %s must be positive", *timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	path := "/readyz"
	if *live {
		path = "/healthz"
	}
	if err := ops.ProbePath(ctx, *addr, path); err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	if !*quiet {
		fmt.Fprintln(e.stdout, "ready")
	}
	return nil
}
