package main

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/demo"
	"github.com/ttl-archiver/archiver/internal/logging"
	"github.com/ttl-archiver/archiver/internal/ops"
)

// demoCmd runs the engine, an embedded NATS server with JetStream and the
// archiver in one process, writes sessions that expire over the next
// seconds and some user deletes, prints expiries as they arrive on NATS and
// ends (Ctrl-C or --duration) with a summary.
func demoCmd(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("archiver demo", flag.ContinueOnError)
	duration := fs.Duration("duration", 0, "stop after this long (default: run until Ctrl-C)")
	archive := fs.String("archive", "", "archive folder, kept (default: a temporary folder, removed at the end)")
	logLevel := fs.String("log-level", "error", "log level of the embedded components (logs go to stderr)")
	precise := fs.Bool("precise", false, "also run archiver sweep: the engine's own TTL deletes up to 30s late, the sweeper within about a second of the TTL, and the archiver counts its deletes as expiries (--expired-when past-ttl)")
	if err := cli.ParseFlags(fs, args, e.stdout, "usage: archiver demo [flags]\n\nEngine, NATS (JetStream) and archiver in one process; no network, no setup.\n\nflags:"+"\n"); err != nil {
		return err
	}
	if *duration < 0 {
		return cli.Usagef("archiver demo: --duration: %s must not be negative", *duration)
	}
	if *duration > 0 && *duration < 6*time.Second {
		return cli.Usagef("archiver demo: --duration: %s is too short to see expiries; use 6s or more", *duration)
	}
	if _, err := logging.ParseLevel(*logLevel); err != nil {
		return cli.Usagef("archiver demo: --log-level: %v", err)
	}
	if *archive != "" {
		// The archiver takes it as a file:// URL, which wants a path that
		// is absolute (a relative "out" would read as the host "out").
		abs, err := filepath.Abs(*archive)
		if err != nil {
			return cli.Usagef("archiver demo: --archive: %v", err)
		}
		*archive = abs
	}
	log, err := logging.New(os.Stderr, *logLevel, logging.FormatConsole)
	if err != nil {
		return err
	}
	reg := ops.NewRegistry(ops.Version(version))
	sum, err := demo.Run(ctx, demo.Options{Duration: *duration, ArchiveDir: *archive, Log: log, Out: e.stdout, Precise: *precise,
		Archiver: func(ctx context.Context, a demo.Archiver) error {
			return runPipeline(ctx, demoRunConfig(a), pipelineDeps{log: log, reg: reg, stdout: io.Discard})
		},
		Metrics: reg})
	if err != nil {
		return err
	}
	demo.PrintSummary(e.stdout, sum)
	return nil
}

// demoRunConfig is `archiver run`'s configuration for the demo's archiver.
func demoRunConfig(a demo.Archiver) *runConfig {
	return &runConfig{
		Endpoint:        a.Endpoint,
		Region:          a.Region,
		Tables:          a.Tables,
		Checkpoint:      a.Checkpoint,
		Sinks:           a.Sinks,
		ExpiredWhen:     a.ExpiredWhen,
		Start:           "trim-horizon",
		ShutdownTimeout: 10 * time.Second,
		LeaseDuration:   20 * time.Second,
		LeaseRenew:      5 * time.Second,
		LogLevel:        "warn",
		MetricsAddr:     "127.0.0.1:0",
		Metrics:         "prometheus",
	}
}
