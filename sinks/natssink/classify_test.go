package natssink

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// padded returns events whose items carry a "pad" attribute of n[i] bytes
// (none for 0).
func padded(table string, n ...int) []event.Event {
	evs := testkit.Events(table, "shard-1", 1, len(n))
	for i, size := range n {
		if size > 0 {
			evs[i].OldImage["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", size)}
		}
	}
	return evs
}

// payloadSize is what NATS counts against max_payload for e's message.
func payloadSize(s *Sink, e *event.Event) int {
	m := s.message(e)
	return m.Size() - len(m.Subject)
}

// TestNATSRejectsOversizeMessages runs a server with a small max_payload:
// a message over it is rejected alone, every other event of its batch is
// published and the batch is acknowledged with a sinkapi.RejectedError listing
// it. A message of exactly max_payload goes through, and the connection
// stays usable.
func TestNATSRejectsOversizeMessages(t *testing.T) {
	const maxPayload = 4096
	for _, mode := range []string{"jetstream", "core"} {
		t.Run(mode, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			ns := testkit.StartNATS(t, func(o *server.Options) { o.MaxPayload = maxPayload })
			nc, js := ns.Client(t)
			query := "?subject=big.{table}"
			var st jetstream.Stream
			var sub *nats.Subscription
			if mode == "jetstream" {
				st = testkit.CreateStream(t, js, "BIG", "big.>")
			} else {
				query += "&jetstream=false"
				var err error
				if sub, err = nc.SubscribeSync("big.>"); err != nil {
					t.Fatal(err)
				}
				nc.Flush()
			}
			sk, _, err := open(ctx, "nats://"+ns.URL+query, sinkapi.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sk.Close(ctx)
			s := sk.(*Sink)
			evs := padded("t", 0, 2*maxPayload, 0, 0, 0)
			// Event 3 at exactly max_payload, event 4 one byte over.
			base := payloadSize(s, &padded("t", 1)[0]) - 1
			evs[3] = padded("t", 0, 0, 0, maxPayload-base)[3]
			evs[4] = padded("t", 0, 0, 0, 0, maxPayload-base+1)[4]
			if got := payloadSize(s, &evs[3]); got != maxPayload {
				t.Fatalf("test set-up: event 3 is %d bytes, want %d", got, maxPayload)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("mixed")); err != nil {
				t.Fatal(err)
			}
			err = a.WaitAck(t, "mixed")
			testkit.AssertRejected(t, err, []int{1, 4}, "max_payload")
			if !errors.Is(err, nats.ErrMaxPayload) {
				t.Fatalf("%v does not match nats.ErrMaxPayload", err)
			}
			if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "shard-1", 100, 2)}, a.Ack("after")); err != nil {
				t.Fatal(err)
			}
			if err := a.WaitAck(t, "after"); err != nil {
				t.Fatalf("a batch after the rejection: %v", err)
			}
			var want []string
			for _, e := range append([]event.Event{evs[0], evs[2], evs[3]}, testkit.Events("t", "shard-1", 100, 2)...) {
				want = append(want, event.MessageID(&e))
			}
			var got []string
			if st != nil {
				for _, m := range testkit.StreamMsgs(t, st) {
					got = append(got, m.Headers().Get("Nats-Msg-Id"))
				}
			} else {
				for range want {
					m, err := sub.NextMsg(30 * time.Second)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, m.Header.Get("Nats-Msg-Id"))
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("published %v, want %v", got, want)
			}
		})
	}
}

// TestNATSRejectsOverStreamMaxMsgSize: a message within max_payload that
// the stream refuses as larger than its max_msg_size is rejected alone.
func TestNATSRejectsOverStreamMaxMsgSize(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}, MaxMsgSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=small.{table}", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	evs := padded("t", 0, 8192, 0)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	testkit.AssertRejected(t, a.WaitAck(t, "b"), []int{1}, "maximum")
	if n := testkit.StreamCount(t, st); n != 2 {
		t.Fatalf("stream holds %d messages, want 2", n)
	}
}

// TestNATSRejectsBadSubjects: a subject the client refuses is rejected.
// Templates are checked and placeholder values cleaned, so a bad subject
// cannot be rendered; the test sets one directly.
func TestNATSRejectsBadSubjects(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "TTL", "archiver.>")
	sk, _, err := open(ctx, "nats://"+ns.URL, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close(ctx)
	s := sk.(*Sink)
	s.tmpl = subjectTemplate{{{lit: "archiver"}}, {{lit: "bad subject"}}}
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	err = a.WaitAck(t, "b")
	testkit.AssertRejected(t, err, []int{0, 1}, "invalid subject")
	if !errors.Is(err, nats.ErrBadSubject) {
		t.Fatalf("%v does not match nats.ErrBadSubject", err)
	}
}

// TestNATSUncapturedSubjectIsPermanent: once no stream captures the
// subjects (the stream was deleted under the running sink), batches fail
// with a permanent error rather than after two minutes of retries.
func TestNATSUncapturedSubjectIsPermanent(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, _ := openNATSWithoutStream(t, ctx)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	err := a.WaitAck(t, "b")
	var rej *sinkapi.RejectedError
	if !sinkapi.IsPermanent(err) || errors.As(err, &rej) || !strings.Contains(err.Error(), "no JetStream stream captures") {
		t.Fatalf("ack error %v, want a permanent no-stream error for the whole batch", err)
	}
}

// openNATSWithoutStream opens a JetStream sink whose stream is then deleted
// under it: no stream captures its subjects any more. It returns the sink
// (closed when the test ends) and its URL.
func openNATSWithoutStream(t *testing.T, ctx context.Context) (sinkapi.Sink, string) {
	t.Helper()
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "TTL", "archiver.>")
	url := "nats://" + ns.URL
	s, _, err := open(ctx, url, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.WithoutCancel(ctx)) })
	if err := js.DeleteStream(ctx, "TTL"); err != nil {
		t.Fatal(err)
	}
	return s, url
}
