package natssink

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
)

// BenchmarkNATSMessages renders a batch of 250 expiries as NATS messages
// in each format, as Write does (one arena per batch), without a server:
// the sink's own CPU per message.
func BenchmarkNATSMessages(b *testing.B) {
	evs := testkit.BenchEvents()
	for _, format := range natsmsg.Formats {
		b.Run(format, func(b *testing.B) {
			s := benchNATSSink(b, "127.0.0.1:4222", format)
			b.ReportAllocs()
			defer lockThread()()
			cpu := threadCPU()
			for b.Loop() {
				r := s.newRender(evs) // one per Write, as Write has
				for i := range evs {
					r.message(&evs[i])
				}
				r.done(evs)
			}
			reportPerMessage(b, len(evs), threadCPU()-cpu)
		})
	}
}

// BenchmarkNATSPublish renders the batch as BenchmarkNATSMessages does and
// hands each message to nats.go as the sink does (checkMessage, then the
// client's PublishMsg, which encodes the headers), on core NATS to a real
// nats-server without subscribers: the client's CPU and allocations per
// message of each format, the broker's work left out (a flush per batch).
func BenchmarkNATSPublish(b *testing.B) {
	ns := testkit.StartNATS(b, nil)
	nc, _ := ns.Client(b)
	evs := testkit.BenchEvents()
	for _, format := range natsmsg.Formats {
		b.Run(format, func(b *testing.B) {
			s := benchNATSSink(b, ns.URL, format)
			s.conn.Store(&natsConn{nc: nc})
			b.ReportAllocs()
			defer lockThread()()
			cpu := threadCPU()
			for b.Loop() {
				r := s.newRender(evs)
				for i := range evs {
					m, size := r.message(&evs[i])
					if err := s.checkMessage(m, size); err != nil {
						b.Fatal(err)
					}
					if err := nc.PublishMsg(m); err != nil {
						b.Fatal(err)
					}
				}
				r.done(evs)
				if err := nc.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			reportPerMessage(b, len(evs), threadCPU()-cpu)
		})
	}
}

// BenchmarkNATSCEHeaders isolates what nats.go takes for the ce- headers:
// the same pre-rendered messages (subject, body, the Archiver- headers)
// handed to PublishMsg on core NATS to a real nats-server, with the
// envelope's headers and with cloudevents' (the same plus the ce-
// headers). nats.go walks a message's header map twice (its size, then
// its bytes), checks every name, trims and scans every value and writes
// them into a buffer of its own, which it copies to the connection's: the
// difference between the two is the least any rendering of the format
// costs beyond the envelope with this client, the floor of its cost.
func BenchmarkNATSCEHeaders(b *testing.B) {
	ns := testkit.StartNATS(b, nil)
	nc, _ := ns.Client(b)
	evs := testkit.BenchEvents()
	for _, format := range []string{natsmsg.FormatEnvelope, natsmsg.FormatCloudEvents} {
		b.Run(format, func(b *testing.B) {
			s := benchNATSSink(b, ns.URL, format)
			r := s.newRender(evs)
			msgs := make([]*nats.Msg, len(evs))
			for i := range evs {
				msgs[i], _ = r.message(&evs[i])
			}
			b.ReportAllocs()
			defer lockThread()()
			cpu := threadCPU()
			for b.Loop() {
				for _, m := range msgs {
					if err := nc.PublishMsg(m); err != nil {
						b.Fatal(err)
					}
				}
				if err := nc.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			reportPerMessage(b, len(evs), threadCPU()-cpu)
		})
	}
}

// benchNATSSink is a sink of format publishing to the server at addr
// under ttl.{table}.{kind}, not connected.
func benchNATSSink(b *testing.B, addr, format string) *Sink {
	c, tmpl, err := checkNATSConfig(Config{Servers: []string{"nats://" + addr}, Subject: "ttl.{table}.{kind}", Format: format})
	if err != nil {
		b.Fatal(err)
	}
	return &Sink{c: c, tmpl: tmpl}
}

// reportPerMessage reports a benchmark of n messages an iteration per
// message: its wall time (ns/msg) and, where the OS tells a thread's CPU
// time, the benchmark goroutine's own CPU (cpu-ns/msg: without the
// embedded server's and the collector's background work, which a loaded
// machine's wall time mixes in).
func reportPerMessage(b *testing.B, n int, cpu time.Duration) {
	msgs := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/msgs, "ns/msg")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/msgs, "cpu-ns/msg")
	}
}
