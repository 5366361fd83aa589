// Package enginecmd is the engine's command line: the flags, their checks
// and the wiring that serves the local DynamoDB + DynamoDB Streams engine
// until the context ends. Both binaries run it: `archiver engine` in the
// full archiver, and `archiver-engine`, the slim binary that links the
// engine alone and so idles in half the memory (docs/DESIGN.md, "The
// engine", Memory). One Run keeps their flags, help and behaviour the same.
//
// It imports the engine, cmd/internal/cli and internal/logging, nothing
// that links the AWS SDK, NATS, Prometheus or Parquet
// (TestSlimEngineLinksNoArchiver, internal/housetest).
package enginecmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/logging"
)

// Stopping is what the engine's command does on SIGINT and SIGTERM, for
// the signal lines of a program that runs it (cli.WatchSignals).
func Stopping(prog string) cli.Stopping {
	return cli.Stopping{Prog: prog,
		Graceful: "finishing the requests in flight, stopping the engine", Forced: "the requests in flight are abandoned"}
}

// Run serves the engine as the flags in args say until ctx ends
// (SIGINT/SIGTERM), then shuts it down cleanly. prog names the program in
// help ("usage: archiver engine [flags]") and errors ("archiver-engine:
// --listen: ..."); the log goes to stdout. Bad flags are a
// *cli.UsageError, -h is cli.ErrHelp.
func Run(ctx context.Context, prog string, args []string, stdout io.Writer) error {
	args, cpuProfile, err := cli.TakeHiddenFlag(args, "cpuprofile")
	if err != nil {
		return cli.Usagef("%s: %v", prog, err)
	}
	f := newFlags(prog)
	if err := cli.ParseFlags(f.fs, args, stdout, "usage: "+prog+" [flags]\n\nflags:\n"); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return cli.Usagef("%s: unexpected argument %q", prog, f.fs.Arg(0))
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, f.logLevel, logging.FormatAuto)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	opts.Logger = log.Named("engine")
	stopProfile, err := cli.StartCPUProfile(cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	defer engine.TuneMemory(engine.MemoryTuning{Headroom: f.memHeadroom, Floor: 4 << 20})()
	return serve(ctx, f.listen, opts)
}

// serve listens on listen with opts until ctx ends, then shuts the
// server down (waiting at most 10 s for requests in flight).
func serve(ctx context.Context, listen string, opts engine.Options) error {
	log := opts.Logger
	srv, err := engine.Listen(listen, opts)
	if err != nil {
		return err // names the address, or the data directory and what is wrong with it
	}
	if opts.UI {
		log.Info("web console", zap.String("url", srv.Endpoint()+"/_engine/ui/"))
	}
	if host, _, _ := net.SplitHostPort(listen); !cli.IsLoopbackHost(host) {
		log.Warn("engine listening beyond loopback: it accepts any credentials, and checks a request's Host only with --allow-host", zap.String("listen", listen))
	}
	<-ctx.Done()
	log.Info("shutting down", zap.String("endpoint", srv.Endpoint()))
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// consoleOn is whether the engine serves its web console: --ui as given,
// or by default (flag not given) only when it listens on loopback.
func consoleOn(fs *flag.FlagSet, ui bool, listen string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "ui" })
	host, _, _ := net.SplitHostPort(listen)
	return ui && (given || cli.IsLoopbackHost(host))
}
