package consumer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// sweepDelete deletes pk the way a sweeper does: a plain DeleteItem (no
// userIdentity in the stream), conditional on the TTL being below now,
// with now to the nanosecond.
func (b *bed) sweepDelete(table, pk string) {
	b.t.Helper()
	now := time.Now()
	in := deleteInput(table, pk)
	in.ConditionExpression = aws.String("#t < :now")
	in.ExpressionAttributeNames = map[string]string{"#t": "expires"}
	in.ExpressionAttributeValues = map[string]dtypes.AttributeValue{
		":now": &dtypes.AttributeValueMemberN{Value: fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond())},
	}
	if _, err := b.db.DeleteItem(context.Background(), in); err != nil {
		b.t.Fatalf("deleting %s: %v", pk, err)
	}
}

// userDelete deletes prefix-0 .. prefix-(n-1) unconditionally.
func (b *bed) userDelete(table, prefix string, n int) {
	b.t.Helper()
	for i := 0; i < n; i++ {
		if _, err := b.db.DeleteItem(context.Background(), deleteInput(table, fmt.Sprintf("%s-%d", prefix, i))); err != nil {
			b.t.Fatal(err)
		}
	}
}

// TestScenarioPastTTL: on the engine with its own TTL off, items a sweeper
// deleted after their TTL arrive as expired (deletedBy "other") under
// past-ttl and as deleted under service, also when the delete came in the
// very second of the TTL; users' deletes of live items stay deleted under
// both, and the engine's own TTL deletes are expired (deletedBy
// "dynamodb-ttl") under both. Under past-ttl the TTL lag histogram counts
// both kinds of expiry.
func TestScenarioPastTTL(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 2}) // TTL sweeps only when called
	const table = "sessions"
	b.createTable(table)
	b.put(table, "swept", 0, 40, past)
	b.put(table, "live", 0, 20, time.Now().Add(time.Hour).Unix())
	b.put(table, "soon", 0, 5, time.Now().Unix()+2) // deleted in the second before its TTL, or earlier
	b.put(table, "native", 0, 10, past)
	for i := 0; i < 40; i++ {
		b.sweepDelete(table, fmt.Sprintf("swept-%d", i))
	}
	b.userDelete(table, "live", 20)
	b.userDelete(table, "soon", 5)
	b.sweep(10)
	// Swept within the second its TTL fell in: the stream's creation time
	// (whole seconds) equals the TTL.
	edge := time.Now().Unix() + 1
	b.put(table, "edge", 0, 5, edge)
	time.Sleep(time.Until(time.Unix(edge, 0)) + 5*time.Millisecond)
	for i := 0; i < 5; i++ {
		b.sweepDelete(table, fmt.Sprintf("edge-%d", i))
	}

	type run struct {
		sink *sinktest.Recorder
		reg  *prometheus.Registry
	}
	runs := map[event.ExpiredWhen]run{}
	for _, when := range []event.ExpiredWhen{event.ExpiredWhenService, event.ExpiredWhenPastTTL} {
		r := run{sink: sinktest.New("all-" + when.String()), reg: prometheus.NewRegistry()}
		cfg := b.config(t, table, newMemStore(), Route{Sink: r.sink, Kinds: event.Kinds})
		cfg.ExpiredWhen, cfg.Registerer = when, r.reg
		start(t, cfg)
		runs[when] = r
	}
	const removes = 40 + 20 + 5 + 10 + 5
	for when, r := range runs {
		eventually.True(t, 2*time.Minute, when.String()+": every REMOVE", func() bool {
			return len(countKeys(r.sink.Events(), event.Expired))+len(countKeys(r.sink.Events(), event.Deleted)) == removes
		})
		checkPastTTLRun(t, when, r.sink.Events(), edge)
	}
	if n := histogramCount(t, runs[event.ExpiredWhenPastTTL].reg, table); n != 40+10+5 {
		t.Errorf("past-ttl: %d TTL lag observations, want %d", n, 40+10+5)
	}
	if n := histogramCount(t, runs[event.ExpiredWhenService].reg, table); n != 10 {
		t.Errorf("service: %d TTL lag observations, want 10", n)
	}
}

// checkPastTTLRun checks the REMOVE events one consumer archived.
func checkPastTTLRun(t *testing.T, when event.ExpiredWhen, evs []event.Event, edge int64) {
	t.Helper()
	sweptKind := event.Deleted
	if when == event.ExpiredWhenPastTTL {
		sweptKind = event.Expired
	}
	want := map[string]struct {
		kind event.Kind
		by   string
	}{
		"swept": {sweptKind, event.DeletedByOther}, "edge": {sweptKind, event.DeletedByOther},
		"live": {event.Deleted, event.DeletedByOther}, "soon": {event.Deleted, event.DeletedByOther},
		"native": {event.Expired, event.DeletedByTTL},
	}
	inEdgeSecond := 0
	for _, e := range evs {
		if e.EventName != "REMOVE" {
			if e.DeletedBy != "" {
				t.Errorf("%v: %s %s has deletedBy %q", when, e.EventName, pkOf(e), e.DeletedBy)
			}
			continue
		}
		prefix, _, _ := strings.Cut(pkOf(e), "-")
		w, ok := want[prefix]
		if !ok {
			t.Fatalf("%v: unexpected key %q", when, pkOf(e))
		}
		if e.Kind != w.kind || e.DeletedBy != w.by {
			t.Errorf("%v: %s is %s by %q, want %s by %q", when, pkOf(e), e.Kind, e.DeletedBy, w.kind, w.by)
		}
		if e.Kind == event.Expired && (e.TTLAttribute != "expires" || e.TTLValue == "" || e.TTLTime.IsZero()) {
			t.Errorf("%v: expired %s without its TTL values: %+v", when, pkOf(e), e)
		}
		if prefix == "edge" && e.ApproximateCreationTime.Unix() == edge {
			inEdgeSecond++
		}
	}
	if inEdgeSecond == 0 {
		t.Errorf("%v: no edge item was deleted in its TTL's second %d", when, edge)
	}
}

// TestScenarioPastTTLWithTTLOff: a table whose DynamoDB TTL is off and that
// only a sweeper expires. Under past-ttl, the sweeper's deletes are
// expiries when Config.TTLAttribute names the attribute; without it the
// table has no expiries, and the consumer says so once.
func TestScenarioPastTTLWithTTLOff(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 1})
	const table = "sweptonly"
	b.createTable(table)
	if _, err := b.db.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &dtypes.TimeToLiveSpecification{AttributeName: aws.String("expires"), Enabled: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	b.put(table, "swept", 0, 10, past)
	for i := 0; i < 10; i++ {
		b.sweepDelete(table, fmt.Sprintf("swept-%d", i))
	}
	for _, tc := range []struct {
		attr     string
		want     event.Kind
		warnings int
	}{
		{"expires", event.Expired, 0},
		{"", event.Deleted, 1},
	} {
		t.Run("ttl attribute "+tc.attr, func(t *testing.T) {
			sink := sinktest.New("all")
			cfg := b.config(t, table, newMemStore(), Route{Sink: sink, Kinds: event.Kinds})
			core, logs := observer.New(zapcore.WarnLevel)
			cfg.ExpiredWhen, cfg.TTLAttribute, cfg.Logger = event.ExpiredWhenPastTTL, tc.attr, zap.New(core)
			start(t, cfg)
			eventually.True(t, 2*time.Minute, "every REMOVE", func() bool {
				return len(countKeys(sink.Events(), tc.want)) == 10
			})
			for _, e := range sink.Events() {
				if e.EventName == "REMOVE" && tc.want == event.Expired && (e.TTLAttribute != "expires" || e.TTLTime.IsZero()) {
					t.Errorf("expired %s without its TTL values: %+v", pkOf(e), e)
				}
			}
			if n := logs.FilterMessageSnippet("TTL is off").Len(); n != tc.warnings {
				t.Errorf("%d TTL-off warnings, want %d", n, tc.warnings)
			}
		})
	}
}

// TestServiceWarnsOfPastTTLDeletes: under service, users' DeleteItems of
// items whose TTL had passed stay deleted, are counted in
// archiver_ttl_passed_user_deletes_total and make one WARN naming
// --expired-when past-ttl per minute of the consumer's clock, however many
// there are; deletes of live items and DynamoDB's own TTL deletes are not
// counted. Under past-ttl those deletes are expiries and nothing is said.
func TestServiceWarnsOfPastTTLDeletes(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 2})
	const table = "sessions"
	b.createTable(table)
	b.put(table, "passed", 0, 30, past)
	b.put(table, "live", 0, 10, time.Now().Add(time.Hour).Unix())
	b.put(table, "native", 0, 5, past)
	b.userDelete(table, "passed", 30)
	b.userDelete(table, "live", 10)
	b.sweep(5)

	type run struct {
		sink  *sinktest.Recorder
		reg   *prometheus.Registry
		logs  *observer.ObservedLogs
		clock *engine.ManualClock
	}
	runs := map[event.ExpiredWhen]*run{}
	for _, when := range []event.ExpiredWhen{event.ExpiredWhenService, event.ExpiredWhenPastTTL} {
		core, logs := observer.New(zapcore.WarnLevel)
		r := &run{sink: sinktest.New("all-" + when.String()), reg: prometheus.NewRegistry(), logs: logs,
			clock: engine.NewManualClock(time.Unix(1_000_000, 0))}
		cfg := b.config(t, table, newMemStore(), Route{Sink: r.sink, Kinds: event.Kinds})
		cfg.ExpiredWhen, cfg.Registerer, cfg.Logger, cfg.Now = when, r.reg, zap.New(core), r.clock.Now
		start(t, cfg)
		runs[when] = r
	}
	removes := func(r *run) int {
		return len(countKeys(r.sink.Events(), event.Expired)) + len(countKeys(r.sink.Events(), event.Deleted))
	}
	for when, r := range runs {
		eventually.True(t, 2*time.Minute, when.String()+": every REMOVE", func() bool { return removes(r) == 45 })
		passed := event.Deleted
		if when == event.ExpiredWhenPastTTL {
			passed = event.Expired
		}
		checkKinds(t, when, r.sink.Events(), map[string]event.Kind{"passed": passed, "live": event.Deleted, "native": event.Expired})
	}
	svc := runs[event.ExpiredWhenService]
	if n := counterSum(t, svc.reg, "archiver_ttl_passed_user_deletes_total"); n != 30 {
		t.Errorf("service: %v past-TTL user deletes counted, want 30", n)
	}
	if got := pastTTLWarnings(svc.logs); len(got) != 1 {
		t.Fatalf("service: %d warnings within the first minute, want 1: %v", len(got), got)
	}

	// A minute later by the consumer's clock, the next such delete warns
	// again, naming every delete counted since the last warning.
	svc.clock.Advance(time.Minute)
	b.put(table, "later", 0, 5, past)
	b.userDelete(table, "later", 5)
	eventually.True(t, 2*time.Minute, "the later deletes", func() bool { return removes(svc) == 50 && removes(runs[event.ExpiredWhenPastTTL]) == 50 })
	if n := counterSum(t, svc.reg, "archiver_ttl_passed_user_deletes_total"); n != 35 {
		t.Errorf("service: %v past-TTL user deletes counted, want 35", n)
	}
	warnings := pastTTLWarnings(svc.logs)
	if len(warnings) != 2 {
		t.Fatalf("service: %d warnings after a minute, want 2", len(warnings))
	}
	total := int64(0)
	for _, w := range warnings {
		f := w.ContextMap()
		if f["table"] != table || f["ttl_attribute"] != "expires" {
			t.Errorf("warning fields %v", f)
		}
		total += f["deletes"].(int64)
	}
	// The second warning counts the first minute's rest and at least one
	// later delete (the five may come in batches of both shards).
	if total < 31 || total > 35 {
		t.Errorf("the warnings name %d deletes, want 31 to 35", total)
	}
	pt := runs[event.ExpiredWhenPastTTL]
	if n := counterSum(t, pt.reg, "archiver_ttl_passed_user_deletes_total"); n != 0 || len(pastTTLWarnings(pt.logs)) != 0 {
		t.Errorf("past-ttl: %v counted, %d warnings; want none", n, len(pastTTLWarnings(pt.logs)))
	}
}

// pastTTLWarnings are the logged warnings about past-TTL user deletes.
func pastTTLWarnings(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterMessageSnippet("--expired-when past-ttl").FilterLevelExact(zapcore.WarnLevel).All()
}

// checkKinds checks the kind of every REMOVE event by its key's prefix.
func checkKinds(t *testing.T, when event.ExpiredWhen, evs []event.Event, want map[string]event.Kind) {
	t.Helper()
	for _, e := range evs {
		if e.EventName != "REMOVE" {
			continue
		}
		prefix, _, _ := strings.Cut(pkOf(e), "-")
		if k, ok := want[prefix]; ok && e.Kind != k {
			t.Errorf("%v: %s is %s, want %s", when, pkOf(e), e.Kind, k)
		}
	}
}
