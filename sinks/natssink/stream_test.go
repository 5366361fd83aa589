package natssink

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// TestNATSStreamSettingsFromURL: the stream-* and duplicate-window
// parameters, their defaults, and which were given.
func TestNATSStreamSettingsFromURL(t *testing.T) {
	week := 7 * 24 * time.Hour
	tests := []struct {
		query string
		want  StreamSettings
	}{
		{"", StreamSettings{MaxAge: week, DuplicateWindow: 20 * time.Minute, Replicas: 1}},
		{"&stream-max-age=0", StreamSettings{DuplicateWindow: 20 * time.Minute, Replicas: 1, Given: []string{"stream-max-age"}}},
		{"&stream-max-age=10m", StreamSettings{MaxAge: 10 * time.Minute, DuplicateWindow: 10 * time.Minute, Replicas: 1, Given: []string{"stream-max-age"}}},
		{"&duplicate-window=1h&stream-max-bytes=10GiB&stream-max-msgs=5000000&stream-replicas=3", StreamSettings{MaxAge: week,
			MaxBytes: 10 << 30, MaxMsgs: 5000000, DuplicateWindow: time.Hour, Replicas: 3,
			Given: []string{"stream-max-bytes", "stream-max-msgs", "duplicate-window", "stream-replicas"}}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			p, err := sinkurl.Parse("nats://127.0.0.1:4222?create-stream=S" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseConfig(p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Stream, tc.want) {
				t.Errorf("got  %+v\nwant %+v", c.Stream, tc.want)
			}
		})
	}
}

// TestNATSStreamSettingsErrors: each bad value is refused with an error
// naming its parameter.
func TestNATSStreamSettingsErrors(t *testing.T) {
	const base = "nats://127.0.0.1:4222?create-stream=S&"
	tests := []struct{ url, want string }{
		{"nats://127.0.0.1:4222?duplicate-window=1h", "duplicate-window: needs create-stream=NAME"},
		{"nats://127.0.0.1:4222?stream-max-age=1h", "stream-max-age: needs create-stream=NAME"},
		{"nats://127.0.0.1:4222?jetstream=false&stream-replicas=3", "stream-replicas: needs create-stream=NAME"},
		{base + "stream-max-age=week", `stream-max-age: "week" is not a duration`},
		{base + "stream-max-age=-1h", "stream-max-age: -1h0m0s is out of range"},
		{base + "stream-max-age=30s", "stream-max-age: 30s is below 1m"},
		{base + "stream-max-bytes=lots", `stream-max-bytes: "lots" is not a size`},
		{base + "stream-max-msgs=-5", "stream-max-msgs: -5 is out of range"},
		{base + "stream-max-msgs=many", `stream-max-msgs: "many" is not an integer`},
		{base + "duplicate-window=0", "duplicate-window: 0s is out of range"},
		{base + "duplicate-window=500ms", "duplicate-window: 500ms is out of range"},
		{base + "duplicate-window=2h&stream-max-age=1h", "duplicate-window: 2h0m0s is longer than stream-max-age 1h0m0s"},
		{base + "stream-replicas=0", "stream-replicas: 0 is out of range [1, 5]"},
		{base + "stream-replicas=7", "stream-replicas: 7 is out of range [1, 5]"},
		{base + "duplicate-window=1m&duplicate-window=2m", "duplicate-window: given more than once"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			err := validate(tc.url)
			var ce *sinkurl.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want a *sinkurl.ConfigError containing %q", err, tc.want)
			}
		})
	}
}

// TestNATSCreateStreamSettings: create-stream makes the stream with the
// defaults or the URL's settings; opening again changes an existing
// stream to the settings given, and keeps those not given.
func TestNATSCreateStreamSettings(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	config := func(name string) jetstream.StreamConfig {
		t.Helper()
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config
	}
	reopen := func(query string) {
		t.Helper()
		s, _, err := open(ctx, "nats://"+ns.URL+"?"+query, sinkapi.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	type limits struct {
		age, window time.Duration
		bytes, msgs int64
		replicas    int
	}
	got := func(c jetstream.StreamConfig) limits {
		return limits{c.MaxAge, c.Duplicates, c.MaxBytes, c.MaxMsgs, c.Replicas}
	}
	steps := []struct {
		query string
		want  limits
	}{
		{"subject=d.{table}&create-stream=D", limits{7 * 24 * time.Hour, 20 * time.Minute, -1, -1, 1}},
		{"subject=c.{table}&create-stream=C&stream-max-age=48h&duplicate-window=1h&stream-max-bytes=1GiB&stream-max-msgs=1000",
			limits{48 * time.Hour, time.Hour, 1 << 30, 1000, 1}},
		// Only what is given changes an existing stream.
		{"subject=c.{table}&create-stream=C&duplicate-window=30m", limits{48 * time.Hour, 30 * time.Minute, 1 << 30, 1000, 1}},
		{"subject=c.{table}&create-stream=C", limits{48 * time.Hour, 30 * time.Minute, 1 << 30, 1000, 1}},
		{"subject=c.{table}&create-stream=C&stream-max-bytes=0&stream-max-age=0", limits{0, 30 * time.Minute, -1, 1000, 1}},
	}
	for i, step := range steps {
		reopen(step.query)
		name := strings.TrimPrefix(step.query[strings.Index(step.query, "create-stream="):], "create-stream=")
		name, _, _ = strings.Cut(name, "&")
		if g := got(config(name)); g != step.want {
			t.Errorf("step %d (%s): stream %s has %+v, want %+v", i, step.query, name, g, step.want)
		}
	}
	// A stream the server refuses to change fails the open, naming it.
	_, _, err := open(ctx, "nats://"+ns.URL+"?subject=c.{table}&create-stream=C&stream-replicas=3", sinkapi.Options{})
	if err == nil || !strings.Contains(err.Error(), "stream-replicas") {
		t.Errorf("three replicas on a single server: %v", err)
	}
}

// TestNATSStreamIDs: the sink reads the message IDs its stream holds on
// its subjects (not those of other subjects), up to a bound.
func TestNATSStreamIDs(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "IDS", "ids.>", "other.>")
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=ids.{table}", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	sink := s.(*Sink)
	empty, err := sink.StreamIDs(ctx, 100)
	if err != nil || !empty.Complete || empty.Read != 0 || empty.DuplicateWindow != 2*time.Minute || empty.Stream != "IDS" {
		t.Fatalf("empty stream: %+v, %v", empty, err)
	}
	evs := testkit.Events("t", "s", 1, 12)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: evs[:10]}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Get("b"); n != 1 || err != nil {
		t.Fatalf("ack: %d %v", n, err)
	}
	// A message of another subject with an ID of its own is not the sink's.
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "other.x", Header: nats.Header{jetstream.MsgIDHeader: {evs[11].EventID}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		max      int
		complete bool
		held     int
	}{{100, true, 10}, {10, true, 10}, {4, false, 4}} {
		t.Run(fmt.Sprint(c.max), func(t *testing.T) {
			h, err := sink.StreamIDs(ctx, c.max)
			if err != nil {
				t.Fatal(err)
			}
			held := 0
			for i := range evs {
				if h.Holds(&evs[i]) {
					held++
					if i >= 10 {
						t.Errorf("holds %s, never published on the sink's subjects", evs[i].EventID)
					}
				}
			}
			if h.Complete != c.complete || held != c.held || h.Read != c.held {
				t.Errorf("max %d: complete %v, read %d, holds %d; want %v, %d", c.max, h.Complete, h.Read, held, c.complete, c.held)
			}
		})
	}
}
