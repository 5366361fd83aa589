package consumer

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/ttl-archiver/archiver/event/eventtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestPastTTLWarnerPerTable: each table warns at its first past-TTL user
// delete and then at most once per minute of the warner's clock; records
// that past-ttl would not call expiries (DynamoDB's TTL deletes, a live
// item's delete, inserts) and an unknown attribute count nothing.
func TestPastTTLWarnerPerTable(t *testing.T) {
	passed := eventtest.Record(types.OperationTypeRemove, nil, "1") // TTL 03:00, deleted 03:04:05
	live := eventtest.Record(types.OperationTypeRemove, nil, "2")
	eventtest.WithTTL(eventtest.Num("1767326400"))(&live) // 04:00
	ttlDelete := eventtest.Record(types.OperationTypeRemove, eventtest.TTLService(), "3")
	insert := eventtest.Record(types.OperationTypeInsert, nil, "4")

	now := time.Unix(1000, 0)
	core, logs := observer.New(zapcore.WarnLevel)
	m := newMetrics(nil)
	w := newPastTTLWarner(func() time.Time { return now }, zap.New(core), m, nil)
	steps := []struct {
		advance  time.Duration
		table    string
		attr     string
		recs     []types.Record
		warnings int // in total after the step
	}{
		{0, "a", "expires", []types.Record{live, ttlDelete, insert}, 0},
		{0, "a", "", []types.Record{passed}, 0},
		{0, "a", "expires", []types.Record{passed, live, passed}, 1},
		{0, "b", "expires", []types.Record{passed}, 2},
		{59 * time.Second, "a", "expires", []types.Record{passed}, 2},
		{0, "b", "expires", []types.Record{passed}, 2},
		{time.Second, "a", "expires", []types.Record{passed}, 3},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		w.note(s.table, s.attr, s.recs)
		if n := logs.Len(); n != s.warnings {
			t.Fatalf("step %d: %d warnings, want %d", i, n, s.warnings)
		}
	}
	last := logs.All()[2].ContextMap()
	if last["table"] != "a" || last["deletes"] != int64(2) {
		t.Errorf("last warning %v, want table a with 2 deletes (one held back, one new)", last)
	}
	if a, b := metricValue(m.ttlPassedUserDeletes.WithLabelValues("a")), metricValue(m.ttlPassedUserDeletes.WithLabelValues("b")); a != 4 || b != 2 {
		t.Errorf("counted a=%v b=%v, want 4 and 2", a, b)
	}
}

// TestPastTTLWarnerGlobalTable: on a global table the past-TTL plain
// deletes are other Regions' expiries replicated here: counted apart and
// said at INFO, never a WARN or the user-delete counter (whose alarm means
// a sweeper beside a service archiver).
func TestPastTTLWarnerGlobalTable(t *testing.T) {
	passed := eventtest.Record(types.OperationTypeRemove, nil, "1")
	now := time.Unix(1000, 0)
	core, logs := observer.New(zapcore.InfoLevel)
	m := newMetrics(nil)
	w := newPastTTLWarner(func() time.Time { return now }, zap.New(core), m, []string{"sessions"})
	w.note("sessions", "expires", []types.Record{passed, passed})
	w.note("carts", "expires", []types.Record{passed})
	if got := metricValue(m.replicatedTTLDeletes.WithLabelValues("sessions")); got != 2 {
		t.Errorf("replicated deletes of sessions = %v, want 2", got)
	}
	if got := metricValue(m.ttlPassedUserDeletes.WithLabelValues("sessions")); got != 0 {
		t.Errorf("user deletes of sessions = %v, want 0", got)
	}
	if got := metricValue(m.ttlPassedUserDeletes.WithLabelValues("carts")); got != 1 {
		t.Errorf("user deletes of carts = %v, want 1", got)
	}
	all := logs.All()
	if len(all) != 2 || all[0].Level != zapcore.InfoLevel || all[1].Level != zapcore.WarnLevel ||
		all[0].ContextMap()["table"] != "sessions" || all[1].ContextMap()["table"] != "carts" {
		t.Fatalf("logs %v, want an INFO for sessions and a WARN for carts", all)
	}
}
