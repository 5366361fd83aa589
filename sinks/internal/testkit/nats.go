package testkit

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/internal/natstest"
)

// NATSServer is the test's nats-server (internal/natstest: JetStream on a
// free loopback port, storing into a temporary directory) under the names
// the sinks' tests use.
type NATSServer struct {
	*natstest.Server
	URL string // HOST:PORT
}

// StartNATS starts a server, with tweak applied to its options, stopped
// with the test.
func StartNATS(t testing.TB, tweak func(*server.Options)) *NATSServer {
	t.Helper()
	var tweaks []func(*server.Options)
	if tweak != nil {
		tweaks = append(tweaks, tweak)
	}
	ns := natstest.Start(t, tweaks...)
	return &NATSServer{Server: ns, URL: ns.Addr()}
}

// Start starts the stopped server again (on the same port and store).
func (ns *NATSServer) Start() { ns.Restart() }

// Client connects a plain client (for test set-up and checks).
func (ns *NATSServer) Client(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return natstest.Connect(t, ns.URL, opts...)
}

// CreateStream creates stream name capturing subjects.
func CreateStream(t testing.TB, js jetstream.JetStream, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	st, err := js.CreateStream(Ctx(t), jetstream.StreamConfig{Name: name, Subjects: subjects, Duplicates: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// StreamMsgs reads every message of a stream in order.
func StreamMsgs(t testing.TB, st jetstream.Stream) []jetstream.Msg {
	t.Helper()
	ctx := Ctx(t)
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := int(info.State.Msgs)
	if want == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		batch, err := cons.Fetch(want-len(out), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			out = append(out, m)
		}
	}
	if len(out) < want {
		t.Fatalf("read %d of %d stream messages", len(out), want)
	}
	return out
}

// StreamCount is how many messages st holds.
func StreamCount(t testing.TB, st jetstream.Stream) uint64 {
	t.Helper()
	info, err := st.Info(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
