package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/event/eventtest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

func TestNewValidatesExpiredWhen(t *testing.T) {
	good := Config{Options: shard.Options{Streams: nopStreams{}, StreamARNs: []string{testARN}}, Store: newMemStore(), Routes: []Route{{Sink: sinktest.New("a")}}}
	for name, mod := range map[string]func(*Config){
		"out of range":           func(c *Config) { c.ExpiredWhen = 2 },
		"negative":               func(c *Config) { c.ExpiredWhen = -1 },
		"past-ttl without table": func(c *Config) { c.ExpiredWhen = event.ExpiredWhenPastTTL },
	} {
		c := good
		mod(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "Config.ExpiredWhen") {
			t.Errorf("%s: New error %v, want one naming Config.ExpiredWhen", name, err)
		}
	}
	c := good
	c.ExpiredWhen, c.Tables = event.ExpiredWhenPastTTL, tablesAPI{}
	if _, err := New(c); err != nil {
		t.Errorf("past-ttl with Tables: %v", err)
	}
}

// tablesAPI is a TableAPI that New accepts; it is never called here.
type tablesAPI struct {
	shard.TableAPI
	TTLAPI
}

// TestPastTTLWaitsForTheTTLAttribute: under past-ttl a batch with a REMOVE
// fails while DescribeTimeToLive has never answered (classifying it would
// pass swept items off as deletes), and goes through once it has; a batch
// without REMOVEs never needs it. Under service the batch goes on: a user
// delete with an old image looks it up (for the past-TTL warning), a
// KEYS_ONLY one does not.
func TestPastTTLWaitsForTheTTLAttribute(t *testing.T) {
	ctx := context.Background()
	remove := []types.Record{eventtest.Record(types.OperationTypeInsert, nil, "1"), eventtest.Record(types.OperationTypeRemove, nil, "2")}
	inserts := []types.Record{eventtest.Record(types.OperationTypeInsert, nil, "1")}
	for _, when := range []event.ExpiredWhen{event.ExpiredWhenService, event.ExpiredWhenPastTTL} {
		api := &ttlAPI{err: errors.New("throttled")}
		now := time.Unix(1000, 0)
		c := &Consumer{cfg: Config{ExpiredWhen: when}, ttl: newTTLCache(api, time.Minute, func() time.Time { return now }, zap.NewNop(), newMetrics(nil))}
		if attr, err := c.ttlAttribute(ctx, "tbl", inserts); attr != "" || err != nil || api.calls != 0 {
			t.Fatalf("%v: no REMOVE: %q, %v after %d calls", when, attr, err, api.calls)
		}
		attr, err := c.ttlAttribute(ctx, "tbl", remove)
		if when == event.ExpiredWhenService {
			// Looked up for the past-TTL warning, and the failure lets the
			// batch through.
			if attr != "" || err != nil || api.calls != 1 {
				t.Fatalf("service: a user delete with the lookup failing: %q, %v after %d calls; want \"\", nil after 1", attr, err, api.calls)
			}
			keysOnly := eventtest.Record(types.OperationTypeRemove, nil, "3")
			keysOnly.Dynamodb.OldImage = nil
			now = now.Add(time.Minute) // past the retry: a lookup would call again
			if attr, err := c.ttlAttribute(ctx, "tbl", []types.Record{keysOnly}); attr != "" || err != nil || api.calls != 1 {
				t.Fatalf("service: a KEYS_ONLY user delete: %q, %v after %d calls; want no lookup", attr, err, api.calls)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "throttled") || !strings.Contains(err.Error(), "tbl") {
			t.Fatalf("past-ttl, lookup failing: %q, %v", attr, err)
		}
		if _, err := c.ttlAttribute(ctx, "tbl", remove); err == nil {
			t.Fatal("past-ttl: a cached failure let the batch through")
		}
		now = now.Add(11 * time.Second)
		api.mu.Lock()
		api.attr, api.err = "expires", nil
		api.mu.Unlock()
		if attr, err := c.ttlAttribute(ctx, "tbl", remove); attr != "expires" || err != nil {
			t.Fatalf("past-ttl, lookup answered: %q, %v", attr, err)
		}
		// A failed refresh keeps the known answer.
		now = now.Add(2 * time.Minute)
		api.mu.Lock()
		api.err = errors.New("down")
		api.mu.Unlock()
		if attr, err := c.ttlAttribute(ctx, "tbl", remove); attr != "expires" || err != nil {
			t.Fatalf("past-ttl, refresh failing: %q, %v", attr, err)
		}
	}
}

// TestProcessPastTTL: process classifies under Config.ExpiredWhen, routes
// a swept item as expired and observes its TTL lag.
func TestProcessPastTTL(t *testing.T) {
	ctx := context.Background()
	api := &ttlAPI{attr: "expires"}
	sink := sinktest.New("expired-only")
	reg := prometheus.NewRegistry()
	c := newUnitConsumer(t, newMemStore(), func(c *Config) {
		c.ExpiredWhen, c.Tables, c.Registerer = event.ExpiredWhenPastTTL, tablesAPI{TTLAPI: api}, reg
	}, Route{Sink: sink})
	live := eventtest.Record(types.OperationTypeRemove, nil, seqOf(2))
	eventtest.WithTTL(eventtest.Num("1767326400"))(&live)
	b := shard.Batch{Table: "tbl", StreamARN: testARN, ShardID: "s", Records: []types.Record{
		eventtest.Record(types.OperationTypeRemove, nil, seqOf(1)), live,
		eventtest.Record(types.OperationTypeRemove, eventtest.TTLService(), seqOf(3)),
	}}
	if err := c.process(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "two expiries", func() bool { return len(sink.Events()) == 2 })
	evs := sink.Events()
	if evs[0].DeletedBy != event.DeletedByOther || evs[1].DeletedBy != event.DeletedByTTL || evs[0].TTLLag != 245*time.Second {
		t.Fatalf("events %+v", evs)
	}
	if n := histogramCount(t, reg, "tbl"); n != 2 {
		t.Errorf("TTL lag observations: %d, want 2", n)
	}
}

// TestProcessClassifiesAsTheTable: under each --expired-when, process
// hands every record of the classification table (eventtest.ClassifyCases)
// to the sinks with the kind the table gives it. Records that do not
// decode are the dead-letter tests' matter.
func TestProcessClassifiesAsTheTable(t *testing.T) {
	all := []event.Kind{event.Expired, event.Deleted, event.Inserted, event.Modified}
	for _, when := range []event.ExpiredWhen{event.ExpiredWhenService, event.ExpiredWhenPastTTL} {
		for _, tc := range eventtest.ClassifyCases() {
			r := tc.Record(seqOf(1))
			if _, err := event.DecodeWith("tbl", testARN, "s", 0, r, tc.Attr, when); err != nil {
				continue
			}
			t.Run(when.String()+"/"+tc.Name, func(t *testing.T) {
				sink := sinktest.New("all")
				c := newUnitConsumer(t, newMemStore(), func(c *Config) {
					c.ExpiredWhen, c.Tables = when, tablesAPI{TTLAPI: &ttlAPI{attr: tc.Attr}}
				}, Route{Sink: sink, Kinds: all})
				b := shard.Batch{Table: "tbl", StreamARN: testARN, ShardID: "s", Records: []types.Record{r}}
				if err := c.process(context.Background(), b); err != nil {
					t.Fatal(err)
				}
				eventually.True(t, 2*time.Minute, "the event at the sink", func() bool { return len(sink.Events()) == 1 })
				if got, want := sink.Events()[0].Kind, event.Kind(tc.Want(when == event.ExpiredWhenPastTTL)); got != want {
					t.Errorf("kind %q, want %q", got, want)
				}
			})
		}
	}
}

// histogramCount is the number of observations of archiver_ttl_lag_seconds
// for table.
func histogramCount(t *testing.T, reg *prometheus.Registry, table string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "archiver_ttl_lag_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == table {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
