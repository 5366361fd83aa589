package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

// sinksBenchNATS measures the NATS JetStream sink (format=envelope)
// beside a raw PublishAsync loop of the same messages, in rounds that
// alternate raw and sink, so that load from elsewhere on the machine hits
// both alike; each starts from an empty stream. Every round publishes new
// event IDs (JetStream would drop repeats as duplicates).
func sinksBenchNATS(ctx context.Context, w io.Writer, sz sinksSizes) error {
	dir, err := os.MkdirTemp("", "sinks-bench-nats")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := benchkit.StartNATS(dir)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"archiver.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return err
	}
	// format=envelope: the raw loop sends the envelope's headers, so
	// both sides carry the same bytes (cloudevents, the default, adds the
	// ce- headers, about 570 bytes a message).
	s, _, err := sinks.Open(ctx, url+"?subject=archiver.{table}.{kind}&format=envelope", sinks.Options{})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	var rawRate, sinkRate float64
	var paired []float64
	for round := 0; round < sz.rounds; round++ {
		if err := stream.Purge(ctx); err != nil {
			return err
		}
		raw, err := sinksRawPublish(ctx, js, sinksNATSMsgs(fmt.Sprintf("raw%d", round), sz.natsRecords))
		if err != nil {
			return err
		}
		rawRate = max(rawRate, raw)
		evs := sinksBenchEvents(fmt.Sprintf("sink%d", round), sz.natsRecords)
		benchkit.Settle()
		start := time.Now()
		if err := sinksBenchWrite(ctx, s, evs); err != nil {
			return err
		}
		sink := float64(sz.natsRecords) / time.Since(start).Seconds()
		sinkRate = max(sinkRate, sink)
		paired = append(paired, sink/raw)
	}
	sinksBenchRatio(w, "nats jetstream sink", sinkRate, rawRate, "raw PublishAsync", paired)
	return nil
}

// sinksNATSMsgs are the messages the sink sends for n events (subject,
// headers, envelope), made up front so the raw loop measures the broker
// alone.
func sinksNATSMsgs(prefix string, n int) []*nats.Msg {
	var msgs []*nats.Msg
	for _, evs := range sinksBenchEvents(prefix, n) {
		for i := range evs {
			e := &evs[i]
			h := nats.Header{}
			h.Set(jetstream.MsgIDHeader, e.EventID)
			h.Set(sinks.HeaderTable, e.Table)
			h.Set(sinks.HeaderKind, string(e.Kind))
			h.Set(sinks.HeaderKeys, string(event.MarshalItem(e.Keys)))
			h.Set(sinks.HeaderShard, e.ShardID)
			h.Set(sinks.HeaderSequence, e.SequenceNumber)
			h.Set(sinks.HeaderEventName, e.EventName)
			msgs = append(msgs, &nats.Msg{Subject: "archiver.sessions.expired", Header: h, Data: event.MarshalLine(e)})
		}
	}
	return msgs
}

// sinksRawPublish publishes msgs with PublishMsgAsync, waits for every
// acknowledgement and returns msgs/s.
func sinksRawPublish(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) (float64, error) {
	benchkit.Settle()
	start := time.Now()
	for _, m := range msgs {
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
			return 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(len(msgs)) / time.Since(start).Seconds(), nil
}
