package consumer

import (
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
)

// pastTTLWarnEvery is the least time between two warnings about one
// table's past-TTL user deletes.
const pastTTLWarnEvery = time.Minute

// pastTTLWarner speaks, under [event.ExpiredWhenService], about the REMOVEs that
// [event.ExpiredWhenPastTTL] would call expiries: made without DynamoDB's TTL
// identity after the item's TTL had passed (a sweeper's deletes, TTL
// deletes replicated from another region of a global table). They stay
// Deleted; each is counted in archiver_ttl_passed_user_deletes_total, and
// a table that has any is logged at WARN at most once per
// pastTTLWarnEvery, with the number since the last warning. Without it a
// sweeper beside a service-mode archiver empties an expired-only archive
// in silence.
//
// On a global table those deletes are mostly the expiries other Regions'
// TTL performed, replicated here as plain deletes: expected, and archived
// from those Regions' streams (GlobalCheck judged at start-up whether
// anyone reads them). They are counted apart
// (archiver_replicated_ttl_deletes_total) and said at INFO, so the alarm
// on archiver_ttl_passed_user_deletes_total keeps meaning "a sweeper
// beside a service archiver".
type pastTTLWarner struct {
	now    func() time.Time
	log    *zap.Logger
	m      *metrics
	global map[string]bool // Config.GlobalTables

	mu     sync.Mutex
	tables map[string]*pastTTLTable
}

type pastTTLTable struct {
	warned time.Time // last warning; zero before the first
	since  int       // such deletes counted since then
}

func newPastTTLWarner(now func() time.Time, log *zap.Logger, m *metrics, global []string) *pastTTLWarner {
	w := &pastTTLWarner{now: now, log: log, m: m, tables: map[string]*pastTTLTable{}, global: map[string]bool{}}
	for _, t := range global {
		w.global[t] = true
	}
	return w
}

// note counts recs' REMOVEs that would be expiries under past-ttl, by the
// table's TTL attribute ("" when unknown: nothing is counted), and warns
// when the table's last warning is pastTTLWarnEvery old.
func (w *pastTTLWarner) note(table, attr string, recs []types.Record) {
	if attr == "" {
		return
	}
	n := 0
	for i := range recs {
		if expiresOnlyPastTTL(&recs[i], attr) {
			n++
		}
	}
	if n == 0 {
		return
	}
	global := w.global[table]
	if global {
		w.m.replicatedTTLDeletes.WithLabelValues(table).Add(float64(n))
	} else {
		w.m.ttlPassedUserDeletes.WithLabelValues(table).Add(float64(n))
	}
	now := w.now()
	w.mu.Lock()
	t := w.tables[table]
	if t == nil {
		t = &pastTTLTable{}
		w.tables[table] = t
	}
	t.since += n
	since := t.since
	warn := t.warned.IsZero() || now.Sub(t.warned) >= pastTTLWarnEvery
	if warn {
		t.warned, t.since = now, 0
	}
	w.mu.Unlock()
	switch {
	case warn && global:
		w.log.Info("items whose TTL had passed were deleted without DynamoDB's TTL identity on a global table: expected for the expiries "+
			"another Region's TTL performed, which reach this Region's stream as plain deletes and are archived from that Region's stream "+
			"(by the archiver there, or by one reading it with --regions); a sweeper's deletes would be archived by no service archiver "+
			"(run one archiver with --expired-when past-ttl in one Region instead)",
			zap.String("table", table), zap.String("ttl_attribute", attr), zap.Int("deletes", since),
			zap.Duration("log_interval", pastTTLWarnEvery))
	case warn:
		w.log.Warn("items whose TTL had passed were deleted without DynamoDB's TTL identity (a sweeper such as archiver sweep, or TTL deletes replicated from another region): they are archived as deleted, not expired, under --expired-when service; run with --expired-when past-ttl to archive them as expiries",
			zap.String("table", table), zap.String("ttl_attribute", attr), zap.Int("deletes", since),
			zap.Duration("warning_interval", pastTTLWarnEvery))
	}
}

// expiresOnlyPastTTL reports whether r is a REMOVE that [event.Classify]
// calls Deleted and [event.ClassifyWith] under [event.ExpiredWhenPastTTL]
// calls Expired.
func expiresOnlyPastTTL(r *types.Record, attr string) bool {
	return r.EventName == types.OperationTypeRemove && !event.IsTTLDelete(r) && event.TTLPassed(r.Dynamodb, attr)
}
