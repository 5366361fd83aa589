package restore

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/progress"
	"github.com/ttl-archiver/archiver/sinks"
)

// ReplayConfig is one `archiver replay`: archived events sent to a sink
// as the consumer would send them, under the same message IDs (the NATS
// sink's Nats-Msg-Id, event.IDHasher: an archive line alone gives it).
//
// JetStream drops a copy of a message only within its duplicate window,
// while an archive is replayed days later. So before it sends anything,
// a replay into a sink that can list what its destination holds (the
// NATS sink in JetStream mode: [sinks.NATSSink.StreamIDs]) reads the
// IDs of the messages the stream holds, and sends only the events whose
// ID is not among them. The read is bounded (MaxStreamIDs); when the
// stream holds more, the events it could not check that are older than
// the duplicate window are sent and counted as unchecked: they may be
// duplicates.
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
	// MaxStreamIDs bounds the message IDs read from the destination
	// stream (default [DefaultMaxStreamIDs]; about 100 bytes each).
	MaxStreamIDs int
	// Now is the clock the duplicate window is measured on (default
	// time.Now).
	Now func() time.Time
}

// DefaultMaxStreamIDs is how many message IDs a replay reads from its
// destination stream at most: about 100 MB.
const DefaultMaxStreamIDs = 1_000_000

// streamIDReader is a sink that can list the IDs its destination holds
// (nil when it cannot: a NATS sink in core mode).
type streamIDReader interface {
	StreamIDs(ctx context.Context, max int) (*sinks.StreamIDs, error)
}

// ReplayResult counts what a replay did.
type ReplayResult struct {
	Events      int64 // given by the source
	NotSelected int64 // left out by --key / --where
	NotWanted   int64 // of a kind the sink does not take (its events= parameter)
	InStream    int64 // not sent: the destination stream already holds their ID
	Unchecked   int64 // sent without that check, older than the stream's duplicate window: may be duplicates
	Sent        int64 // handed to the sink
	Acked       int64 // acknowledged by the sink as durable
	Failed      int64 // in batches the sink failed
	// Stream names the destination stream the replay checked against ("":
	// none); StreamIDs is how many message IDs it read there, all of them
	// when StreamComplete.
	Stream         string
	StreamIDs      int
	StreamComplete bool
}

// Replay sends the events src yields to cfg.Sink in batches of one shard
// each, in archive order, then flushes the sink and waits for every
// acknowledgement. It fails when the source or the sink fails, or when
// any batch was not acknowledged; the caller closes the sink.
func Replay(ctx context.Context, cfg ReplayConfig, src Source) (ReplayResult, error) {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.MaxStreamIDs <= 0 {
		cfg.MaxStreamIDs = DefaultMaxStreamIDs
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	rp := &replayer{cfg: cfg, ctx: ctx}
	if r, ok := cfg.Sink.(streamIDReader); ok {
		held, err := r.StreamIDs(ctx, cfg.MaxStreamIDs)
		if err != nil {
			return rp.result(), fmt.Errorf("reading what %s holds: %w", cfg.Sink.Name(), err)
		}
		if held != nil {
			rp.held = held
			rp.res.Stream, rp.res.StreamIDs, rp.res.StreamComplete = held.Stream, held.Read, held.Complete
		}
	}
	err := src(ctx, rp.add)
	if err == nil {
		err = rp.send(ctx)
	}
	if ferr := cfg.Sink.Flush(ctx); err == nil && ferr != nil {
		err = fmt.Errorf("flush %s: %w", cfg.Sink.Name(), ferr)
	}
	res := rp.result()
	if err == nil && res.Failed > 0 {
		err = fmt.Errorf("%s failed %d event(s): replay again (what a JetStream stream already holds is not sent again; readers of the other sinks de-duplicate by event ID)", cfg.Sink.Name(), res.Failed)
	}
	return res, err
}

type replayer struct {
	ctx   context.Context
	cfg   ReplayConfig
	batch []event.Event
	res   ReplayResult
	held  *sinks.StreamIDs // what the destination stream holds (nil: not known)
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
	case rp.held != nil && rp.held.Holds(e):
		rp.res.InStream++
	default:
		skip = false
		// Published no earlier than it was created: after the last ID
		// read, perhaps, and before JetStream's window.
		if rp.held != nil && !rp.held.Complete && e.ApproximateCreationTime.Before(rp.cfg.Now().Add(-rp.held.DuplicateWindow)) {
			rp.res.Unchecked++
		}
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
