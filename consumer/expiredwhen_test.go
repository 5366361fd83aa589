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
	"github.com/ttl-archiver/archiver/shard"
)

// created is the creation second of rec's records (2026-01-02T03:04:05Z).
const created = 1767323045

// withTTL sets the "expires" attribute of r's old image (nil: removes it).
func withTTL(av types.AttributeValue) func(*types.Record) {
	return func(r *types.Record) {
		if av == nil {
			delete(r.Dynamodb.OldImage, "expires")
			return
		}
		r.Dynamodb.OldImage["expires"] = av
	}
}

func num(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }

// TestClassifyWith: each case's kind under service and under past-ttl.
func TestClassifyWith(t *testing.T) {
	ttlSvc := ident("Service", "dynamodb.amazonaws.com")
	cases := []struct {
		name            string
		op              types.OperationType
		id              *types.Identity
		attr            string
		mutate          func(*types.Record)
		service, pastTT event.Kind
	}{
		{"service delete", types.OperationTypeRemove, ttlSvc, "expires", nil, event.Expired, event.Expired},
		{"service delete, attribute unknown", types.OperationTypeRemove, ttlSvc, "", nil, event.Expired, event.Expired},
		{"sweeper delete, TTL 245 s before", types.OperationTypeRemove, nil, "expires", nil, event.Deleted, event.Expired},
		{"user delete of a live item", types.OperationTypeRemove, nil, "expires", withTTL(num("1767326400")), event.Deleted, event.Deleted},
		{"TTL is the creation second", types.OperationTypeRemove, nil, "expires", withTTL(num("1767323045")), event.Deleted, event.Expired},
		{"TTL the second after creation", types.OperationTypeRemove, nil, "expires", withTTL(num("1767323046")), event.Deleted, event.Deleted},
		{"TTL one second before creation", types.OperationTypeRemove, nil, "expires", withTTL(num("1767323044")), event.Deleted, event.Expired},
		{"fractional TTL before the creation second", types.OperationTypeRemove, nil, "expires", withTTL(num("1767323044.75")), event.Deleted, event.Expired},
		{"fractional TTL inside the creation second", types.OperationTypeRemove, nil, "expires", withTTL(num("1767323045.999999999")), event.Deleted, event.Expired},
		{"fractional TTL just after the creation second", types.OperationTypeRemove, nil, "expires", withTTL(num("1767323046.0000000001")), event.Deleted, event.Deleted},
		{"exponent TTL", types.OperationTypeRemove, nil, "expires", withTTL(num("1.767323e9")), event.Deleted, event.Expired},
		{"sub-second creation time read to the second", types.OperationTypeRemove, nil, "expires", func(r *types.Record) {
			r.Dynamodb.OldImage["expires"] = num("1767323045.5")
			at := time.Unix(created, 400_000_000).UTC()
			r.Dynamodb.ApproximateCreationDateTime = &at
		}, event.Deleted, event.Expired},
		{"TTL five years before", types.OperationTypeRemove, nil, "expires", withTTL(num("1609643045")), event.Deleted, event.Expired},
		{"TTL more than five years before", types.OperationTypeRemove, nil, "expires", withTTL(num("1609643044")), event.Deleted, event.Deleted},
		{"TTL zero", types.OperationTypeRemove, nil, "expires", withTTL(num("0")), event.Deleted, event.Deleted},
		{"missing TTL", types.OperationTypeRemove, nil, "expires", withTTL(nil), event.Deleted, event.Deleted},
		{"TTL attribute unknown", types.OperationTypeRemove, nil, "", nil, event.Deleted, event.Deleted},
		{"non-Number TTL", types.OperationTypeRemove, nil, "expires", withTTL(&types.AttributeValueMemberS{Value: "1767322800"}), event.Deleted, event.Deleted},
		{"Number that is not epoch seconds", types.OperationTypeRemove, nil, "expires", withTTL(num("-1")), event.Deleted, event.Deleted},
		{"KEYS_ONLY", types.OperationTypeRemove, nil, "expires", func(r *types.Record) { r.Dynamodb.OldImage = nil }, event.Deleted, event.Deleted},
		{"no creation time", types.OperationTypeRemove, nil, "expires", func(r *types.Record) { r.Dynamodb.ApproximateCreationDateTime = nil }, event.Deleted, event.Deleted},
		{"no stream record", types.OperationTypeRemove, nil, "expires", func(r *types.Record) { r.Dynamodb = nil }, event.Deleted, event.Deleted},
		{"insert with a past TTL", types.OperationTypeInsert, nil, "expires", nil, event.Inserted, event.Inserted},
		{"modify with a past TTL", types.OperationTypeModify, nil, "expires", nil, event.Modified, event.Modified},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rec(c.op, c.id, "1")
			if c.mutate != nil {
				c.mutate(&r)
			}
			for when, want := range map[ExpiredWhen]event.Kind{ExpiredWhenService: c.service, ExpiredWhenPastTTL: c.pastTT} {
				got, err := ClassifyWith(r, when, c.attr)
				if err != nil || got != want {
					t.Errorf("%v: ClassifyWith = %q, %v; want %q", when, got, err, want)
				}
			}
			if got, _ := Classify(r); got != c.service {
				t.Errorf("Classify = %q, want %q (service)", got, c.service)
			}
		})
	}
	if _, err := ClassifyWith(types.Record{EventName: "TRUNCATE"}, ExpiredWhenPastTTL, "expires"); err == nil {
		t.Error("ClassifyWith accepted an unknown event name")
	}
}

// TestDecodeDeletedBy: every REMOVE says who made it; a past-ttl expiry
// gets its TTL values as a service expiry does.
func TestDecodeDeletedBy(t *testing.T) {
	cases := []struct {
		name      string
		op        types.OperationType
		id        *types.Identity
		when      ExpiredWhen
		kind      event.Kind
		deletedBy string
		ttl       bool
	}{
		{"service expiry", types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), ExpiredWhenService, event.Expired, event.DeletedByTTL, true},
		{"service expiry under past-ttl", types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), ExpiredWhenPastTTL, event.Expired, event.DeletedByTTL, true},
		{"swept under service", types.OperationTypeRemove, nil, ExpiredWhenService, event.Deleted, event.DeletedByOther, false},
		{"swept under past-ttl", types.OperationTypeRemove, nil, ExpiredWhenPastTTL, event.Expired, event.DeletedByOther, true},
		{"other principal", types.OperationTypeRemove, ident("Service", "lambda.amazonaws.com"), ExpiredWhenPastTTL, event.Expired, event.DeletedByOther, true},
		{"insert", types.OperationTypeInsert, nil, ExpiredWhenPastTTL, event.Inserted, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := decode("tbl", "arn", "s", 0, rec(c.op, c.id, "1"), "expires", c.when)
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind != c.kind || e.DeletedBy != c.deletedBy {
				t.Fatalf("kind %q deletedBy %q, want %q %q", e.Kind, e.DeletedBy, c.kind, c.deletedBy)
			}
			wantLag := time.Duration(0)
			if c.ttl {
				wantLag = 245 * time.Second
			}
			if (e.TTLValue != "") != c.ttl || e.TTLLag != wantLag || e.TTLTime.IsZero() == c.ttl {
				t.Errorf("TTL value %q time %v lag %v", e.TTLValue, e.TTLTime, e.TTLLag)
			}
		})
	}
}

func TestParseExpiredWhen(t *testing.T) {
	for s, want := range map[string]ExpiredWhen{"service": ExpiredWhenService, "past-ttl": ExpiredWhenPastTTL} {
		got, err := ParseExpiredWhen(s)
		if err != nil || got != want || got.String() != s {
			t.Errorf("ParseExpiredWhen(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "Service", "past_ttl", "ttl"} {
		if _, err := ParseExpiredWhen(s); err == nil || !strings.Contains(err.Error(), "service or past-ttl") {
			t.Errorf("ParseExpiredWhen(%q): err %v", s, err)
		}
	}
	if s := ExpiredWhen(7).String(); s != "ExpiredWhen(7)" {
		t.Errorf("String of a bad value: %q", s)
	}
}

func TestNewValidatesExpiredWhen(t *testing.T) {
	good := Config{Streams: nopStreams{}, StreamARNs: []string{testARN}, Store: newMemStore(), Routes: []Route{{Sink: newFakeSink("a")}}}
	for name, mod := range map[string]func(*Config){
		"out of range":           func(c *Config) { c.ExpiredWhen = 2 },
		"negative":               func(c *Config) { c.ExpiredWhen = -1 },
		"past-ttl without table": func(c *Config) { c.ExpiredWhen = ExpiredWhenPastTTL },
	} {
		c := good
		mod(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "Config.ExpiredWhen") {
			t.Errorf("%s: New error %v, want one naming Config.ExpiredWhen", name, err)
		}
	}
	c := good
	c.ExpiredWhen, c.Tables = ExpiredWhenPastTTL, tablesAPI{}
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
	remove := []types.Record{rec(types.OperationTypeInsert, nil, "1"), rec(types.OperationTypeRemove, nil, "2")}
	inserts := []types.Record{rec(types.OperationTypeInsert, nil, "1")}
	for _, when := range []ExpiredWhen{ExpiredWhenService, ExpiredWhenPastTTL} {
		api := &ttlAPI{err: errors.New("throttled")}
		now := time.Unix(1000, 0)
		c := &Consumer{cfg: Config{ExpiredWhen: when}, ttl: newTTLCache(api, time.Minute, func() time.Time { return now }, zap.NewNop(), newMetrics(nil))}
		if attr, err := c.ttlAttribute(ctx, "tbl", inserts); attr != "" || err != nil || api.calls != 0 {
			t.Fatalf("%v: no REMOVE: %q, %v after %d calls", when, attr, err, api.calls)
		}
		attr, err := c.ttlAttribute(ctx, "tbl", remove)
		if when == ExpiredWhenService {
			// Looked up for the past-TTL warning, and the failure lets the
			// batch through.
			if attr != "" || err != nil || api.calls != 1 {
				t.Fatalf("service: a user delete with the lookup failing: %q, %v after %d calls; want \"\", nil after 1", attr, err, api.calls)
			}
			keysOnly := rec(types.OperationTypeRemove, nil, "3")
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
	sink := newFakeSink("expired-only")
	reg := prometheus.NewRegistry()
	c := newUnitConsumer(t, newMemStore(), func(c *Config) {
		c.ExpiredWhen, c.Tables, c.Registerer = ExpiredWhenPastTTL, tablesAPI{TTLAPI: api}, reg
	}, Route{Sink: sink})
	live := rec(types.OperationTypeRemove, nil, seqOf(2))
	withTTL(num("1767326400"))(&live)
	b := shard.Batch{Table: "tbl", StreamARN: testARN, ShardID: "s", Records: []types.Record{
		rec(types.OperationTypeRemove, nil, seqOf(1)), live,
		rec(types.OperationTypeRemove, ident("Service", "dynamodb.amazonaws.com"), seqOf(3)),
	}}
	if err := c.process(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two expiries", func() bool { return len(sink.events()) == 2 })
	evs := sink.events()
	if evs[0].DeletedBy != event.DeletedByOther || evs[1].DeletedBy != event.DeletedByTTL || evs[0].TTLLag != 245*time.Second {
		t.Fatalf("events %+v", evs)
	}
	if n := histogramCount(t, reg, "tbl"); n != 2 {
		t.Errorf("TTL lag observations: %d, want 2", n)
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
