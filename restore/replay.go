package restore

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/progress"
	"github.com/ttl-archiver/archiver/sinks"
)

// ReplayConfig is one `archiver replay`: archived events sent to a sink
// as the consumer would send them, under the same event IDs (the NATS
// sink's Nats-Msg-Id), so a JetStream stream de-duplicates a replay
// within its duplicate window.
type ReplayConfig struct {
	Sink sinks.Sink
	// Kinds are the kinds the sink takes (sinks.Open's second result);
	// other events are counted, not sent. Nil: every kind.
	Kinds []event.Kind
	// Select picks events beyond the archive reader's pruning (nil: all).
	Select *Selection
	// BatchSize bounds a batch handed to the sink (default 500).
	BatchSize int
	Progress  *progress.Reporter
}

// ReplayResult counts what a replay did.
type ReplayResult struct {
	Events      int64 // given by the source
	NotSelected int64 // left out by --key / --where
	NotWanted   int64 // of a kind the sink does not take (its events= parameter)
	Sent        int64 // handed to the sink
	Acked       int64 // acknowledged by the sink as durable
	Failed      int64 // in batches the sink failed
}

// Replay sends the events src yields to cfg.Sink in batches of one shard
// each, in archive order, then flushes the sink and waits for every
// acknowledgement. It fails when the source or the sink fails, or when
// any batch was not acknowledged; the caller closes the sink.
func Replay(ctx context.Context, cfg ReplayConfig, src Source) (ReplayResult, error) {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	rp := &replayer{cfg: cfg, ctx: ctx}
	err := src(ctx, rp.add)
	if err == nil {
		err = rp.send(ctx)
	}
	if ferr := cfg.Sink.Flush(ctx); err == nil && ferr != nil {
		err = fmt.Errorf("flush %s: %w", cfg.Sink.Name(), ferr)
	}
	res := rp.result()
	if err == nil && res.Failed > 0 {
		err = fmt.Errorf("%s failed %d event(s): replay again (the sink de-duplicates by event ID within its window)", cfg.Sink.Name(), res.Failed)
	}
	return res, err
}

type replayer struct {
	ctx   context.Context
	cfg   ReplayConfig
	batch []event.Event
	res   ReplayResult
	acked atomic.Int64
	fail  atomic.Int64
}

func (rp *replayer) add(e *event.Event) error {
	rp.res.Events++
	skip := true
	switch {
	case !rp.cfg.Select.Match(e):
		rp.res.NotSelected++
	case rp.cfg.Kinds != nil && !slices.Contains(rp.cfg.Kinds, e.Kind):
		rp.res.NotWanted++
	default:
		skip = false
	}
	if skip {
		if rp.cfg.Progress != nil {
			rp.cfg.Progress.AddItems(1)
		}
		return nil
	}
	if n := len(rp.batch); n > 0 && (n >= rp.cfg.BatchSize || rp.batch[0].ShardID != e.ShardID || rp.batch[0].StreamARN != e.StreamARN) {
		if err := rp.send(rp.ctx); err != nil {
			return err
		}
	}
	rp.batch = append(rp.batch, *e)
	return nil
}

// send hands the pending batch to the sink.
func (rp *replayer) send(ctx context.Context) error {
	if len(rp.batch) == 0 {
		return nil
	}
	b := sinks.Batch{StreamARN: rp.batch[0].StreamARN, ShardID: rp.batch[0].ShardID, Events: rp.batch}
	n := int64(len(b.Events))
	rp.batch = nil
	err := rp.cfg.Sink.Write(ctx, b, func(err error) {
		if err != nil {
			rp.fail.Add(n)
		} else {
			rp.acked.Add(n)
		}
		if rp.cfg.Progress != nil {
			rp.cfg.Progress.AddItems(n)
		}
	})
	if err != nil {
		return fmt.Errorf("write to %s: %w", rp.cfg.Sink.Name(), err)
	}
	rp.res.Sent += n
	return nil
}

func (rp *replayer) result() ReplayResult {
	r := rp.res
	r.Acked, r.Failed = rp.acked.Load(), rp.fail.Load()
	return r
}
