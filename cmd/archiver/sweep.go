package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/logging"
	"github.com/ttl-archiver/archiver/internal/ops"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/sweep"
)

// sweepCmd is `archiver sweep`: it deletes the table's expired items within
// about a second of their TTL while this process holds the table (one
// sweeper per table), until SIGINT/SIGTERM; then it stops sweeping, saves
// the cursor and releases the table within --shutdown-timeout.
func sweepCmd(ctx context.Context, args []string, e env) error {
	cfg, err := loadSweepConfig(args, e.getenv, e.stdout)
	if err != nil {
		return err
	}
	if cfg.shared.PrintConfig {
		return printOptions(e.stdout, sweepCommand, cfg, cfg.source)
	}
	log, err := logging.New(e.stdout, cfg.shared.LogLevel, logging.FormatAuto)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	reg := ops.NewRegistry(ops.Version(version))
	return runSweep(ctx, cfg, sweepDeps{log: log, reg: reg, stdout: e.stdout, newSweeper: newTableSweeper})
}

// sweepDeps are what runSweep takes from its host.
type sweepDeps struct {
	log *zap.Logger
	reg *prometheus.Registry
	// stdout is where EMF documents go.
	stdout io.Writer
	// ready, when set, receives the health server's address once it listens.
	ready func(addr string)
	// newSweeper builds the table's sweeper (tests pass fakes).
	newSweeper func(cfg *sweepConfig, client *dynamodb.Client, cursors sweep.CursorStore, d sweepDeps) (sweep.Runner, error)
}

// runSweep opens the cursor store, serves metrics and health, and sweeps
// whenever this process holds the table, until ctx ends.
func runSweep(ctx context.Context, cfg *sweepConfig, d sweepDeps) error {
	log := d.log.Named("sweep")
	awsCfg, err := loadAWSConfig(ctx, "sweep", cfg.shared.Region, cfg.shared.Endpoint, log)
	if err != nil {
		return err
	}
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.shared.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.shared.Endpoint)
		}
	})
	st, err := openCheckpoint(ctx, &cfg.shared, awsCfg, pipelineDeps{log: d.log, reg: d.reg})
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Warn("closing the checkpoint store failed", zap.Error(err))
		}
	}()
	store := sweep.NewCheckpointStore(st.sweepState())
	sw, err := d.newSweeper(cfg, ddb, store, d)
	if err != nil {
		return fmt.Errorf("sweeper: %w", err)
	}
	if c, ok := sw.(sweepChecker); ok {
		if err := checkSweepSource(ctx, cfg, awsCfg.Region, c); err != nil || ctx.Err() != nil {
			return err
		}
	}
	srv, err := serveSweepHealth(cfg, d, ddb, st)
	if err != nil {
		return err
	}
	defer closeOpsServer(ctx, srv)
	defer startEMF(ctx, cfg.shared.Metrics, d.reg, d.stdout, log)()
	log.Info("sweeper running", zap.String("table", cfg.Table), zap.Duration("window", cfg.Window),
		zap.Duration("interval", cfg.Interval), zap.String("metrics_addr", srv.Addr()), zap.String("version", ops.Version(version)))
	loop := &sweep.Loop{Table: cfg.Table, Store: store, Sweeper: sw,
		ShutdownTimeout: cfg.shared.ShutdownTimeout, Registerer: d.reg, Logger: log}
	if err := loop.Run(ctx); err != nil {
		return err
	}
	log.Info("sweeper stopped")
	return nil
}

// sweepChecker is a sweeper that can check its table at start-up: a
// *sweep.Sweeper.
type sweepChecker interface {
	Check(ctx context.Context) error
}

// sweepCheckTimeout bounds the start-up check of the swept table.
const sweepCheckTimeout = 10 * time.Second

// checkSweepSource proves, before the table's lease is sought (a stand-by
// would otherwise wait without ever looking), that the endpoint answers
// with these credentials and that the table exists and can be swept: its
// TTL attribute (see --ttl-attribute-override) and its index. The error
// names the table, the endpoint and the cause; nil when ctx ended.
func checkSweepSource(ctx context.Context, cfg *sweepConfig, region string, c sweepChecker) error {
	cctx, cancel := context.WithTimeout(ctx, sweepCheckTimeout)
	defer cancel()
	err := c.Check(cctx)
	if err == nil || ctx.Err() != nil {
		return nil
	}
	var mm *sweep.TTLAttributeMismatchError
	if errors.As(err, &mm) {
		return fmt.Errorf("--ttl-attribute %q: table %s has DynamoDB's TTL enabled on %q, so sweeping on %q would delete items DynamoDB's TTL does not consider expired; name %q, or give --ttl-attribute-override to sweep on %q anyway: %w",
			mm.Configured, mm.Table, mm.Enabled, mm.Configured, mm.Enabled, mm.Configured, err)
	}
	var se *sweep.SetupError
	if errors.As(err, &se) && sweepSettingFlags[se.Setting] != "" {
		err = fmt.Errorf("%w (%s)", err, sweepSettingFlags[se.Setting])
	}
	where := "AWS's endpoint for region " + region
	if cfg.shared.Endpoint != "" {
		where = redact.URL(cfg.shared.Endpoint)
	}
	return fmt.Errorf("start-up check of table %s at %s failed: %w", cfg.Table, where, err)
}

// sweepSettingFlags names the flag of each sweep.Config setting a
// sweep.SetupError can be about.
var sweepSettingFlags = map[string]string{
	"Index":           "--index",
	"WindowAttribute": "--window-attribute",
	"TTLAttribute":    "--ttl-attribute",
}

// serveSweepHealth starts /metrics, /healthz and /readyz: ready while the
// table answers DescribeTable and, with the lease store, while its
// renewals (or, waiting for the table, its reads) succeed. A process
// waiting for another's lease is ready: it is the stand-by.
func serveSweepHealth(cfg *sweepConfig, d sweepDeps, ddb *dynamodb.Client, st *openedCheckpoint) (*ops.Server, error) {
	var gatherer prometheus.Gatherer
	if cfg.shared.Metrics != "none" {
		gatherer = d.reg
	}
	srv := ops.NewServer(gatherer, d.log.Named("ops"))
	if cfg.shared.Pprof {
		srv.EnableProfiling()
	}
	srv.AddCheck("table", ops.CachedCheck(func(ctx context.Context) error {
		if _, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Table)}); err != nil {
			return fmt.Errorf("table %s: %w", cfg.Table, err)
		}
		return nil
	}, 10*time.Second))
	if check := st.readyCheck(); check != nil {
		srv.AddCheck("lease", check)
	}
	if err := srv.Listen(cfg.shared.MetricsAddr); err != nil {
		return nil, err
	}
	if d.ready != nil {
		d.ready(srv.Addr())
	}
	return srv, nil
}

// startEMF writes CloudWatch embedded-metric documents to w while ctx
// lasts, when metrics is "emf"; the returned func stops it and waits.
func startEMF(ctx context.Context, metrics string, g prometheus.Gatherer, w io.Writer, log *zap.Logger) (stop func()) {
	if metrics != "emf" {
		return func() {}
	}
	emfCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := (&ops.EMF{Gatherer: g, W: w}).Run(emfCtx); err != nil {
			log.Warn("EMF export failed", zap.Error(err))
		}
	}()
	return func() { cancel(); <-done }
}
