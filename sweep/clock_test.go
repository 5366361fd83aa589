package sweep

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/engine"
)

// TestClockSkewPausesDeletes: the sweeper's clock is checked against the
// engine's (the Date header of its responses, over HTTP). While the
// sweeper's clock is minutes ahead, passes delete nothing, close no
// window, count the pause and log it once; once the clocks agree again
// deletes resume by themselves.
func TestClockSkewPausesDeletes(t *testing.T) {
	b := newBed(t, bedOptions{})
	local := engine.NewManualClock(at(11 * time.Second)) // the sweeper's own clock
	b.clock.Set(at(11 * time.Second))
	core, logs := observer.New(zapcore.InfoLevel)
	s := b.sweeper(func(c *Config) { c.Now = local.Now; c.Logger = zap.New(core) })
	early := named("early", 3, at(10*time.Second))
	later := named("later", 3, at(40*time.Second))
	b.put(append(early, later...)...)

	if st := b.pass(s); st.Deleted != len(early) || st.Paused {
		t.Fatalf("clocks agree: %+v, want the 3 due items deleted", st)
	}
	if skew := value(t, s.m.clockSkew); math.Abs(skew) > 1 {
		t.Fatalf("archiver_sweep_clock_skew_seconds = %v with the clocks together, want within a second", skew)
	}
	cursor, _ := b.store.cursor()

	// The sweeper's clock jumps five minutes ahead; DynamoDB's moves 20 s.
	local.Set(at(5 * time.Minute))
	b.clock.Set(at(20 * time.Second))
	for i := range 3 {
		st, err := s.Pass(context.Background())
		if !errors.Is(err, ErrClockSkew) || !st.Paused || st.Deleted != 0 {
			t.Fatalf("pass %d with the clock 280 s ahead: %+v, %v; want a pause (ErrClockSkew) and nothing deleted", i, st, err)
		}
	}
	if left := b.remaining(); len(left) != len(later) {
		t.Fatalf("%d items left during the pause, want the %d not yet due by DynamoDB's clock", len(left), len(later))
	}
	if now, _ := b.store.cursor(); !now.Window.Equal(cursor.Window) {
		t.Fatalf("the cursor moved from %v to %v during the pause; a clock ahead closes no window", cursor.Window, now.Window)
	}
	if skew := value(t, s.m.clockSkew); math.Abs(skew+280) > 1 {
		t.Fatalf("archiver_sweep_clock_skew_seconds = %v, want about -280", skew)
	}
	if got := value(t, s.m.clockPaused); got != 3 {
		t.Fatalf("archiver_sweep_clock_paused_total = %v, want 3", got)
	}
	if n := logs.FilterMessageSnippet("deletes paused").Len(); n != 1 {
		t.Fatalf("the pause was logged %d times in one minute, want once", n)
	}

	// DynamoDB's clock catches up: the next pass deletes again.
	b.clock.Set(at(5 * time.Minute))
	st := b.pass(s)
	if st.Paused || st.Deleted != len(later) {
		t.Fatalf("clocks together again: %+v, want the 3 later items deleted", st)
	}
	checkCursor(t, b, s, st)
	if n := logs.FilterMessageSnippet("deletes resumed").Len(); n != 1 {
		t.Fatalf("the resumption was logged %d times, want once", n)
	}
}

// TestClockSkewSample: a sample takes DynamoDB's time as the middle of
// the Date header's second and ours as the middle of the round trip, and
// ignores what it cannot judge by.
func TestClockSkewSample(t *testing.T) {
	const date = "Tue, 01 Jan 2030 00:00:10 GMT" // at(10s)
	for _, tc := range []struct {
		name       string
		sent, recv time.Time
		date       string
		want       time.Duration
		used       bool
	}{
		{"together", at(10*time.Second + 400*time.Millisecond), at(10*time.Second + 600*time.Millisecond), date, 0, true},
		{"ours ahead", at(15 * time.Second), at(15 * time.Second), date, -4500 * time.Millisecond, true},
		{"ours behind", at(time.Second), at(time.Second + 200*time.Millisecond), date, 9400 * time.Millisecond, true},
		{"slow round trip", at(9 * time.Second), at(11*time.Second + time.Millisecond), date, 0, false},
		{"clock set back meanwhile", at(11 * time.Second), at(10 * time.Second), date, 0, false},
		{"no Date", at(10 * time.Second), at(10 * time.Second), "", 0, false},
		{"bad Date", at(10 * time.Second), at(10 * time.Second), "yesterday", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Client: b0{}, Table: "t", Cursor: newMemStore()})
			if err != nil {
				t.Fatal(err)
			}
			s.clock.sample(tc.sent, tc.recv, tc.date)
			got, used := s.clock.estimate()
			if used != tc.used || got != tc.want {
				t.Fatalf("sample = %v (used %v), want %v (used %v)", got, used, tc.want, tc.used)
			}
		})
	}
}

// b0 is a client no test of the sample calls.
type b0 struct{ DynamoAPI }
