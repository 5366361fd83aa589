package testkit

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSServer is an embedded nats-server with JetStream on a free loopback
// port, storing into a temporary directory.
type NATSServer struct {
	t testing.TB
	// Srv is the running server (nil while stopped), Opts its options,
	// URL its HOST:PORT.
	Srv   *server.Server
	Opts  server.Options
	URL   string
	mutex sync.Mutex
}

// StartNATS starts a server, with tweak applied to its options, stopped
// with the test.
func StartNATS(t testing.TB, tweak func(*server.Options)) *NATSServer {
	t.Helper()
	opts := server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	if tweak != nil {
		tweak(&opts)
	}
	ns := &NATSServer{t: t, Opts: opts}
	ns.Start()
	ns.Opts.Port = ns.Srv.Addr().(*net.TCPAddr).Port
	ns.URL = fmt.Sprintf("127.0.0.1:%d", ns.Opts.Port)
	t.Cleanup(ns.Stop)
	return ns
}

// Start starts the server again (on the same port and store).
func (ns *NATSServer) Start() {
	ns.t.Helper()
	opts := ns.Opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		ns.t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		ns.t.Fatal("nats-server not ready within 30s")
	}
	ns.mutex.Lock()
	ns.Srv = srv
	ns.mutex.Unlock()
}

// Stop shuts the server down and waits for it.
func (ns *NATSServer) Stop() {
	ns.mutex.Lock()
	srv := ns.Srv
	ns.Srv = nil
	ns.mutex.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Client connects a plain client (for test set-up and checks).
func (ns *NATSServer) Client(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect("nats://"+ns.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
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
