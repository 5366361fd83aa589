package shard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/budget"
)

// maxFailures is how many consecutive non-throttling failures a reader
// tolerates before it gives the shard back to the walker (which restarts it
// later from its stored position).
const maxFailures = 8

// outcome is how a reader ended.
type outcome int

const (
	outEnded   outcome = iota // closed shard read to its end, ShardEnded returned nil
	outStopped                // assignment withdrawn or walker shutting down
	outFailed                 // Process, ShardEnded or the API failed: restart later
	outGone                   // ResourceNotFound: the shard or its stream is gone
)

func (o outcome) String() string {
	return [...]string{"ended", "stopped", "failed", "gone"}[o]
}

// result is what a reader reports to the walker when it is done.
type result struct {
	rd      *reader
	outcome outcome
	err     error
	// refusedAt is the creation time of the first record of the batch
	// Process refused (zero when none was, or it has none).
	refusedAt time.Time
}

// reader reads one shard: a fetch goroutine calls GetRecords and queues
// batches within the byte budget; the reader's own goroutine hands them to
// Process in order.
type reader struct {
	w         *Walker
	table     string
	streamARN string
	streams   StreamsAPI // the Streams client of the stream's Region
	shard     Shard
	key       string
	startType types.ShardIteratorType
	startSeq  string // for AFTER_ and AT_SEQUENCE_NUMBER
	ctx       context.Context
	cancel    context.CancelFunc
	log       *zap.Logger
	// idleSince is when the reader caught up (first empty GetRecords after
	// records), unix nanoseconds; 0 while records flow.
	idleSince atomic.Int64
	// yielded is set when the walker stops the reader to give its slot to
	// a waiting shard.
	yielded atomic.Bool
	// releasing is set just before Assigner.Release is called.
	releasing atomic.Bool
	// iterType is the type of the last iterator iteratorAt got (only the
	// fetch goroutine touches it).
	iterType types.ShardIteratorType
	// firstSeq is the sequence number of the first record queued (set by
	// the fetch goroutine, read by the walker once the reader is done).
	firstSeq string
	// co is the Processor as a Coverage, nil when it is none.
	co Coverage
	// skipStart is what the reader's start skips on purpose (SkipLatest
	// for a LATEST start and its restarts), 0 for nothing.
	skipStart Skip
	// probe: the reader starts at TRIM_HORIZON with no stored position;
	// before its first batch (or its end) it asks whether the shard's
	// first records were trimmed (see notices). Only the fetch goroutine
	// touches probe and trimSkip.
	probe bool
	// trimSkip: the reader went on past records trimmed before it read
	// them; the next notices tells the Coverage processor.
	trimSkip bool
}

// run reads the shard until its end, its context ends or it fails, then
// calls ShardEnded or ShardStopped and Release, and returns the outcome.
func (r *reader) run() result {
	o := &r.w.o
	r.w.fails.started(r)
	fctx, fcancel := context.WithCancel(r.ctx)
	defer fcancel()
	q := make(chan Batch, 64)
	g := budget.New(int64(o.ShardBufferBytes))
	var (
		ended    bool
		fetchErr error
	)
	procErr := r.started()
	if procErr == nil {
		go func() {
			defer close(q)
			ended, fetchErr = r.fetch(fctx, q, g)
			r.idleSince.Store(0) // never yield a reader that is finishing
		}()
	} else {
		close(q)
	}
	var refusedAt time.Time
	for b := range q {
		// Once the reader must stop, queued batches are dropped: they were
		// never processed, so the shard resumes before them.
		if procErr == nil && r.ctx.Err() == nil {
			if err := r.hand(b); err != nil {
				procErr, refusedAt = err, event.FirstCreation(b.Records)
				fcancel()
			}
		}
		g.Release(int64(b.Bytes))
	}
	fcancel()

	res := result{rd: r, refusedAt: refusedAt}
	defer func() { r.w.fails.note(r, res, o.Now()) }()
	res.outcome, res.err = r.outcome(fctx, procErr, fetchErr, ended)

	sctx, scancel := context.WithTimeout(context.WithoutCancel(r.ctx), o.StopTimeout)
	defer scancel()
	if res.outcome != outEnded {
		if err := o.Processor.ShardStopped(sctx, r.streamARN, r.shard.ID); err != nil {
			r.log.Warn("shard stopped callback failed", zap.Error(err))
		}
	}
	if o.Assigner != nil {
		// From here on the Assigner may grant the shard again, while the
		// walker still counts this reader as running.
		r.releasing.Store(true)
		if err := o.Assigner.Release(sctx, r.streamARN, r.shard.ID, res.outcome == outEnded); err != nil {
			r.log.Warn("release failed", zap.Bool("finished", res.outcome == outEnded), zap.Error(err))
		}
	}
	return res
}

// outcome is how the reader ended, once its queue is drained: for a shard
// read to its end, after ShardEnded returned.
func (r *reader) outcome(fctx context.Context, procErr, fetchErr error, ended bool) (outcome, error) {
	switch {
	case procErr != nil && r.ctx.Err() == nil:
		return outFailed, fmt.Errorf("process: %w", procErr)
	case r.ctx.Err() != nil:
		return outStopped, nil
	case fetchErr != nil && classify(fctx, fetchErr) == errNotFound:
		return outGone, fetchErr
	case fetchErr != nil:
		return outFailed, fetchErr
	case ended:
		if err := r.w.o.Processor.ShardEnded(r.ctx, r.streamARN, r.shard.ID); err != nil {
			if r.ctx.Err() != nil {
				return outStopped, nil
			}
			return outFailed, fmt.Errorf("shard ended: %w", err)
		}
		return outEnded, nil
	}
	return outFailed, errors.New("reader stopped without a reason")
}

// fetch reads GetRecords until the shard's end (ended true) or an error.
func (r *reader) fetch(ctx context.Context, q chan<- Batch, g *budget.Budget) (ended bool, err error) {
	o := &r.w.o
	m := r.w.m
	var c cursor
	c.it, err = r.iterator(ctx, c.lastSeq)
	if err != nil {
		return false, err
	}
	if c.it == "" {
		return true, r.notices(ctx, q, true)
	}
	idle := 0
	decodeOpts := []func(*dynamodbstreams.Options){FastGetRecords}
	if o.SDKDecoding {
		decodeOpts = []func(*dynamodbstreams.Options){sdkGetRecords}
	}
	for {
		if err := g.Wait(ctx); err != nil {
			return false, err
		}
		m.calls.WithLabelValues(r.table).Inc()
		sv := &salvage{}
		out, err := r.streams.GetRecords(withSalvage(ctx, sv), &dynamodbstreams.GetRecordsInput{
			ShardIterator: aws.String(c.it),
			Limit:         aws.Int32(o.GetRecordsLimit),
		}, decodeOpts...)
		if err != nil {
			ended, err := r.recoverGetRecords(ctx, &c, err)
			if ended && err == nil {
				err = r.notices(ctx, q, true)
			}
			if ended || err != nil {
				return ended, err
			}
			continue
		}
		c.fails, c.throttles = 0, 0
		next := aws.ToString(out.NextShardIterator)
		if err := r.notices(ctx, q, len(out.Records) > 0 || next == ""); err != nil {
			return false, err
		}
		if err := r.deliver(ctx, q, g, &c, out.Records, sv.bad); err != nil {
			return false, err
		}
		if next == "" {
			return true, nil
		}
		c.it = next
		if len(out.Records) == 0 {
			m.setAge(r.table, r.key, 0)
			r.idleSince.CompareAndSwap(0, time.Now().UnixNano())
			if !backoff.Sleep(ctx, idleDelay(idle, o.IdleBackoff)) {
				return false, ctx.Err()
			}
			idle++
		} else {
			idle = 0
			r.idleSince.Store(0)
		}
	}
}

// cursor is where a reader's fetch loop stands in its shard.
type cursor struct {
	it      string // the iterator of the next GetRecords
	lastSeq string // last record with a sequence number queued for Process
	seqless int    // records without one queued after lastSeq
	fresh   bool   // it is a new iterator: its first answer may repeat records
	// consecutive failed and throttled GetRecords calls
	fails, throttles int
}

// recoverGetRecords handles a failed GetRecords as its error's class
// wants: it waits out a throttle, or gets a new iterator (after the last
// record queued, or at the trim horizon past a gap) into c. ended is true
// when the shard has no more records; an error ends the fetch.
func (r *reader) recoverGetRecords(ctx context.Context, c *cursor, callErr error) (ended bool, err error) {
	o, m := &r.w.o, r.w.m
	k := classify(ctx, callErr)
	if k == errCanceled {
		return false, ctx.Err()
	}
	m.errs.WithLabelValues(r.table, "GetRecords", k.String()).Inc()
	var it string
	switch k {
	case errExpired:
		r.log.Info("iterator expired, getting a new one", zap.String("sequence", c.lastSeq))
		it, err = r.iterator(ctx, c.lastSeq)
	case errTrimmed:
		m.gaps.WithLabelValues(r.table).Inc()
		r.log.Warn("records trimmed before they were read, continuing from trim horizon (gap)",
			zap.String("sequence", c.lastSeq), zap.Error(callErr))
		r.trimSkip = true
		it, err = r.iteratorAt(ctx, types.ShardIteratorTypeTrimHorizon, "")
	case errNotFound:
		return false, fmt.Errorf("get records: %w", callErr)
	case errThrottle:
		m.throttles.WithLabelValues(r.table).Inc()
		if !backoff.Sleep(ctx, o.retry().Delay(c.throttles)) {
			return false, ctx.Err()
		}
		c.throttles++
		return false, nil
	default:
		c.fails++
		if k == errRejected || c.fails >= maxFailures {
			return false, fmt.Errorf("get records (%d failures): %w", c.fails, callErr)
		}
		r.log.Warn("get records failed, retrying with a new iterator", zap.Int("failures", c.fails), zap.Error(callErr))
		if !backoff.Sleep(ctx, o.retry().Delay(c.fails-1)) {
			return false, ctx.Err()
		}
		it, err = r.iterator(ctx, c.lastSeq)
	}
	if err != nil {
		return false, err
	}
	if it == "" {
		return true, nil
	}
	c.it, c.fresh = it, true
	return false, nil
}

// deliver queues the records of one GetRecords answer, split at those that
// cannot be decoded, after dropping those a fresh iterator read again, and
// moves c past them.
func (r *reader) deliver(ctx context.Context, q chan<- Batch, g *budget.Budget, c *cursor, records []types.Record, bad []Undecodable) error {
	m := r.w.m
	recs := records
	if c.fresh && c.lastSeq != "" {
		recs = dropRead(recs, c.lastSeq, c.seqless, r.iterType == types.ShardIteratorTypeAfterSequenceNumber)
		bad = shiftUndecodable(bad, len(records)-len(recs))
	}
	c.fresh = false
	if len(bad) > 0 {
		m.undecodable.WithLabelValues(r.table).Add(float64(len(bad)))
		r.log.Error("records of a GetRecords response cannot be decoded; they go to the consumer raw, the records around them flow on",
			zap.Int("undecodable", len(bad)), zap.Int("records", len(recs)), zap.Error(bad[0].Err))
	}
	for _, b := range splitAtUndecodable(Batch{Table: r.table, StreamARN: r.streamARN, ShardID: r.shard.ID, Records: recs, Undecodable: bad}) {
		// A record without a valid sequence number (the consumer
		// dead-letters it) cannot be a resume position: a new iterator
		// resumes after the last record that has one, and dropRead
		// skips the ones after it that were already queued.
		if seq, after := event.LastSequence(b.Records); seq != "" {
			c.lastSeq, c.seqless = seq, after
		} else {
			c.seqless += len(b.Records)
		}
		if err := r.queue(ctx, q, g, b); err != nil {
			return err
		}
	}
	return nil
}

// queue sizes b, books it in the metrics and the budget, and hands it to
// the reader's goroutine.
func (r *reader) queue(ctx context.Context, q chan<- Batch, g *budget.Budget, b Batch) error {
	o, m := &r.w.o, r.w.m
	for _, rec := range b.Records {
		b.Bytes += event.EstimateMemory(rec)
	}
	for _, u := range b.Undecodable {
		b.Bytes += len(u.Raw)
	}
	if r.firstSeq == "" {
		r.firstSeq = event.FirstSequence(b.Records)
	}
	if last := b.Records[len(b.Records)-1]; last.Dynamodb != nil {
		if t := last.Dynamodb.ApproximateCreationDateTime; t != nil {
			m.setAge(r.table, r.key, o.Now().Sub(*t))
		}
	}
	m.records.WithLabelValues(r.table).Add(float64(len(b.Records)))
	m.bytes.WithLabelValues(r.table).Add(float64(b.Bytes))
	g.Add(int64(b.Bytes))
	select {
	case q <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shiftUndecodable is bad after the first n records of their response
// were dropped: those among them are gone, the others' indexes move down.
func shiftUndecodable(bad []Undecodable, n int) []Undecodable {
	var out []Undecodable
	for _, u := range bad {
		if u.Index >= n {
			u.Index -= n
			out = append(out, u)
		}
	}
	return out
}

// splitAtUndecodable cuts b before each undecodable record, so that each
// batch holds at most one, as its first record (see Batch.Undecodable).
// No batch is empty; an empty b gives none.
func splitAtUndecodable(b Batch) []Batch {
	if len(b.Records) == 0 {
		return nil
	}
	var out []Batch
	recs, bad, off := b.Records, b.Undecodable, 0
	for len(recs) > 0 {
		part := b
		part.Undecodable = nil
		end := len(recs)
		if len(bad) > 0 && bad[0].Index == off {
			u := bad[0]
			u.Index = 0
			part.Undecodable, bad = []Undecodable{u}, bad[1:]
		}
		if len(bad) > 0 && bad[0].Index-off < end {
			end = bad[0].Index - off
		}
		part.Records = recs[:end:end]
		out = append(out, part)
		recs, off = recs[end:], off+end
	}
	return out
}

// iterator returns a shard iterator after lastSeq, or at the reader's start
// when nothing was read yet. "" means the shard has nothing more (a closed
// shard past its end).
func (r *reader) iterator(ctx context.Context, lastSeq string) (string, error) {
	if lastSeq != "" {
		return r.iteratorAt(ctx, types.ShardIteratorTypeAfterSequenceNumber, lastSeq)
	}
	return r.iteratorAt(ctx, r.startType, r.startSeq)
}

// iteratorAt calls GetShardIterator with retries: throttling and transient
// errors back off; trimmed data (a stored sequence already trimmed) counts a
// gap and falls back to TRIM_HORIZON.
func (r *reader) iteratorAt(ctx context.Context, typ types.ShardIteratorType, seq string) (string, error) {
	o := &r.w.o
	m := r.w.m
	fails, throttles := 0, 0
	for {
		in := &dynamodbstreams.GetShardIteratorInput{
			StreamArn:         aws.String(r.streamARN),
			ShardId:           aws.String(r.shard.ID),
			ShardIteratorType: typ,
		}
		if typ == types.ShardIteratorTypeAfterSequenceNumber || typ == types.ShardIteratorTypeAtSequenceNumber {
			in.SequenceNumber = aws.String(seq)
		}
		out, err := r.streams.GetShardIterator(ctx, in)
		if err == nil {
			r.iterType = typ
			return aws.ToString(out.ShardIterator), nil
		}
		k := classify(ctx, err)
		if k == errCanceled {
			return "", ctx.Err()
		}
		m.errs.WithLabelValues(r.table, "GetShardIterator", k.String()).Inc()
		switch k {
		case errTrimmed:
			if typ != types.ShardIteratorTypeTrimHorizon {
				m.gaps.WithLabelValues(r.table).Inc()
				r.log.Warn("position trimmed from the stream, continuing from trim horizon (gap)",
					zap.String("sequence", seq), zap.String("iterator_type", string(typ)), zap.Error(err))
				typ, seq = types.ShardIteratorTypeTrimHorizon, ""
				r.trimSkip = true
				continue
			}
			fails++
		case errNotFound:
			return "", fmt.Errorf("get shard iterator: %w", err)
		case errThrottle:
			m.throttles.WithLabelValues(r.table).Inc()
			if !backoff.Sleep(ctx, o.retry().Delay(throttles)) {
				return "", ctx.Err()
			}
			throttles++
			continue
		case errRejected:
			return "", fmt.Errorf("get shard iterator %s %s: %w", typ, seq, err)
		default:
			fails++
		}
		if fails >= maxFailures {
			return "", fmt.Errorf("get shard iterator %s (%d failures): %w", typ, fails, err)
		}
		r.log.Warn("get shard iterator failed, retrying", zap.Int("failures", fails), zap.Error(err))
		if !backoff.Sleep(ctx, o.retry().Delay(fails-1)) {
			return "", ctx.Err()
		}
	}
}

// dropRead removes from the first answer of a new iterator what the reader
// already queued: every record up to the last one at or before seq (records
// without a sequence number among them included), then up to skip records
// without a sequence number right after it, but only when the answer
// starts right after seq (after: the iterator was AFTER_SEQUENCE_NUMBER
// seq; or seq's own record is in the answer). Otherwise the records
// without a sequence number may be new ones, and are kept: a reader never
// hands a record to Process twice, nor drops one it has not.
func dropRead(recs []types.Record, seq string, skip int, after bool) []types.Record {
	i := 0
	for j := range recs {
		if s := event.RecordSequence(&recs[j]); s != "" && event.CompareSequence(s, seq) <= 0 {
			i = j + 1
			after = after || event.CompareSequence(s, seq) == 0
		}
	}
	for after && skip > 0 && i < len(recs) && event.RecordSequence(&recs[i]) == "" {
		i++
		skip--
	}
	return recs[i:]
}

// idleDelay is the wait after the n-th empty GetRecords in a row: it grows
// from max/8 to max.
func idleDelay(n int, maxD time.Duration) time.Duration {
	if n >= 3 {
		return maxD
	}
	return maxD >> (3 - n)
}
