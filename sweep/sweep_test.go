package sweep

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value reads a counter or a gauge, or a histogram's count.
func value(t *testing.T, c any) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
}

// wantCursor is where the cursor stands once every window that ended more
// than grace before now is closed.
func wantCursor(now time.Time, window, grace time.Duration) time.Time {
	x := now.Add(-grace - window)
	c := WindowStart(x, window)
	if c.Before(x) {
		c = c.Add(window)
	}
	return c
}

// checkCursor fails unless the sweeper's stats, the store and the
// metrics agree that the cursor stands where it should.
func checkCursor(t *testing.T, b *bed, s *Sweeper, st PassStats) {
	t.Helper()
	now := b.clock.Now()
	want := wantCursor(now, b.window, s.cfg.Grace)
	stored, _ := b.store.cursor()
	if !st.Cursor.Equal(want) || !stored.Window.Equal(want) {
		t.Fatalf("at %v the cursor is %v (stored %v), want %v", now, st.Cursor, stored.Window, want)
	}
	behind := float64((now.UnixMilli() - want.UnixMilli()) / b.window.Milliseconds())
	if got := value(t, s.m.behind); got != behind {
		t.Fatalf("windows behind = %v, want %v", got, behind)
	}
	if got, want := value(t, s.m.cursorAge), now.Sub(want).Seconds(); got != want {
		t.Fatalf("cursor age = %v, want %v", got, want)
	}
}

func TestWindowEdges(t *testing.T) {
	b := newBed(t, bedOptions{})
	const w, ms = time.Minute, time.Millisecond
	items := []item{
		{pk: "start", ttl: at(w)},
		{pk: "last-ms", ttl: at(2*w - ms)},
		{pk: "end", ttl: at(2 * w)},
		{pk: "last-ms-before", ttl: at(w - ms)},
		{pk: "middle", ttl: at(w + 30*time.Second + 500*ms)},
		{pk: "now", ttl: at(0)},
	}
	b.put(items...)
	s := b.sweeper(nil)
	var steps []time.Time
	for _, it := range items {
		steps = append(steps, it.ttl.Add(-ms), it.ttl, it.ttl.Add(ms))
	}
	slices.SortFunc(steps, time.Time.Compare)
	steps = append(steps, at(4*w), at(4*w+ms))
	var st PassStats
	for _, now := range steps {
		b.clock.Set(now)
		st = b.pass(s)
		b.checkDue(items)
	}
	checkCursor(t, b, s, st)
	if got := value(t, s.m.deleted); got != float64(len(items)) {
		t.Fatalf("archiver_sweep_deleted_total = %v, want %d", got, len(items))
	}
}

func TestWindowsAndIntervals(t *testing.T) {
	tests := []struct {
		name         string
		window, step time.Duration
	}{
		{"window longer than the interval", time.Minute, time.Second},
		{"interval not dividing the window", time.Minute, 45 * time.Second},
		{"window shorter than the interval", 10 * time.Second, time.Minute},
		{"short window, odd interval", time.Second, 7300 * time.Millisecond},
		{"long window, long interval", 5 * time.Minute, 2 * time.Minute},
		{"neither divides the other", 7 * time.Second, 3 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, bedOptions{window: tc.window})
			const span = 3 * time.Minute
			items := spread("i", 60, at(0), span, tc.window)
			b.put(items...)
			s := b.sweeper(nil)
			var st PassStats
			for now := at(0); !now.After(at(span + 2*tc.window + tc.step)); now = now.Add(tc.step) {
				b.clock.Set(now)
				st = b.pass(s)
				b.checkDue(items)
			}
			checkCursor(t, b, s, st)
			if left := b.remaining(); len(left) != 0 {
				t.Fatalf("%d items left", len(left))
			}
		})
	}
}

func TestHotWindowShards(t *testing.T) {
	b := newBed(t, bedOptions{shards: 4})
	items := spread("hot", 200, at(0), 3*time.Minute, time.Minute)
	stale := named("stale", 3, at(10*time.Minute))
	for i := range stale {
		stale[i].window = Window(at(0), time.Minute, 4) // the writer kept the old window
	}
	b.put(append(items, stale...)...)
	s := b.sweeper(nil)
	for now := at(0); !now.After(at(5 * time.Minute)); now = now.Add(20 * time.Second) {
		b.clock.Set(now)
		checkCursor(t, b, s, b.pass(s))
		b.checkDue(append(items, stale...))
	}
	// Every window was queried in each of its shards, and only so.
	shards := map[string]map[int]bool{}
	for _, q := range b.api.takeQueries() {
		span, err := ParseWindow(q)
		if err != nil || span.Shard < 0 || span.Shard > 3 {
			t.Fatalf("queried %s (%v), want a shard of 0..3", q, err)
		}
		start := span.Start.String()
		if shards[start] == nil {
			shards[start] = map[int]bool{}
		}
		shards[start][span.Shard] = true
	}
	for start, seen := range shards {
		if len(seen) != 4 {
			t.Fatalf("window %s was queried in shards %v, want all 4", start, seen)
		}
	}
	for pk, it := range b.remaining() {
		span, err := ParseWindow(windowOf(it))
		if err != nil || span.Shard < 0 || !span.Contains(at(10*time.Minute)) {
			t.Fatalf("%s was re-filed in %s (%v), want a shard of the window of its TTL", pk, windowOf(it), err)
		}
	}
	b.clock.Set(at(10*time.Minute + time.Millisecond))
	b.pass(s)
	b.checkDue(append(items, stale...))
}

func TestMaxDeletesPerSecond(t *testing.T) {
	b := newBed(t, bedOptions{})
	items := spread("r", 120, at(0), time.Minute, time.Minute)
	b.put(items...)
	s := b.sweeper(func(c *Config) { c.MaxDeletesPerSecond = 300; c.Concurrency = 4 })
	s.limit.reset()
	b.clock.Set(at(time.Minute))
	st := b.pass(s)
	b.checkDue(items)
	granted, allowed := s.limit.allowance()
	if int(granted) != b.api.deleteCount() || st.Deleted != len(items) {
		t.Fatalf("the budget granted %d tokens for %d DeleteItem calls (%+v)", granted, b.api.deleteCount(), st)
	}
	if float64(granted) > allowed {
		t.Fatalf("%d deletes sent where the budget allowed %.1f", granted, allowed)
	}
	if n := b.api.maxIn.Load(); n > 4 {
		t.Fatalf("%d deletes in flight at once, want at most Concurrency (4)", n)
	}
}
