package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Runner is what a Loop runs while this process holds the table: a
// *Sweeper. Run returns nil once its context ends, an error when it cannot
// sweep the table at all.
type Runner interface {
	Run(ctx context.Context) error
}

// Loop sweeps one table whenever this process holds it: `archiver sweep`
// beside its stand-bys.
type Loop struct {
	Table string
	// Store holds the table and keeps its cursor; Sweeper saves its cursor
	// there too.
	Store   *CheckpointStore
	Sweeper Runner
	// ShutdownTimeout bounds stopping the sweeper, saving the cursor and
	// releasing the table once Run's context ended.
	ShutdownTimeout time.Duration
	// Registerer gets archiver_sweep_lease_held{table} (nil: none).
	Registerer prometheus.Registerer
	Logger     *zap.Logger

	held prometheus.Gauge
}

// errShutdownTimeout: the sweeper did not stop within ShutdownTimeout.
var errShutdownTimeout = errors.New("the sweeper did not stop within --shutdown-timeout")

// Run acquires the table, runs the sweeper under the hold, and when the
// hold is lost stops, releases and acquires again, until ctx ends: then
// it stops the sweeper, saves the cursor and releases the table, all
// within the shutdown timeout. It fails when the table cannot be swept
// (the sweeper's Run failed) or acquiring it failed other than by ctx.
// Run is called once per Loop.
func (l *Loop) Run(ctx context.Context) error {
	l.held = newHeldGauge(l.Registerer, l.Table)
	for {
		held, release, err := l.Store.Acquire(ctx, l.Table)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("acquire table %s: %w", l.Table, err)
		}
		l.Logger.Info("this process holds the table: sweeping", zap.String("table", l.Table))
		l.held.Set(1)
		deadline, runErr := l.sweepHeld(ctx, held)
		l.held.Set(0)
		if errors.Is(runErr, errShutdownTimeout) {
			return fmt.Errorf("%w (%s); the table's lease expires instead", runErr, l.ShutdownTimeout)
		}
		l.hand(ctx, deadline, release)
		switch {
		case runErr != nil:
			return fmt.Errorf("sweep table %s: %w", l.Table, runErr)
		case ctx.Err() != nil:
			return nil
		}
		l.Logger.Warn("the table's hold was lost: stopped sweeping; waiting to hold it again",
			zap.String("table", l.Table), zap.NamedError("cause", context.Cause(held)))
	}
}

// sweepHeld runs the sweeper until held ends; once ctx ends it waits at
// most the shutdown timeout for the sweeper to stop. It returns the
// sweeper's error and the deadline for saving and releasing.
func (l *Loop) sweepHeld(ctx, held context.Context) (time.Time, error) {
	done := make(chan error, 1)
	go func() { done <- l.Sweeper.Run(held) }()
	select {
	case err := <-done:
		return time.Now().Add(l.ShutdownTimeout), err
	case <-ctx.Done():
	}
	deadline := time.Now().Add(l.ShutdownTimeout)
	l.Logger.Info("shutting down: stop sweeping, save the cursor, release the table", zap.Duration("timeout", l.ShutdownTimeout))
	t := time.NewTimer(l.ShutdownTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return deadline, err
	case <-t.C:
		return deadline, errShutdownTimeout
	}
}

// hand saves a cursor the sweeper could not save before it stopped and
// releases the table, by deadline.
func (l *Loop) hand(ctx context.Context, deadline time.Time, release func(context.Context) error) {
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if err := l.Store.Flush(rctx, l.Table); err != nil {
		l.Logger.Warn("saving the cursor at the hand-over failed; the next sweeper re-sweeps from the last one saved",
			zap.String("table", l.Table), zap.Error(err))
	}
	if err := release(rctx); err != nil {
		l.Logger.Warn("releasing the table failed; another process takes it when the lease expires",
			zap.String("table", l.Table), zap.Error(err))
		return
	}
	l.Logger.Info("released the table", zap.String("table", l.Table))
}

// newHeldGauge registers archiver_sweep_lease_held{table}.
func newHeldGauge(reg prometheus.Registerer, table string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "archiver_sweep_lease_held",
		Help:        "1 while this process holds the table and sweeps it, 0 while it waits for the table (another process sweeps it).",
		ConstLabels: prometheus.Labels{"table": table},
	})
	if reg != nil {
		reg.MustRegister(g)
	}
	return g
}
