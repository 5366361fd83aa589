package progress

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestBarRendersCountsRateAndETA(t *testing.T) {
	cases := []struct {
		name string
		c    Counts
		el   time.Duration
		want string
	}{
		{"objects known, items not", Counts{ObjectsDone: 4, ObjectsTotal: 10, ItemsDone: 1200}, 4 * time.Second,
			"restore [=========>              ]  40% objects 4/10 items 1200/? 300/s ETA 6s"},
		{"items known", Counts{ObjectsDone: 1, ObjectsTotal: 2, ItemsDone: 50000, ItemsTotal: 100000}, 2 * time.Second,
			"restore [============>           ]  50% objects 1/2 items 50000/100000 25.0k/s ETA 2s"},
		{"nothing known", Counts{ItemsDone: 5}, time.Second,
			"restore [                        ] objects 0/? items 5/? 5/s"},
		{"done", Counts{ObjectsDone: 3, ObjectsTotal: 3, ItemsDone: 9}, 3 * time.Second,
			"restore [========================] 100% objects 3/3 items 9/? 3/s ETA 0s"},
	}
	for _, c := range cases {
		if got := Bar("restore", c.c, c.el); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestTerminalRedrawsOneLineAndClearsIt(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var buf bytes.Buffer
	r := New(Options{Label: "replay", Out: &buf, TTY: true, Now: clk.Now, Interval: time.Hour})
	r.SetTotals(2, 0)
	r.AddObjects(1)
	r.AddItems(10)
	clk.Add(2 * time.Second)
	r.Tick()
	r.AddObjects(1)
	r.AddItems(10)
	clk.Add(2 * time.Second)
	r.Tick()
	stop := r.Start(context.Background())
	stop()
	stop() // idempotent
	want := "\rreplay [============>           ]  50% objects 1/2 items 10/? 5/s ETA 2s\x1b[K" +
		"\rreplay [========================] 100% objects 2/2 items 20/? 5/s ETA 0s\x1b[K" +
		"\r\x1b[K"
	if buf.String() != want {
		t.Errorf("got  %q\nwant %q", buf.String(), want)
	}
}

func TestOffTerminalLogsJSONAtIntervals(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var buf bytes.Buffer
	r := New(Options{Label: "restore", Out: &buf, Logger: zap.New(core), Now: clk.Now, Interval: 10 * time.Millisecond})
	r.SetTotals(4, 0)
	stop := r.Start(context.Background())
	r.AddObjects(2)
	r.AddItems(100)
	clk.Add(10 * time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for logs.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if buf.Len() != 0 {
		t.Errorf("off a terminal nothing is drawn, got %q", buf.String())
	}
	all := logs.All()
	if len(all) < 2 {
		t.Fatalf("want interval lines and a final line, got %d", len(all))
	}
	last := all[len(all)-1].ContextMap()
	if last["job"] != "restore" || last["objects_done"] != int64(2) || last["objects_total"] != int64(4) ||
		last["items_done"] != int64(100) || last["items_per_second"] != 10.0 || last["eta"] != 10*time.Second {
		t.Errorf("last progress line %v", last)
	}
}

func TestStartStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := New(Options{Label: "x", TTY: true, Out: &bytes.Buffer{}, Interval: time.Millisecond})
	stop := r.Start(ctx)
	cancel()
	stop()
}

func TestTablePrintsAligned(t *testing.T) {
	tb := KV("restore summary", "selected", 1200, "written", 1190, "skipped: item exists", 10)
	var buf bytes.Buffer
	if err := tb.Print(&buf); err != nil {
		t.Fatal(err)
	}
	want := "restore summary\n" +
		"  selected              1200\n" +
		"  written               1190\n" +
		"  skipped: item exists    10\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	multi := Table{Title: "per table", Header: []string{"table", "kind", "events"}}
	multi.Add("Sessions", "expired", 12)
	multi.Add("Carts", "deleted", 3)
	buf.Reset()
	_ = multi.Print(&buf)
	want = "per table\n" +
		"  table     kind     events\n" +
		"  --------  -------  ------\n" +
		"  Sessions  expired      12\n" +
		"  Carts     deleted       3\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	if strings.Contains(buf.String(), " \n") {
		t.Error("trailing spaces")
	}
}

func TestObjectsPolledFromTheReader(t *testing.T) {
	done := int64(0)
	r := New(Options{Label: "verify", Objects: func() (int64, int64) { return done, 8 }})
	r.AddObjects(100)
	done = 2
	if c := r.Counts(); c.ObjectsDone != 2 || c.ObjectsTotal != 8 {
		t.Errorf("counts %+v", c)
	}
}

func TestLogLinesClearTheBarFirst(t *testing.T) {
	var buf bytes.Buffer
	clk := &fakeClock{t: time.Unix(0, 0)}
	r := New(Options{Label: "x", Out: &buf, TTY: true, Now: clk.Now})
	lw := r.LogWriter(&buf)
	lw.Write([]byte("before\n")) // no bar yet: nothing to clear
	clk.Add(time.Second)
	r.Tick()
	lw.Write([]byte("log line\n"))
	lw.Write([]byte("another\n"))
	want := "before\n\rx [                        ] objects 0/? items 0/? 0/s\x1b[K\r\x1b[Klog line\nanother\n"
	if buf.String() != want {
		t.Errorf("got  %q\nwant %q", buf.String(), want)
	}
	if off := New(Options{}); off.LogWriter(&buf) != &buf {
		t.Error("off a terminal the writer is not wrapped")
	}
}
