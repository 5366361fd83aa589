package s3sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// TestS3LogsProgress: over versitygw, the sink says at start when its
// first object will appear, and logs every object it uploaded at Info
// with its key, events, bytes and duration.
func TestS3LogsProgress(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	core, logs := observer.New(zapcore.InfoLevel)
	u := "s3://archive/progress?endpoint=" + v.Endpoint + "&path-style=true&flush-interval=90s&flush-bytes=1048576"
	s, _, err := open(ctx, u, sinkapi.Options{AWSConfig: testkit.AWSConfig, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	open := logs.FilterMessageSnippet("s3 sink open").All()
	if len(open) != 1 {
		t.Fatalf("%d start-up lines, want 1: %v", len(open), logs.All())
	}
	f := open[0].ContextMap()
	if f["flush_interval"] != 90*time.Second || f["flush_bytes"] != int64(1<<20) || f["sink"] != "s3://archive/progress" {
		t.Errorf("start-up line's fields %v, want the sink, flush_interval 1m30s and flush_bytes 1048576", f)
	}

	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{ShardID: "shardId-1", Events: testkit.Events("sessions", "shardId-1", 0, 4)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	keys := v.Objects(t, "progress/")
	up := logs.FilterMessage("s3 object uploaded").All()
	if len(up) != 1 || len(keys) != 1 {
		t.Fatalf("%d upload lines for objects %v, want one for one: %v", len(up), keys, logs.All())
	}
	f = up[0].ContextMap()
	if f["key"] != keys[0] || f["events"] != int64(4) {
		t.Errorf("upload line's fields %v, want key %s and 4 events", f, keys[0])
	}
	if b, ok := f["bytes"].(int64); !ok || b <= 0 {
		t.Errorf("upload line's bytes %v, want the object's size", f["bytes"])
	}
	if _, ok := f["took"].(time.Duration); !ok {
		t.Errorf("upload line lacks took: %v", f)
	}
}

// TestUploadLogSummarizes: past its limit in a window the upload log
// stops listing objects and, when the window is over (a tick, the next
// upload or close), logs one summary that counts every object of the
// window; a window with nothing unlisted has no summary.
func TestUploadLogSummarizes(t *testing.T) {
	type step struct {
		uploads int           // objects of 10 events and 100 bytes each
		advance time.Duration // then the clock moves
		tick    bool          // then tick (else nothing)
		close   bool
	}
	for _, tc := range []struct {
		name      string
		steps     []step
		listed    int
		summaries []map[string]any // objects, events, bytes, listed of each summary
	}{
		{name: "under the limit", steps: []step{{uploads: 3, advance: 2 * time.Minute, tick: true}}, listed: 3},
		{name: "over the limit, tick ends the window",
			steps:  []step{{uploads: 7, advance: 59 * time.Second, tick: true}, {advance: time.Second, tick: true}},
			listed: 5, summaries: []map[string]any{{"objects": int64(7), "events": int64(70), "bytes": int64(700), "listed": int64(5)}}},
		{name: "next window lists again",
			steps: []step{{uploads: 6, advance: time.Minute}, {uploads: 2, advance: time.Minute, tick: true}},
			// The second window's first upload ends the first.
			listed: 7, summaries: []map[string]any{{"objects": int64(6), "events": int64(60), "bytes": int64(600), "listed": int64(5)}}},
		{name: "close ends the window early",
			steps:  []step{{uploads: 9, advance: time.Second, close: true}},
			listed: 5, summaries: []map[string]any{{"objects": int64(9), "events": int64(90), "bytes": int64(900), "listed": int64(5)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			clock := time.Unix(1000, 0)
			u := newUploadLog(zap.New(core), func() time.Time { return clock })
			u.limit = 5
			for _, st := range tc.steps {
				for i := 0; i < st.uploads; i++ {
					u.uploaded("k", 10, 100, time.Millisecond)
				}
				clock = clock.Add(st.advance)
				if st.tick {
					u.tick()
				}
				if st.close {
					u.close()
				}
			}
			if n := logs.FilterMessage("s3 object uploaded").Len(); n != tc.listed {
				t.Errorf("%d objects listed, want %d", n, tc.listed)
			}
			sums := logs.FilterMessage("s3 objects uploaded").All()
			if len(sums) != len(tc.summaries) {
				t.Fatalf("%d summaries, want %d: %v", len(sums), len(tc.summaries), logs.All())
			}
			for i, want := range tc.summaries {
				got := sums[i].ContextMap()
				for k, v := range want {
					if got[k] != v {
						t.Errorf("summary %d: %s = %v, want %v", i, k, got[k], v)
					}
				}
			}
			for _, e := range logs.All() {
				if e.Level != zapcore.InfoLevel || strings.Contains(e.Message, "\n") {
					t.Errorf("line %q at %s, want one Info line", e.Message, e.Level)
				}
			}
		})
	}
}
