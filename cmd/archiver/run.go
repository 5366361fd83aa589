package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/logging"
	"github.com/ttl-archiver/archiver/internal/ops"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

// runCmd is `archiver run`: it archives until SIGINT/SIGTERM, then stops
// reading, flushes the sinks, writes final checkpoints, releases its leases
// and returns nil, all within --shutdown-timeout.
func runCmd(ctx context.Context, args []string, e env) error {
	cfg, err := loadRunConfig(args, e.getenv, e.stdout)
	if err != nil {
		return err
	}
	if cfg.PrintConfig {
		return printConfig(e.stdout, cfg)
	}
	log, err := logging.New(logWriter(cfg, e), cfg.LogLevel, logging.FormatAuto)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	reg := ops.NewRegistry(ops.Version(version))
	if soft := ops.SetMemoryLimitFromContainer(e.getenv); soft > 0 {
		log.Named("archiver").Info("Go memory limit set from the container's", zap.Int64("bytes", soft))
	}
	e.stop.OnForce(func() {
		log.Named("archiver").Error("stopped at once by a second signal: the flush is abandoned", zap.String("abandoned", abandoned(reg)))
	})
	return runPipeline(ctx, cfg, pipelineDeps{log: log, reg: reg, stdout: e.stdout})
}

// logWriter is where logs go: stdout, as ECS's awslogs driver expects (EMF
// documents are log lines there too), unless a stdout:// sink (or
// dead-letter sink) owns stdout: then logs go to stderr, so stdout stays
// one clean stream of archive lines.
func logWriter(cfg *runConfig, e env) io.Writer {
	for _, s := range append(slices.Clip(cfg.Sinks), cfg.DeadLetter) {
		if writesStdout(s) {
			return e.stderr
		}
	}
	return e.stdout
}

// pipelineDeps are what runPipeline takes from its host (run or demo).
type pipelineDeps struct {
	log *zap.Logger
	reg *prometheus.Registry
	// stdout is where stdout:// sinks and EMF documents go.
	stdout io.Writer
	// ready, when set, receives the health server's address once it listens.
	ready func(addr string)
}

// runPipeline wires clients, checkpoint store, sinks, consumer and the
// health server from cfg and runs until ctx ends.
func runPipeline(ctx context.Context, cfg *runConfig, d pipelineDeps) error {
	log := d.log.Named("archiver")
	awsCfg, err := loadAWSConfig(ctx, "run", cfg.Region, cfg.Endpoint, log)
	if err != nil {
		return err
	}
	ddb, streams := sourceClients(awsCfg, cfg)
	store, err := openCheckpoint(ctx, cfg, awsCfg, d)
	if err != nil {
		return err
	}
	storeClosed := false
	defer func() {
		if !storeClosed {
			_ = store.Close()
		}
	}()
	// The sinks are closed here until the consumer runs: then it closes
	// them when it stops.
	ss := &runSinks{}
	running := false
	defer func() {
		if !running {
			ss.close(ctx)
		}
	}()
	if err := ss.open(ctx, cfg, awsCfg, store.worker, d, log); err != nil {
		return err
	}
	if !cfg.SkipPreflight {
		if err := preflightSinks(ctx, ss.opened, log); err != nil {
			return err
		}
	}
	srcs, err := planSources(ctx, cfg, awsCfg, ddb, streams, ss.routes, log)
	if err != nil {
		return err
	}
	if srcs.tagged, err = newTagSource(cfg, srcs.home(), ss.routes, d); err != nil {
		return err
	}
	cons, err := newConsumer(cfg, srcs, store, ss, d)
	if err != nil {
		return err
	}
	srv, err := serveRunHealth(cfg, d, srcs, ss, store)
	if err != nil {
		return err
	}
	defer closeOpsServer(ctx, srv)
	defer startEMF(ctx, cfg.Metrics, d.reg, d.stdout, log)()

	log.Info("archiver running",
		zap.Strings("tables", cfg.Tables), zap.Strings("tables_tagged", cfg.TablesTagged), zap.Strings("stream_arns", cfg.StreamARNs),
		zap.Int("sinks", len(ss.routes)), zap.String("metrics_addr", srv.Addr()), zap.String("version", ops.Version(version)))
	running = true
	stopped, runErr := runConsumer(ctx, cfg, cons, store, log)
	if !stopped {
		return runErr
	}
	storeClosed = true
	if err := store.Close(); err != nil {
		log.Warn("closing the checkpoint store failed", zap.Error(err))
	}
	if runErr != nil {
		return runErr
	}
	log.Info("archiver stopped")
	return nil
}

// sourceClients are the DynamoDB and Streams clients of cfg's endpoint.
// FastGetRecords on the client, not only on the readers' calls: the
// SDK's decoder panics on some malformed responses, and the wrapper turns
// that into an error for every Streams operation.
func sourceClients(awsCfg aws.Config, cfg *runConfig) (*dynamodb.Client, *dynamodbstreams.Client) {
	if cfg.SDKDecoding {
		return endpointClients(awsCfg, cfg.Endpoint)
	}
	return endpointClients(awsCfg, cfg.Endpoint, shard.FastGetRecords)
}

// runSinks are the sinks of --sink and --dead-letter, once opened.
type runSinks struct {
	routes     []consumer.Route
	deadLetter sinks.Sink   // nil without --dead-letter
	opened     []sinks.Sink // all of them, the dead-letter sink too
	// readyURLs name them, in the order of opened, for /readyz.
	readyURLs []string
}

// open opens the sinks of cfg, in order; those it opened before one
// failed stay in s, for close. worker names this worker in the manifests.
func (s *runSinks) open(ctx context.Context, cfg *runConfig, awsCfg aws.Config, worker string, d pipelineDeps, log *zap.Logger) error {
	sinkOpts := sinks.Options{
		Logger:     d.log.Named("sinks"),
		Registerer: d.reg,
		Stdout:     d.stdout,
		Worker:     worker,
		AWSConfig: func(ctx context.Context, region string) (aws.Config, error) {
			c := awsCfg.Copy()
			if region != "" {
				c.Region = region
			}
			return c, nil
		},
	}
	for _, u := range cfg.Sinks {
		sk, kinds, err := sinks.Open(ctx, u, sinkOpts)
		if err != nil {
			var ce *sinks.ConfigError
			if errors.As(err, &ce) {
				return cli.Usagef("archiver run: --sink: %v", err)
			}
			return fmt.Errorf("open sink %s: %w", redact.URL(u), err)
		}
		s.opened = append(s.opened, sk)
		s.routes = append(s.routes, consumer.Route{Sink: sk, Kinds: kinds})
		log.Info("sink opened", zap.String("sink", sk.Name()), zap.Strings("kinds", kindNames(kinds)))
	}
	s.readyURLs = cfg.Sinks
	if cfg.DeadLetter == "" {
		return nil
	}
	sk, _, err := sinks.Open(ctx, cfg.DeadLetter, sinkOpts)
	if err != nil {
		var ce *sinks.ConfigError
		if errors.As(err, &ce) {
			return cli.Usagef("archiver run: --dead-letter: %v", err)
		}
		return fmt.Errorf("open dead-letter sink %s: %w", redact.URL(cfg.DeadLetter), err)
	}
	s.deadLetter = sk
	s.opened = append(s.opened, sk)
	s.readyURLs = append(s.readyURLs[:len(s.readyURLs):len(s.readyURLs)], cfg.DeadLetter)
	log.Info("dead-letter sink opened", zap.String("sink", sk.Name()), zap.Duration("retry_for", cfg.RetryFor))
	return nil
}

// close closes every sink opened, within 5 s.
func (s *runSinks) close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, sk := range s.opened {
		_ = sk.Close(cctx)
	}
}

// newConsumer builds the consumer of cfg.
func newConsumer(cfg *runConfig, srcs *sources, store *openedCheckpoint,
	ss *runSinks, d pipelineDeps) (*consumer.Consumer, error) {
	start, err := shard.ParseStartPosition(cfg.Start)
	if err != nil {
		return nil, cli.Usagef("archiver run: --start: %v", err)
	}
	// The shutdown budget: reader stop and sink flush each get 40 %, the
	// rest is for the final lease release and store close.
	inflight, _ := sinks.ParseSize(cfg.MaxInFlight) // validated with the configuration
	expiredWhen, _ := event.ParseExpiredWhen(cfg.ExpiredWhen)
	return consumer.New(consumer.Config{
		Options: shard.Options{
			Streams:         srcs.home().streams,
			Regions:         srcs.shardRegions(),
			TableNames:      cfg.Tables,
			StreamARNs:      cfg.StreamARNs,
			TableSource:     srcs.tableSource(),
			TableRefresh:    cfg.TablesRefresh,
			Start:           start,
			Assigner:        store.assigner(),
			StreamRetention: cfg.StreamRetention,
			StopTimeout:     cfg.ShutdownTimeout * 2 / 5,
			SDKDecoding:     cfg.SDKDecoding,
			Logger:          d.log,
			Registerer:      d.reg,
		},
		Tables:                srcs.home().ddb,
		Store:                 store.store,
		Routes:                ss.routes,
		DeadLetter:            ss.deadLetter,
		RetryFor:              cfg.RetryFor,
		ShutdownTimeout:       cfg.ShutdownTimeout * 2 / 5,
		MaxInFlightBytesTotal: int(inflight),
		ExpiredWhen:           expiredWhen,
		TTLAttribute:          cfg.TTLAttribute,
		GlobalTables:          srcs.globalTables,
	})
}

// serveRunHealth starts /metrics, /healthz and /readyz: ready while the
// streams answer, the sinks work and the leases hold.
func serveRunHealth(cfg *runConfig, d pipelineDeps, srcs *sources,
	ss *runSinks, store *openedCheckpoint) (*ops.Server, error) {
	// /metrics is served with prometheus and emf alike, so one deployment
	// can have CloudWatch alarms and a Grafana dashboard.
	var gatherer prometheus.Gatherer
	if cfg.Metrics != "none" {
		gatherer = d.reg
	}
	srv := ops.NewServer(gatherer, d.log.Named("ops"))
	if cfg.Pprof {
		srv.EnableProfiling()
	}
	srv.AddCheck("stream", ops.CachedCheck(func(ctx context.Context) error { return describeRegions(ctx, srcs) }, 10*time.Second))
	srv.AddCheck("sinks", sinksCheck(ss.opened, ss.readyURLs))
	if srcs.tagged != nil && len(cfg.Tables) == 0 && len(cfg.StreamARNs) == 0 {
		// Not ready while there is nothing to archive.
		srv.AddCheck("tables", taggedCheck(srcs.tagged))
	}
	if check := store.readyCheck(); check != nil {
		srv.AddCheck("leases", check)
	}
	if err := srv.Listen(cfg.MetricsAddr); err != nil {
		return nil, err
	}
	if d.ready != nil {
		d.ready(srv.Addr())
	}
	return srv, nil
}

// closeOpsServer closes srv, waiting at most 2 s.
func closeOpsServer(ctx context.Context, srv *ops.Server) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = srv.Close(cctx)
}

// runConsumer runs cons until it stops by itself or ctx ends; then it
// waits for it to stop within --shutdown-timeout and releases what is
// still leased with what is left of it. It returns cons's error, and
// stopped false with an error when cons did not stop in time.
func runConsumer(ctx context.Context, cfg *runConfig, cons *consumer.Consumer, store *openedCheckpoint, log *zap.Logger) (stopped bool, err error) {
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
	}
	deadline := time.Now().Add(cfg.ShutdownTimeout)
	log.Info("shutting down: stop reading, flush sinks, write final checkpoints, release leases",
		zap.Duration("timeout", cfg.ShutdownTimeout))
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(time.Until(deadline)):
		return false, fmt.Errorf("shutdown did not finish within --shutdown-timeout %s", cfg.ShutdownTimeout)
	}
	// Release what is still leased, with what is left of the budget.
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if store.leases != nil {
		if err := store.leases.ReleaseAll(rctx); err != nil {
			log.Warn("releasing leases failed; other workers take them when they expire", zap.Error(err))
		}
	}
	return true, runErr
}

// preflightSinks proves, before anything is read, that every sink (the
// dead-letter sink too) can write (see sinks.Preflight). The first failure
// is the error: one line naming the sink, the check and the cause, and
// --skip-preflight unless the bucket is missing or the credentials refused.
func preflightSinks(ctx context.Context, opened []sinks.Sink, log *zap.Logger) error {
	for _, s := range opened {
		if err := sinks.Preflight(ctx, s); err != nil {
			if errors.Is(err, sinks.ErrCredentials) || errors.Is(err, sinks.ErrNoSuchBucket) {
				return err // skipping the checks would not help: every upload would fail
			}
			return fmt.Errorf("%w (--skip-preflight skips these checks)", err)
		}
		log.Debug("sink preflight passed", zap.String("sink", s.Name()))
	}
	return nil
}

// checkRunSources is run's source preflight in one Region (see
// shard.CheckSources): every table exists with a stream, every stream ARN
// answers, and a stream without the old image fails when a sink takes
// expired or deleted items, unless --allow-keys-only. Under --expired-when
// service a table whose TTL is off is a WARN. It returns what it found.
func checkRunSources(ctx context.Context, cfg *runConfig, r *regionClients, tables []string, routes []consumer.Route, log *zap.Logger) ([]shard.Source, error) {
	needOld := false
	for _, r := range routes {
		needOld = needOld || event.NeedsOldImage(r.Kinds)
	}
	when, _ := event.ParseExpiredWhen(cfg.ExpiredWhen) // validated with the configuration
	srcs, err := shard.CheckSources(ctx, shard.SourceCheck{
		Tables: r.ddb, Streams: r.streams, TableNames: tables, StreamARNs: r.arns, Endpoint: cfg.Endpoint, Region: r.name,
		RequireStream: true, NeedOldImage: needOld, AllowKeysOnly: cfg.AllowKeysOnly,
		WarnTTLOff: when == event.ExpiredWhenService, WaitForTable: cfg.WaitForTable, Logger: log,
	})
	switch {
	case errors.Is(err, shard.ErrNoOldImage):
		return nil, fmt.Errorf("%w; or start with --allow-keys-only to archive their keys alone", err)
	case errors.Is(err, shard.ErrNoSuchTable) || errors.Is(err, shard.ErrStreamDisabled):
		if cfg.WaitForTable == 0 {
			return nil, fmt.Errorf("%w (--wait-for-table waits for a table created later)", err)
		}
	}
	return srcs, err
}

func kindNames(k []event.Kind) []string {
	out := make([]string, len(k))
	for i, v := range k {
		out[i] = string(v)
	}
	return out
}
