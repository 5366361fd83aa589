package sweep

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

// windowOf reads an item's window attribute.
func windowOf(it map[string]types.AttributeValue) string {
	return it[DefaultWindowAttribute].(*types.AttributeValueMemberS).Value
}

// named makes n items named prefix-i with one TTL.
func named(prefix string, n int, ttl time.Time) []item {
	items := make([]item, n)
	for i := range items {
		items[i] = item{pk: prefix + "-" + string(rune('a'+i)), ttl: ttl}
	}
	return items
}

// writeFirst returns a beforeDelete hook that, the first time the
// sweeper deletes an item, has a writer get there first: it extends the
// TTL of "moved-" items to later and files them anew, extends that of
// "kept-" items but keeps their window, and deletes "gone-" items.
func writeFirst(t *testing.T, b *bed, later time.Time) func(*dynamodb.DeleteItemInput) {
	var once sync.Map
	return func(in *dynamodb.DeleteItemInput) {
		pk := in.Key["pk"].(*types.AttributeValueMemberS).Value
		if _, done := once.LoadOrStore(pk, true); done {
			return
		}
		var err error
		switch kind, _, _ := strings.Cut(pk, "-"); kind {
		case "moved", "kept":
			upd := &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: in.Key,
				UpdateExpression:          aws.String("SET #t = :t"),
				ExpressionAttributeNames:  map[string]string{"#t": "ttl"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberN{Value: epoch(later)}},
			}
			if kind == "moved" {
				upd.UpdateExpression = aws.String("SET #t = :t, #w = :w")
				upd.ExpressionAttributeNames["#w"] = DefaultWindowAttribute
				upd.ExpressionAttributeValues[":w"] = &types.AttributeValueMemberS{Value: Window(later, time.Minute, 1)}
			}
			_, err = b.db.UpdateItem(context.Background(), upd)
		case "gone":
			_, err = b.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: in.Key})
		}
		if err != nil {
			t.Error(err)
		}
	}
}

func TestExtendedTTLs(t *testing.T) {
	b := newBed(t, bedOptions{})
	later := at(30 * time.Minute)
	items := named("plain", 5, at(10*time.Second))
	items = append(items, named("moved", 3, at(10*time.Second))...) // the writer files it anew
	items = append(items, named("kept", 3, at(10*time.Second))...)  // the writer keeps the old window
	items = append(items, named("gone", 2, at(10*time.Second))...)  // deleted by someone else
	// Extended before the sweeper ever saw it, its window kept.
	stale := item{pk: "stale", ttl: at(5 * time.Minute), window: Window(at(10*time.Second), time.Minute, 1)}
	b.put(append(items, stale)...)

	b.api.beforeDelete = writeFirst(t, b, later)
	s := b.sweeper(nil)

	b.clock.Set(at(11 * time.Second))
	st := b.pass(s)
	if st.Deleted != 5 || st.Extended != 6 || st.Gone != 2 || st.Refiled != 0 {
		t.Fatalf("first pass: %+v, want 5 deleted, 6 extended, 2 gone", st)
	}
	if left := b.remaining(); len(left) != 7 {
		t.Fatalf("%d items left, want the 6 extended ones and the stale one", len(left))
	}

	// The first window closes: the items whose writer kept it are
	// re-filed in the window of their TTL, and swept there.
	b.clock.Set(at(2*time.Minute + time.Millisecond))
	st = b.pass(s)
	checkCursor(t, b, s, st)
	if st.Refiled != 4 || st.Deleted != 0 {
		t.Fatalf("closing pass: %+v, want 4 re-filed", st)
	}
	for pk, it := range b.remaining() {
		ttl, _ := parseTTL(it["ttl"])
		if want := Window(time.UnixMilli(ttl.ms), time.Minute, 1); windowOf(it) != want {
			t.Fatalf("%s is in window %s, want %s", pk, windowOf(it), want)
		}
	}
	all := append(items, stale)
	for i := range all {
		if strings.HasPrefix(all[i].pk, "kept") || strings.HasPrefix(all[i].pk, "moved") {
			all[i].ttl = later
		}
	}
	for _, now := range []time.Time{stale.ttl, stale.ttl.Add(time.Millisecond), later, later.Add(time.Millisecond)} {
		b.clock.Set(now)
		st = b.pass(s)
		b.checkDue(all)
	}
	for reason, want := range map[string]float64{reasonExtended: 6, reasonGone: 2, reasonNotNumber: 0} {
		if got := value(t, s.m.skipped.WithLabelValues(reason)); got != want {
			t.Errorf("skipped{reason=%s} = %v, want %v", reason, got, want)
		}
	}
	if got := value(t, s.m.refiled); got != 4 {
		t.Errorf("refiled = %v, want 4", got)
	}
	if got := value(t, s.m.lag); got != 12 {
		t.Errorf("lag observations = %v, want one per deleted item (12)", got)
	}
}

func TestExtendedWhileClosing(t *testing.T) {
	b := newBed(t, bedOptions{})
	later := at(30 * time.Minute)
	items := append(named("plain", 2, at(10*time.Second)), named("kept", 3, at(10*time.Second))...)
	b.put(items...)
	b.api.beforeDelete = writeFirst(t, b, later)
	s := b.sweeper(nil)
	b.clock.Set(at(2*time.Minute + time.Millisecond))
	st := b.pass(s)
	if st.Deleted != 2 || st.Extended != 3 || !st.Cursor.Equal(at(0)) {
		t.Fatalf("%+v: want 2 deleted, 3 extended, and the cursor held at the window they are still filed in", st)
	}
	st = b.pass(s)
	if st.Refiled != 3 {
		t.Fatalf("%+v: want the 3 extended items re-filed", st)
	}
	checkCursor(t, b, s, st)
	for i := range items {
		if strings.HasPrefix(items[i].pk, "kept") {
			items[i].ttl = later
		}
	}
	for _, now := range []time.Time{later, later.Add(time.Millisecond)} {
		b.clock.Set(now)
		b.pass(s)
		b.checkDue(items)
	}
}

func TestLargeWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		now  time.Duration
	}{
		{"open", 59 * time.Second},
		{"closing", 2*time.Minute + time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, bedOptions{projection: types.ProjectionTypeAll})
			blob := &types.AttributeValueMemberB{Value: make([]byte, 4096)}
			items := make([]item, 400) // 1.6 MB in one window
			for i := range items {
				items[i] = item{pk: "big-" + string(rune('A'+i%26)) + time.Duration(i).String(), ttl: at(time.Duration(i) * 100 * time.Millisecond), extra: map[string]types.AttributeValue{"blob": blob}}
			}
			b.put(items...)
			s := b.sweeper(nil)
			b.clock.Set(at(tc.now))
			st := b.pass(s)
			if st.Deleted != len(items) {
				t.Fatalf("%+v, want %d deleted", st, len(items))
			}
			if pages := b.api.pagesOf(Window(at(0), time.Minute, 1)); pages < 2 {
				t.Fatalf("the window was read in %d pages, want more than one", pages)
			}
			b.checkDue(items)
		})
	}
}

func TestCatchUpAfterDowntime(t *testing.T) {
	const w = 10 * time.Second
	b := newBed(t, bedOptions{window: w})
	s := b.sweeper(nil)
	b.pass(s)
	var items []item
	for i := range 200 {
		items = append(items, item{pk: "w-" + time.Duration(i).String(), ttl: at(time.Duration(i)*w + time.Duration(i%10)*time.Second)})
	}
	b.put(items...)
	b.api.takeQueries()
	_, saves := b.store.cursor()

	b.clock.Set(at(200*w + 35*time.Second)) // down for 200 windows
	st := b.pass(s)
	b.checkDue(items)
	checkCursor(t, b, s, st)

	queries := b.api.takeQueries()
	from := WindowStart(at(-2*w), w) // the cursor's first window
	for i, q := range queries {
		if want := Window(from.Add(time.Duration(i)*w), w, 1); q != want {
			t.Fatalf("query %d was of window %s, want %s: windows are queried once each, oldest first", i, q, want)
		}
	}
	if last := WindowStart(b.clock.Now(), w); len(queries) != int(last.Sub(from)/w)+1 {
		t.Fatalf("%d windows queried, want every one from %v to %v", len(queries), from, last)
	}
	_, after := b.store.cursor()
	if n := len(after) - len(saves); n < 3 {
		t.Fatalf("the catch-up saved the cursor %d times, want once every %d windows", n, s.windowsPerSave)
	}
}

func TestRunResumesFromTheStoredCursor(t *testing.T) {
	const w = 10 * time.Second
	b := newBed(t, bedOptions{window: w})
	b.store.c = Cursor{Window: at(0)} // where a killed sweeper left it
	var items []item
	for i := range 50 {
		items = append(items, item{pk: "r-" + time.Duration(i).String(), ttl: at(time.Duration(i)*w + 5*time.Second)})
	}
	behind := item{pk: "behind-the-cursor", ttl: at(-time.Minute)} // DynamoDB's TTL's to delete
	b.put(append(items, behind)...)
	b.clock.Set(at(50*w + 30*time.Second))
	s := b.sweeper(func(c *Config) { c.Interval = 5 * time.Millisecond })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	want := wantCursor(b.clock.Now(), w, w)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if c, _ := b.store.cursor(); c.Window.Equal(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cursor never reached", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil once its context ends", err)
	}
	if q := b.api.takeQueries(); q[0] != Window(at(0), w, 1) {
		t.Fatalf("the first query was of %s, want the stored cursor's window", q[0])
	}
	b.checkDue(items)
	if _, ok := b.remaining()[behind.pk]; !ok {
		t.Fatal("an item behind the cursor was swept")
	}
}

// failEvery fails every n-th call of each of the given operations with
// err.
func failEvery(n int64, err error, ops ...string) func(string, *http.Request) error {
	var mu sync.Mutex
	calls := map[string]int64{}
	return func(op string, _ *http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range ops {
			if o == op {
				if calls[op]++; calls[op]%n == 0 {
					return err
				}
			}
		}
		return nil
	}
}

func TestThrottlingAndErrors(t *testing.T) {
	for _, tc := range []struct {
		code     string
		status   int
		throttle bool
	}{
		{"ProvisionedThroughputExceededException", 400, true},
		{"ThrottlingException", 400, true},
		{"RequestLimitExceeded", 400, true},
		{"InternalServerError", 500, false},
		{"ServiceUnavailable", 503, false},
	} {
		t.Run(tc.code, func(t *testing.T) {
			b := newBed(t, bedOptions{hook: failEvery(2, engine.NewError(tc.code, "injected", tc.status), "Query", "DeleteItem", "UpdateItem")})
			items := named("due", 20, at(10*time.Second))
			stale := named("stale", 5, at(10*time.Minute))
			for i := range stale {
				stale[i].window = Window(at(0), time.Minute, 1)
			}
			b.put(append(items, stale...)...)
			s := b.sweeper(nil)
			b.clock.Set(at(2*time.Minute + time.Millisecond))
			st := b.pass(s)
			if st.Deleted != 20 || st.Refiled != 5 {
				t.Fatalf("%+v, want 20 deleted and 5 re-filed", st)
			}
			failed, other := st.Throttles, st.Errors
			if !tc.throttle {
				failed, other = other, failed
			}
			if failed < 10 || other != 0 {
				t.Fatalf("%+v: want half the calls failed with %s", st, tc.code)
			}
			checkCursor(t, b, s, st)
			b.checkDue(append(items, stale...))
		})
	}
}

func TestUnfinishedWindowStaysOpen(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	b := newBed(t, bedOptions{hook: func(op string, _ *http.Request) error {
		if op == "DeleteItem" && failing.Load() {
			return engine.Throttle()
		}
		return nil
	}})
	items := named("due", 10, at(10*time.Second))
	b.put(items...)
	s := b.sweeper(nil)
	s.attempts = 3
	b.clock.Set(at(2*time.Minute + time.Millisecond))
	st, err := s.Pass(context.Background())
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) || st.Deleted != 0 || st.Throttles != 30 {
		t.Fatalf("Pass = %+v, %v; want 30 throttles and the throttling error", st, err)
	}
	if !st.Cursor.Equal(at(0)) {
		t.Fatalf("the cursor moved to %v, past the window with items left", st.Cursor)
	}
	failing.Store(false)
	st = b.pass(s)
	checkCursor(t, b, s, st)
	b.checkDue(items)
}

func TestRunRetriesItsStart(t *testing.T) {
	var fails atomic.Int64
	fails.Store(2)
	b := newBed(t, bedOptions{hook: func(op string, _ *http.Request) error {
		if op == "DescribeTable" && fails.Add(-1) >= 0 {
			return engine.NewError("InternalServerError", "injected", 500)
		}
		return nil
	}})
	s := b.sweeper(func(c *Config) { c.Interval = 5 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if c, _ := b.store.cursor(); !c.Window.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never made a pass")
		}
	}
	cancel()
	if err := <-done; err != nil || fails.Load() >= 0 {
		t.Fatalf("Run = %v after %d failures left, want nil after retrying both", err, fails.Load())
	}
}
