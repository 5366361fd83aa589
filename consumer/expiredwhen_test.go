package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// ident is a userIdentity of the given type and principal.
func ident(typ, principal string) *types.Identity {
	return &types.Identity{Type: aws.String(typ), PrincipalId: aws.String(principal)}
}

// rec is a record of the given event name, userIdentity and sequence
// number, created 2026-01-02T03:04:05Z, whose old image's "expires" is
// 2026-01-02T03:00:00Z.
func rec(name types.OperationType, id *types.Identity, seq string) types.Record {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return types.Record{
		EventID:      aws.String("ev-" + seq),
		EventName:    name,
		UserIdentity: id,
		Dynamodb: &types.StreamRecord{
			SequenceNumber:              aws.String(seq),
			ApproximateCreationDateTime: &t,
			SizeBytes:                   aws.Int64(42),
			Keys:                        map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k1"}},
			OldImage: map[string]types.AttributeValue{
				"pk":      &types.AttributeValueMemberS{Value: "k1"},
				"expires": &types.AttributeValueMemberN{Value: "1767322800"}, // 2026-01-02T03:00:00Z
				"blob":    &types.AttributeValueMemberB{Value: []byte{0, 1, 2}},
				"set":     &types.AttributeValueMemberNS{Value: []string{"1", "2.50"}},
			},
		},
	}
}

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
	remove := []types.Record{rec(types.OperationTypeInsert, nil, "1"), rec(types.OperationTypeRemove, nil, "2")}
	inserts := []types.Record{rec(types.OperationTypeInsert, nil, "1")}
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
	sink := sinktest.New("expired-only")
	reg := prometheus.NewRegistry()
	c := newUnitConsumer(t, newMemStore(), func(c *Config) {
		c.ExpiredWhen, c.Tables, c.Registerer = event.ExpiredWhenPastTTL, tablesAPI{TTLAPI: api}, reg
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
	eventually.True(t, 2*time.Minute, "two expiries", func() bool { return len(sink.Events()) == 2 })
	evs := sink.Events()
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
