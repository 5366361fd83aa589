package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

var _ Recorder = (*sinktest.Recorder)(nil)

// manifestTime is when the tests' manifests say they were written: fixed,
// so that a range's manifest has one digest.
var manifestTime = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// CheckRanges proves what manifest.Check proves of the ranges recorded
// (by one or several recording sinks, in any order) once each is a
// manifest as a recording sink writes it (without objects): each names
// the one before it in its shard's lineage, the manifest of its shard
// ending at its From or, for a range from the shard's start, its
// parent's last (ended) one. Each must also survive Encode and Decode (a
// range the consumer records is a valid manifest).
func CheckRanges(t testing.TB, ranges []manifest.Range) manifest.Result {
	t.Helper()
	type key struct{ stream, shard, to string }
	byTo := map[key][]int{}
	ended := map[key][]int{}
	for i, r := range ranges {
		byTo[key{r.StreamARN, r.ShardID, r.To}] = append(byTo[key{r.StreamARN, r.ShardID, r.To}], i)
		if r.Ended {
			ended[key{r.StreamARN, r.ShardID, ""}] = append(ended[key{r.StreamARN, r.ShardID, ""}], i)
		}
	}
	// other is the first of ms that is not i.
	other := func(ms []int, i int) (int, bool) {
		for _, j := range ms {
			if j != i {
				return j, true
			}
		}
		return 0, false
	}
	digests := make([]string, len(ranges))
	stored := make([]manifest.Stored, len(ranges))
	var digest func(i int, depth int) string
	digest = func(i, depth int) string {
		if digests[i] != "" || depth > len(ranges) {
			return digests[i]
		}
		r := ranges[i]
		prev, ok := 0, false
		switch {
		case r.From != "":
			prev, ok = other(byTo[key{r.StreamARN, r.ShardID, r.From}], i)
		case r.ParentShardID != "":
			prev, ok = other(ended[key{r.StreamARN, r.ParentShardID, ""}], i)
		}
		p := ""
		if ok {
			p = digest(prev, depth+1)
		}
		m := manifest.New(r, nil, p, "test", manifestTime)
		b := manifest.Encode(m)
		if _, err := manifest.Decode(bytes.NewReader(b)); err != nil {
			t.Errorf("range %+v is no valid manifest: %v", r, err)
		}
		digests[i] = manifest.Digest(b)
		stored[i] = manifest.Stored{Key: fmt.Sprintf("%s.%d", manifest.Key(m), i), Digest: digests[i], M: m}
		return digests[i]
	}
	for i := range ranges {
		digest(i, 0)
	}
	return manifest.Check(stored)
}

// wantFindings fails the test unless the findings are of the given kinds,
// in any order.
func wantFindings(t testing.TB, res manifest.Result, kinds ...string) {
	t.Helper()
	var got []string
	for _, f := range res.Findings {
		got = append(got, f.Kind)
	}
	if fmt.Sprint(sortedCopy(got)) != fmt.Sprint(sortedCopy(kinds)) {
		t.Errorf("the ranges' findings: %+v; want kinds %v", res.Findings, kinds)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// recordedFirst is a checkpoint store that checks, at every save, that the
// recording sinks already hold the range the checkpoint passes: one of
// the shard ending at it (ended, for a finished shard).
type recordedFirst struct {
	checkpoint.Store
	recs []*sinktest.Recorder
	mu   sync.Mutex
	errs []string
}

func (s *recordedFirst) Save(ctx context.Context, arn, id string, cp checkpoint.Checkpoint) error {
	for _, r := range s.recs {
		found := false
		for _, rg := range r.Ranges() {
			if rg.StreamARN == arn && rg.ShardID == id && (rg.To == cp.SequenceNumber || cp.Finished && rg.Ended) && rg.Ended == cp.Finished {
				found = true
			}
		}
		if !found {
			s.mu.Lock()
			s.errs = append(s.errs, fmt.Sprintf("shard %s: checkpoint %+v saved before %s recorded its range", id, cp, r.Name()))
			s.mu.Unlock()
		}
	}
	return s.Store.Save(ctx, arn, id, cp)
}

func (s *recordedFirst) check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.errs {
		t.Error(e)
	}
}

// describedShard is a shard as DescribeStream lists it.
type describedShard struct {
	id, parent string
	closed     bool
}

// allShards lists the table's stream's shards.
func (b *bed) allShards(table string) []describedShard {
	b.t.Helper()
	var out []describedShard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(b.streamARN(table))}
	for {
		d, err := b.streams.DescribeStream(context.Background(), in)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, s := range d.StreamDescription.Shards {
			out = append(out, describedShard{id: aws.ToString(s.ShardId), parent: aws.ToString(s.ParentShardId),
				closed: s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil})
		}
		if d.StreamDescription.LastEvaluatedShardId == nil {
			return out
		}
		in.ExclusiveStartShardId = d.StreamDescription.LastEvaluatedShardId
	}
}

// sumRanges adds up the ranges' records, events by kind and dead letters
// by reason.
func sumRanges(ranges []manifest.Range) (records int64, events map[event.Kind]int64, dead map[string]int64) {
	events, dead = map[event.Kind]int64{}, map[string]int64{}
	for _, r := range ranges {
		records += r.Records
		for k, n := range r.Events {
			events[k] += n
		}
		for reason, n := range r.DeadLettered {
			dead[reason] += n
		}
	}
	return records, events, dead
}

// TestRangesChainOverSplitsAndRollovers: a stream of shards that roll over
// and split, read to the end by one consumer whose recording sink wants
// its ranges every third time it is asked: per shard the ranges chain
// from the shard's start, each from where the one before ended, each
// closed shard to its end, each open one to its checkpoint; every save
// came after its range was recorded; the ranges hold every record once
// and the events the sink took, kind by kind.
func TestRangesChainOverSplitsAndRollovers(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 2, ShardRolloverRecords: 150})
	const table = "chain"
	b.createTable(table)
	rec := sinktest.New("rec")
	var asked atomic.Int64
	rec.DueWith(func(string, string) bool { return asked.Add(1)%3 == 0 })
	file := openStore(t, filepath.Join(t.TempDir(), "cp.json"))
	defer file.Close()
	store := &recordedFirst{Store: file, recs: []*sinktest.Recorder{rec}}
	archive := filepath.Join(t.TempDir(), "archive")
	cfg := b.config(t, table, store, Route{Sink: rec, Kinds: event.Kinds}, Route{Sink: newFileSink(t, archive)})
	cfg.GetRecordsLimit = 25 // several batches a shard
	r := start(t, cfg)

	b.put(table, "a", 0, 300, past)
	b.put(table, "a", 0, 50, time.Now().Add(time.Hour).Unix()) // MODIFY
	for i := 50; i < 60; i++ {
		if _, err := b.db.DeleteItem(context.Background(), deleteInput(table, fmt.Sprintf("a-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	b.sweep(240)
	if err := b.eng.SplitShard(table, b.openShards(table)[0]); err != nil {
		t.Fatal(err)
	}
	b.put(table, "b", 0, 200, past)
	b.sweep(200)
	const records = 300 + 50 + 10 + 240 + 200 + 200
	eventually.True(t, 2*time.Minute, "every record at the sink", func() bool { return len(rec.Events()) == records })
	r.stop(t)
	store.check(t)

	ranges := rec.Ranges()
	res := CheckRanges(t, ranges)
	wantFindings(t, res)
	cps, err := file.Load(context.Background(), b.streamARN(table))
	if err != nil {
		t.Fatal(err)
	}
	proven := map[string]manifest.Shard{}
	for _, sh := range res.Shards {
		proven[sh.Shard] = sh
	}
	shards := b.allShards(table)
	for _, s := range shards {
		p, ok := proven[s.id]
		switch {
		case !ok:
			t.Errorf("shard %s: no range recorded", s.id)
		case p.Start != "" || p.Gaps != 0 || len(p.Covered) != 1:
			t.Errorf("shard %s: ranges cover %v from %q, want one stretch from its start", s.id, p.Covered, p.Start)
		case s.closed && !p.Ended:
			t.Errorf("shard %s: closed, but its ranges never reached its end", s.id)
		case !s.closed && p.To != cps[s.id].SequenceNumber:
			t.Errorf("shard %s: ranges end at %s, its checkpoint at %s", s.id, p.To, cps[s.id].SequenceNumber)
		case p.Parent != s.parent:
			t.Errorf("shard %s: ranges name parent %q, the stream %q", s.id, p.Parent, s.parent)
		}
	}
	if len(ranges) <= len(shards) {
		t.Errorf("%d ranges over %d shards: the test means several ranges a shard", len(ranges), len(shards))
	}
	n, events, dead := sumRanges(ranges)
	took := map[event.Kind]int64{}
	for _, e := range rec.Events() {
		took[e.Kind]++
	}
	if n != records || fmt.Sprint(events) != fmt.Sprint(took) || len(dead) != 0 {
		t.Errorf("ranges hold %d records, events %v, dead letters %v; want %d records, the sink's %v, none",
			n, events, dead, records, took)
	}
}

// TestRangeCounts: the counts of a range are exact, per recording sink:
// every record (the one no sink could decode too), the events each sink
// was given by kind (less those it failed for good, which the dead-letter
// sink took) and the dead letters by reason.
func TestRangeCounts(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 1})
	const table = "counts"
	b.createTable(table)
	plantUnparseable(t, b, table, unparseableKeys[0].keys) // 3 inserts, 1 undecodable, 3 inserts
	b.put(table, "bad", 0, 4, past)
	b.put(table, "before", 0, 2, time.Now().Add(time.Hour).Unix()) // 2 modifies
	if _, err := b.db.DeleteItem(context.Background(), deleteInput(table, "after-0")); err != nil {
		t.Fatal(err)
	}
	b.sweep(7) // before-2, after-1, after-2, bad-0..3
	all, exp, dlq := sinktest.New("all"), sinktest.New("exp"), sinktest.New("dlq")
	exp.FailWith(func(bt sinks.Batch) error {
		var bad []int
		for i, e := range bt.Events {
			if strings.HasPrefix(pkOf(e), "bad-") {
				bad = append(bad, i)
			}
		}
		if bad == nil {
			return nil
		}
		return &sinks.RejectedError{Indexes: bad, Err: sinks.Permanent(errors.New("bad item (test)"))}
	})
	store := newMemStore()
	reg := prometheus.NewRegistry()
	cfg := b.config(t, table, store, Route{Sink: all, Kinds: event.Kinds}, Route{Sink: exp})
	cfg.DeadLetter, cfg.Registerer = dlq, reg
	r := start(t, cfg)
	eventually.True(t, 2*time.Minute, "20 events and 5 dead letters", func() bool { return len(all.Events()) == 20 && len(dlq.Events()) == 5 })
	r.stop(t)

	for _, tc := range []struct {
		rec    *sinktest.Recorder
		events map[event.Kind]int64
	}{
		{all, map[event.Kind]int64{event.Inserted: 10, event.Modified: 2, event.Deleted: 1, event.Expired: 7}},
		{exp, map[event.Kind]int64{event.Expired: 3}},
		{dlq, map[event.Kind]int64{event.Expired: 4}},
	} {
		ranges := tc.rec.Ranges()
		wantFindings(t, CheckRanges(t, ranges))
		n, events, dead := sumRanges(ranges)
		want := map[string]int64{event.ReasonPermanent: 4, event.ReasonUndecodable: 1}
		if n != 21 || fmt.Sprint(events) != fmt.Sprint(tc.events) || fmt.Sprint(dead) != fmt.Sprint(want) {
			t.Errorf("%s's ranges: %d records, events %v, dead letters %v; want 21, %v, %v", tc.rec.Name(), n, events, dead, tc.events, want)
		}
	}
	if got := counterSum(t, reg, "archiver_ranges_recorded_total"); got != float64(len(all.Ranges())+len(exp.Ranges())+len(dlq.Ranges())) {
		t.Errorf("archiver_ranges_recorded_total = %v, want one a range and sink", got)
	}
}

// TestCheckpointWaitsForRecord: while a recording sink fails to record,
// the shard's checkpoint stays where it was and the range is asked for
// again and again (with the same From); once it is recorded, the
// checkpoint moves to its end.
func TestCheckpointWaitsForRecord(t *testing.T) {
	rec := sinktest.New("rec")
	errDown := errors.New("archive down (test)")
	rec.FailRecordsWith(func(manifest.Range) error { return errDown })
	store := newMemStore()
	store.check = func(arn, id string, cp checkpoint.Checkpoint) error {
		for _, r := range rec.Ranges() {
			if r.ShardID == id && r.To == cp.SequenceNumber {
				return nil
			}
		}
		return fmt.Errorf("checkpoint %+v of %s saved before its range was recorded", cp, id)
	}
	reg := prometheus.NewRegistry()
	c := newUnitConsumer(t, store, func(cfg *Config) { cfg.Registerer = reg }, Route{Sink: rec, Kinds: event.Kinds})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := c.process(ctx, mkBatch("s", 1+10*i, event.Expired, event.Inserted)); err != nil {
			t.Fatal(err)
		}
	}
	eventually.True(t, time.Minute, "three failed records", func() bool { _, failed := rec.RecordCalls(); return failed >= 3 })
	if cp := store.get(testARN, "s"); cp.SequenceNumber != "" {
		t.Fatalf("checkpoint %+v saved while its range could not be recorded", cp)
	}
	if v := counterSum(t, reg, "archiver_range_record_failures_total"); v < 3 {
		t.Errorf("archiver_range_record_failures_total = %v, want >= 3", v)
	}
	rec.FailRecordsWith(nil)
	eventually.True(t, time.Minute, "checkpoint at 22", func() bool { return store.get(testARN, "s").SequenceNumber == seqOf(22) })
	got := rec.Ranges()
	if len(got) != 1 || got[0].From != "" || got[0].To != seqOf(22) || got[0].Records != 6 {
		t.Errorf("ranges %+v, want one from the start to 22 with 6 records", got)
	}
	for _, err := range store.problems() {
		t.Error(err)
	}
}

// TestPermanentRecordFailureGoesOn: a sink that can never record (its
// bucket is gone: a permanent error) does not hold the checkpoint: the
// shard's checkpoint moves on, the other recording sink records its
// ranges, and the failure is counted (that sink's archive shows the gap,
// which verify reports).
func TestPermanentRecordFailureGoesOn(t *testing.T) {
	gone, ok := sinktest.New("gone"), sinktest.New("ok")
	gone.FailRecordsWith(func(manifest.Range) error { return sinks.Permanent(errors.New("NoSuchBucket (test)")) })
	store := newMemStore()
	reg := prometheus.NewRegistry()
	c := newUnitConsumer(t, store, func(cfg *Config) { cfg.Registerer = reg },
		Route{Sink: gone, Kinds: event.Kinds}, Route{Sink: ok, Kinds: event.Kinds})
	ctx := context.Background()
	if err := c.process(ctx, mkBatch("s", 1, event.Expired, event.Inserted)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Minute, "checkpoint at 2", func() bool { return store.get(testARN, "s").SequenceNumber == seqOf(2) })
	if got := ok.Ranges(); len(got) != 1 || got[0].To != seqOf(2) {
		t.Errorf("ok's ranges %+v, want one to 2", got)
	}
	if len(gone.Ranges()) != 0 {
		t.Errorf("gone recorded %+v", gone.Ranges())
	}
	if v := counterSum(t, reg, "archiver_range_record_failures_total"); v < 1 {
		t.Errorf("archiver_range_record_failures_total = %v, want >= 1", v)
	}
}

// TestIdleShardRecordedWhenDue: a shard whose recording sink does not want
// its range yet keeps its checkpoint; the saver asks again at every
// interval, so once the sink wants it the range is recorded and saved,
// with no new record read.
func TestIdleShardRecordedWhenDue(t *testing.T) {
	rec := sinktest.New("rec")
	var due atomic.Bool
	var asked atomic.Int64
	rec.DueWith(func(string, string) bool { asked.Add(1); return due.Load() })
	store := newMemStore()
	c := newUnitConsumer(t, store, nil, Route{Sink: rec, Kinds: event.Kinds})
	if err := c.process(context.Background(), mkBatch("s", 1, event.Expired, event.Expired)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Minute, "the sink asked three times", func() bool { return asked.Load() >= 3 })
	if len(rec.Ranges()) != 0 || store.get(testARN, "s").SequenceNumber != "" {
		t.Fatalf("range %+v recorded or checkpoint saved while the sink did not want it", rec.Ranges())
	}
	due.Store(true)
	eventually.True(t, time.Minute, "checkpoint at 2", func() bool { return store.get(testARN, "s").SequenceNumber == seqOf(2) })
	if got := rec.Ranges(); len(got) != 1 || got[0].To != seqOf(2) {
		t.Errorf("ranges %+v, want one up to 2", got)
	}
}

// TestRangesSayWhatWasNotRead: a shard whose first records were trimmed
// before the consumer first read it, and one read from LATEST, begin
// with a range that says so (Trimmed: its first record read and that
// record's time; Skipped for LATEST), which Check reports.
func TestRangesSayWhatWasNotRead(t *testing.T) {
	for _, latest := range []bool{false, true} {
		t.Run(fmt.Sprint("latest=", latest), func(t *testing.T) {
			b := newBed(t, engine.Options{StreamShards: 1})
			const table = "unread"
			b.createTable(table)
			b.put(table, "old", 0, 10, past)
			if !latest {
				if err := b.eng.TrimStream(table, time.Now()); err != nil {
					t.Fatal(err)
				}
				b.put(table, "new", 0, 5, past)
			}
			rec := sinktest.New("rec")
			cfg := b.config(t, table, newMemStore(), Route{Sink: rec, Kinds: event.Kinds})
			if latest {
				cfg.Start = shard.Latest
			}
			r := start(t, cfg)
			if latest {
				// The reader starts at LATEST once it has asked once.
				eventually.True(t, time.Minute, "the LATEST reader's first GetRecords", func() bool {
					return counterSum(t, cfg.Registerer.(*prometheus.Registry), "archiver_shard_getrecords_calls_total") > 0
				})
				b.put(table, "new", 0, 5, past)
			}
			eventually.True(t, time.Minute, "5 new records", func() bool { return len(rec.Events()) == 5 })
			r.stop(t)
			ranges := rec.Ranges()
			first := rec.Events()[0]
			kind := manifest.FindTrimmed
			if latest {
				kind = manifest.FindSkipped
			}
			wantFindings(t, CheckRanges(t, ranges), kind)
			tr := ranges[0].Trimmed
			if ranges[0].From != "" || tr == nil || tr.First != first.SequenceNumber || !tr.Time.Equal(first.ApproximateCreationTime) || tr.Skipped != latest {
				t.Errorf("first range %+v (trimmed %+v), want from the start, first read %s at %v, skipped %v",
					ranges[0], tr, first.SequenceNumber, first.ApproximateCreationTime, latest)
			}
			for _, rg := range ranges[1:] {
				if rg.Trimmed != nil {
					t.Errorf("a later range %+v says records were not read", rg)
				}
			}
		})
	}
}

// TestRangeEndsWhereRecordsWereTrimmed: records trimmed after the reader's
// position, before it read them, end the shard's range: the records
// before them are recorded and saved, and the range after says from where
// it read on (Check: trimmed after the first range's end).
func TestRangeEndsWhereRecordsWereTrimmed(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 1})
	const table = "midtrim"
	b.createTable(table)
	rec := sinktest.New("rec")
	gate := make(chan struct{})
	rec.Gate(gate)
	cfg := b.config(t, table, newMemStore(), Route{Sink: rec, Kinds: event.Kinds})
	cfg.MaxInFlightBytes = 1 // a second batch waits for the first's acknowledgement
	reg := cfg.Registerer.(*prometheus.Registry)
	r := start(t, cfg)
	b.put(table, "a", 0, 1, past)
	<-rec.Arrived()
	b.put(table, "a", 1, 2, past)
	// The reader holds a-1 at the full budget: it reads nothing more.
	eventually.True(t, time.Minute, "a-1 read", func() bool {
		return counterSum(t, reg, "archiver_shard_records_read_total") == 2
	})
	b.put(table, "lost", 0, 5, past)
	if err := b.eng.TrimStream(table, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.put(table, "new", 0, 5, past)
	close(gate)
	eventually.True(t, time.Minute, "7 events", func() bool { return len(rec.Events()) == 7 })
	r.stop(t)
	evs := rec.Events()
	ranges := rec.Ranges()
	res := CheckRanges(t, ranges)
	wantFindings(t, res, manifest.FindTrimmed)
	if f := res.Findings[0]; f.From != evs[1].SequenceNumber || f.To != evs[2].SequenceNumber {
		t.Errorf("finding %+v, want the records after a-1 (%s) before new-0 (%s)", f, evs[1].SequenceNumber, evs[2].SequenceNumber)
	}
	for _, e := range evs {
		if strings.HasPrefix(pkOf(e), "lost-") {
			t.Errorf("trimmed record %s was read", pkOf(e))
		}
	}
}

// TestWithoutRecorderNothingWaits: with no recording sink the walker asks
// the stream nothing more (no trim probe) and checkpoints are saved as
// soon as the records are acknowledged, as before ranges existed.
func TestWithoutRecorderNothingWaits(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 1})
	const table = "plain"
	b.createTable(table)
	b.put(table, "x", 0, 10, past)
	b.sweep(10)
	store := newMemStore()
	cfg := b.config(t, table, store, Route{Sink: sinktest.New("s").Plain()})
	reg := cfg.Registerer.(*prometheus.Registry)
	r := start(t, cfg)
	shardID := b.openShards(table)[0]
	eventually.True(t, time.Minute, "checkpoint past the 20 records", func() bool {
		return store.get(b.streamARN(table), shardID).SequenceNumber != "" && counterSum(t, reg, "archiver_events_total") == 20
	})
	r.stop(t)
	for _, name := range []string{"archiver_shard_trim_probes_total", "archiver_ranges_recorded_total", "archiver_range_record_failures_total"} {
		if v := counterSum(t, reg, name); v != 0 {
			t.Errorf("%s = %v without a recording sink, want 0", name, v)
		}
	}
}

// TestRangeAfterTrimmedTail: a shard whose last records were trimmed
// before the reader reached them, and that then ended, records a last
// range up to its EndingSequenceNumber that says so (a valid manifest:
// trimmed.first in its range); when its end is unknown (it was open when
// its reader started) the last range ends where reading did.
func TestRangeAfterTrimmedTail(t *testing.T) {
	for _, end := range []string{seqOf(100), ""} {
		t.Run(fmt.Sprint("end=", end), func(t *testing.T) {
			rec := sinktest.New("rec")
			c := newUnitConsumer(t, newMemStore(), nil, Route{Sink: rec, Kinds: event.Kinds})
			ctx := context.Background()
			c.shardStarted("tbl", testARN, shard.Shard{ID: "s", Parents: []string{"p"}, StartingSequence: seqOf(1), EndingSequence: end})
			if err := c.process(ctx, mkBatch("s", 1, event.Expired, event.Expired)); err != nil {
				t.Fatal(err)
			}
			if err := c.skipped(ctx, testARN, "s", shard.SkipTrimmed); err != nil {
				t.Fatal(err)
			}
			if err := c.shardEnded(ctx, testARN, "s"); err != nil {
				t.Fatal(err)
			}
			ranges := rec.Ranges()
			if len(ranges) != 2 || ranges[0].To != seqOf(2) || ranges[0].Ended || ranges[0].ParentShardID != "p" {
				t.Fatalf("ranges %+v, want the records read up to 2, then the shard's last", ranges)
			}
			last := ranges[1]
			if end == "" {
				if last.From != seqOf(2) || last.To != seqOf(2) || !last.Ended || last.Trimmed != nil {
					t.Errorf("last range %+v, want (2, 2], ended, saying nothing of its tail", last)
				}
				wantFindings(t, CheckRanges(t, ranges))
				return
			}
			if last.From != seqOf(2) || last.To != end || !last.Ended || last.Records != 0 || last.Trimmed == nil || last.Trimmed.First != end {
				t.Errorf("last range %+v (trimmed %+v), want (2, 100], ended, trimmed up to its end", last, last.Trimmed)
			}
			wantFindings(t, CheckRanges(t, ranges), manifest.FindTrimmed)
		})
	}
}
