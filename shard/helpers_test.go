package shard

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// recorder is the tests' Processor and Positions: an in-memory checkpoint
// store that acknowledges every batch at once. It checks the walker's
// promises as records arrive: per-shard order, no concurrent Process on one
// shard, children only after their parents ended.
type recorder struct {
	t  testing.TB
	mu sync.Mutex

	pos      map[string]map[string]Position // stream → shard → position
	keys     map[string]int                 // item key → times seen
	byStream map[string]int                 // stream → records seen
	inFlight map[string]bool                // stream|shard in Process
	ended    map[string]int                 // stream|shard → event index of ShardEnded
	first    map[string]int                 // stream|shard → event index of first Process
	lastSeq  map[string]string
	events   []string // "process S", "ended S", "stopped S", "release S"
	parents  map[string][]string
	errs     []string
	total    int
	live     map[string]bool // shards between their first Process and ShardEnded/ShardStopped
	maxLive  int

	// failOnce, when set, makes Process fail once for a shard.
	failOnce map[string]bool
	// failEndOnce makes the first ShardEnded of every shard fail.
	failEndOnce bool
	endFailed   map[string]bool
	// blockShard, when set, makes Process for these shards wait for ctx.
	block func(b Batch) bool
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{
		t: t, pos: map[string]map[string]Position{}, keys: map[string]int{}, byStream: map[string]int{},
		inFlight: map[string]bool{}, ended: map[string]int{}, first: map[string]int{}, lastSeq: map[string]string{},
		parents: map[string][]string{}, failOnce: map[string]bool{}, live: map[string]bool{}, endFailed: map[string]bool{},
	}
}

func (r *recorder) errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Process(ctx context.Context, b Batch) error {
	k := b.StreamARN + "|" + b.ShardID
	r.mu.Lock()
	if r.inFlight[k] {
		r.errorf("concurrent Process on shard %s", b.ShardID)
	}
	r.inFlight[k] = true
	r.live[k] = true
	if len(r.live) > r.maxLive {
		r.maxLive = len(r.live)
	}
	block := r.block != nil && r.block(b)
	fail := r.failOnce[b.ShardID]
	delete(r.failOnce, b.ShardID)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight[k] = false
		r.mu.Unlock()
	}()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	if fail {
		return fmt.Errorf("injected failure on %s", b.ShardID)
	}
	if len(b.Records) == 0 {
		r.mu.Lock()
		r.errorf("empty batch for %s", b.ShardID)
		r.mu.Unlock()
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.first[k]; !ok {
		r.first[k] = len(r.events)
	}
	r.events = append(r.events, "process "+b.ShardID)
	size := 0
	for _, rec := range b.Records {
		seq := aws.ToString(rec.Dynamodb.SequenceNumber)
		if last := r.lastSeq[k]; last != "" && event.CompareSequence(seq, last) <= 0 {
			// Allowed only as a re-delivery after a restart; the position
			// tells: a re-delivery starts after the stored position.
			if p := r.pos[b.StreamARN][b.ShardID]; p.SequenceNumber != "" && event.CompareSequence(seq, p.SequenceNumber) <= 0 {
				r.errorf("shard %s: record %s at or before stored position %s", b.ShardID, seq, p.SequenceNumber)
			}
		}
		r.lastSeq[k] = seq
		r.keys[itemKey(rec)]++
		r.byStream[b.StreamARN]++
		r.total++
		size += event.EstimateMemory(rec)
	}
	if size != b.Bytes {
		r.errorf("batch bytes %d, records add up to %d", b.Bytes, size)
	}
	m := r.pos[b.StreamARN]
	if m == nil {
		m = map[string]Position{}
		r.pos[b.StreamARN] = m
	}
	m[b.ShardID] = Position{SequenceNumber: r.lastSeq[k]}
	return nil
}

func (r *recorder) ShardEnded(ctx context.Context, arn, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := arn + "|" + id
	delete(r.live, k)
	if r.failEndOnce && !r.endFailed[k] {
		r.endFailed[k] = true
		r.events = append(r.events, "end failed "+id)
		return fmt.Errorf("injected ShardEnded failure on %s", id)
	}
	r.ended[k] = len(r.events)
	r.events = append(r.events, "ended "+id)
	m := r.pos[arn]
	if m == nil {
		m = map[string]Position{}
		r.pos[arn] = m
	}
	p := m[id]
	p.Finished = true
	m[id] = p
	return nil
}

func (r *recorder) ShardStopped(ctx context.Context, arn, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		r.errorf("ShardStopped(%s) got a done context", id)
	}
	delete(r.live, arn+"|"+id)
	r.events = append(r.events, "stopped "+id)
	return nil
}

func (r *recorder) Positions(ctx context.Context, arn string) (map[string]Position, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]Position{}
	for k, v := range r.pos[arn] {
		out[k] = v
	}
	return out, nil
}

func (r *recorder) setPositions(arn string, m map[string]Position) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pos[arn] = m
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys)
}

func (r *recorder) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.keys {
		n += c - 1
	}
	return n
}

func (r *recorder) eventLog() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// check reports the invariant violations seen, and lineage violations: a
// shard whose first batch came before its parent's ShardEnded (parents must
// be known: pass the stream's description).
func (r *recorder) check(t testing.TB, arn string, shards []Shard) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error(e)
	}
	for _, s := range shards {
		f, ok := r.first[arn+"|"+s.ID]
		if !ok {
			continue
		}
		for _, p := range s.Parents {
			e, ok := r.ended[arn+"|"+p]
			if !ok {
				// The parent may have been finished before this run
				// (stored position) or trimmed.
				if pp, stored := r.pos[arn][p]; stored && pp.Finished {
					continue
				}
				if r.first[arn+"|"+p] == 0 && !hasKey(r.first, arn+"|"+p) {
					continue
				}
				t.Errorf("shard %s read but its parent %s never ended", s.ID, p)
				continue
			}
			if e > f {
				t.Errorf("shard %s read (event %d) before its parent %s ended (event %d)", s.ID, f, p, e)
			}
		}
	}
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// itemKey identifies the item a record is about (its "pk" attribute).
func itemKey(rec types.Record) string {
	if rec.Dynamodb == nil {
		return ""
	}
	if v, ok := rec.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS); ok {
		return v.Value + "/" + string(rec.EventName)
	}
	return fmt.Sprint(rec.Dynamodb.Keys)
}

// watchedStreams wraps the real Streams client and fails the test if two
// readers ever read one shard at once: each GetShardIterator starts an
// iterator chain, each GetRecords continues one; a chain used again after
// another chain of the same shard was used, or two GetRecords on one shard
// in flight together, means two readers.
type watchedStreams struct {
	StreamsAPI
	t testing.TB

	mu                 sync.Mutex
	chainOf            map[string]int // iterator → chain
	shardOf            map[int]string // chain → stream|shard
	lastChain          map[string]int // stream|shard → chain last used
	retired            map[int]bool   // chains superseded by a newer one
	inFlight           map[string]int // stream|shard → GetRecords in flight
	calls              map[string]int // shard → GetRecords calls
	next               int
	describes          int
	filters            int
	failDescribeFilter bool
}

func watch(t testing.TB, api StreamsAPI) *watchedStreams {
	return &watchedStreams{StreamsAPI: api, t: t, chainOf: map[string]int{}, shardOf: map[int]string{},
		lastChain: map[string]int{}, retired: map[int]bool{}, inFlight: map[string]int{}, calls: map[string]int{}}
}

func (w *watchedStreams) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, f ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	w.mu.Lock()
	w.describes++
	if in.ShardFilter != nil {
		w.filters++
	}
	w.mu.Unlock()
	return w.StreamsAPI.DescribeStream(ctx, in, f...)
}

func (w *watchedStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, f ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	out, err := w.StreamsAPI.GetShardIterator(ctx, in, f...)
	if err == nil && out.ShardIterator != nil {
		w.mu.Lock()
		w.next++
		w.chainOf[*out.ShardIterator] = w.next
		w.shardOf[w.next] = aws.ToString(in.StreamArn) + "|" + aws.ToString(in.ShardId)
		w.mu.Unlock()
	}
	return out, err
}

func (w *watchedStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, f ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	it := aws.ToString(in.ShardIterator)
	w.mu.Lock()
	chain, ok := w.chainOf[it]
	sh := w.shardOf[chain]
	if ok {
		delete(w.chainOf, it)
		if last, used := w.lastChain[sh]; used && last != chain {
			w.retired[last] = true
		}
		if w.retired[chain] {
			w.t.Errorf("two readers on shard %s: iterator chain %d used after a newer chain", sh, chain)
		}
		w.lastChain[sh] = chain
		w.inFlight[sh]++
		if w.inFlight[sh] > 1 {
			w.t.Errorf("two GetRecords on shard %s in flight at once", sh)
		}
		w.calls[sh[strings.LastIndex(sh, "|")+1:]]++
	}
	w.mu.Unlock()
	out, err := w.StreamsAPI.GetRecords(ctx, in, f...)
	w.mu.Lock()
	if ok {
		w.inFlight[sh]--
		if err == nil && out.NextShardIterator != nil {
			w.chainOf[*out.NextShardIterator] = chain
		}
	}
	w.mu.Unlock()
	return out, err
}

// describeCounts returns the DescribeStream calls so far, and those with a
// ShardFilter.
func (w *watchedStreams) describeCounts() (all, filtered int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.describes, w.filters
}

func (w *watchedStreams) callsOn(shardID string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[shardID]
}

// describeAll pages the stream's description (for the tests' own checks).
func describeAll(t testing.TB, api StreamsAPI, arn string) []Shard {
	t.Helper()
	var out []Shard
	var start *string
	for {
		resp, err := api.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			t.Fatalf("describe stream: %v", err)
		}
		for _, s := range resp.StreamDescription.Shards {
			sh := Shard{ID: aws.ToString(s.ShardId)}
			if p := aws.ToString(s.ParentShardId); p != "" {
				sh.Parents = []string{p}
			}
			if s.SequenceNumberRange != nil {
				sh.StartingSequence = aws.ToString(s.SequenceNumberRange.StartingSequenceNumber)
				sh.EndingSequence = aws.ToString(s.SequenceNumberRange.EndingSequenceNumber)
			}
			out = append(out, sh)
		}
		if resp.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		start = resp.StreamDescription.LastEvaluatedShardId
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
