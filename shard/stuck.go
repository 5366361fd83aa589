package shard

import (
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/internal/backoff"
)

// Failing is a shard whose readers keep failing at one position: each of
// them started where the last one did (the stored position did not move)
// and failed, because Process refused a batch (a record that cannot be
// decoded, without a dead-letter sink) or because GetRecords kept failing
// (a response that cannot be read at all). Only
// archiver_shard_reader_failures_total would otherwise show it: the
// consumer counts such a shard as stuck.
type Failing struct {
	Table, StreamARN, ShardID string
	// Position is where each of those readers started: the iterator type
	// and, for AFTER_ and AT_SEQUENCE_NUMBER, the sequence number.
	Position string
	// Since is when the first of them failed (Options.Now).
	Since time.Time
	// Failures is how many failed in a row at Position.
	Failures int
	// Err is the last reader's error.
	Err error
	// Oldest is the creation time of the first record of the batch that
	// Process refused last; zero when unknown (GetRecords failed).
	Oldest time.Time

	last    time.Time // when the last of them failed
	running bool      // a reader of the shard is running from Position
}

// failBook keeps the walker's Failing shards. The zero value is ready.
type failBook struct {
	mu sync.Mutex
	m  map[string]*Failing // reader key → its shard's failures
}

// Failing lists the shards whose readers failed at the same position at
// least once in a row and have not got past it: a reader of the shard that
// starts elsewhere, ends, or stops (shutdown, lease withdrawn) clears its
// shard. So does no reader of it running for twice the longest restart
// delay after the last failure (the shard went to another worker, or waits
// for a slot). It is safe to call from any goroutine.
func (w *Walker) Failing() []Failing {
	b := &w.fails
	stale := w.o.Now().Add(-2 * restartPolicy(&w.o).Max)
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Failing, 0, len(b.m))
	for k, f := range b.m {
		if !f.running && f.last.Before(stale) {
			delete(b.m, k)
			continue
		}
		out = append(out, *f)
	}
	return out
}

// started books a reader's start: one that starts elsewhere than its
// shard's failures clears them.
func (b *failBook) started(r *reader) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := b.m[r.key]; f != nil {
		if f.Position != startPosition(r.startType, r.startSeq) {
			delete(b.m, r.key)
		} else {
			f.running = true
		}
	}
}

// note books how a reader ended: a failure at the position the shard's
// last failure was at adds one, a failure elsewhere starts a new count,
// any other outcome clears the shard.
func (b *failBook) note(r *reader, res result, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if res.outcome != outFailed {
		delete(b.m, r.key)
		return
	}
	if b.m == nil {
		b.m = map[string]*Failing{}
	}
	pos := startPosition(r.startType, r.startSeq)
	f := b.m[r.key]
	if f == nil || f.Position != pos {
		f = &Failing{Table: r.table, StreamARN: r.streamARN, ShardID: r.shard.ID, Position: pos, Since: now}
		b.m[r.key] = f
	}
	f.Failures++
	f.Err, f.Oldest, f.last, f.running = res.err, res.refusedAt, now, false
}

// restartPolicy is the delay before a failed reader's shard is read
// again, by the number of failures in a row.
func restartPolicy(o *Options) backoff.Policy {
	return backoff.Policy{Min: 4 * o.MinBackoff, Max: 6 * o.MaxBackoff}
}

// startPosition names a reader's start.
func startPosition(typ types.ShardIteratorType, seq string) string {
	if seq == "" {
		return string(typ)
	}
	return strings.Join([]string{string(typ), seq}, " ")
}
