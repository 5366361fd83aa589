package natssink

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// longKeyEvent is an expiry whose keys are at DynamoDB's limits: a
// 2048-byte binary hash key and a 1024-byte binary range key.
func longKeyEvent(table string, seq int) event.Event {
	e := testkit.Events(table, "shard-1", seq, 1)[0]
	pk := bytes.Repeat([]byte{byte(seq)}, 2048)
	sk := bytes.Repeat([]byte{0xfe}, 1024)
	e.Keys = event.Item{"pk": &types.AttributeValueMemberB{Value: pk}, "sk": &types.AttributeValueMemberB{Value: sk}}
	e.OldImage["pk"], e.OldImage["sk"] = e.Keys["pk"], e.Keys["sk"]
	return e
}

// TestNATSLongKeysAndLookalikeTables: over a real nats-server with
// JetStream, under bk.{table}.{kind}.{pk}.{sk}, an item with keys at
// DynamoDB's limits is published like any other (its subject within the
// cap, the connection untouched), and tables the old mapping merged
// (orders.v2, orders_v2) publish to subjects of their own.
func TestNATSLongKeysAndLookalikeTables(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	st := testkit.CreateStream(t, js, "BK", "bk.>")
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=bk.{table}.{kind}.{pk}.{sk}", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	evs := append(testkit.Events("orders.v2", "shard-1", 1, 5), testkit.Events("orders_v2", "shard-1", 1, 5)...)
	evs = append(evs, longKeyEvent("orders.v2", 9))
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{ShardID: "shard-1", Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if err := s.(interface{ Ready() error }).Ready(); err != nil {
		t.Fatalf("Ready after the long subject: %v", err)
	}
	msgs := testkit.StreamMsgs(t, st)
	if len(msgs) != len(evs) {
		t.Fatalf("%d messages in the stream, want %d", len(msgs), len(evs))
	}
	subjects := map[string]string{}
	for i, m := range msgs {
		if len(m.Subject()) > DefaultMaxSubject {
			t.Errorf("message %d: subject of %d bytes, over the default cap", i, len(m.Subject()))
		}
		id := testkit.BodyEventID(t, m.Data())
		if other, ok := subjects[m.Subject()]; ok {
			t.Errorf("%s and %s share the subject %q", other, id, m.Subject())
		}
		subjects[m.Subject()] = id
	}
	if want := "bk.orders%2Ev2.expired.user#shard-1#000001.1"; subjects[want] != "orders.v2-shard-1-1" {
		t.Errorf("subject %q holds %q, want orders.v2-shard-1-1 (subjects: %v)", want, subjects[want], subjects)
	}
	if want := "bk.orders_v2.expired.user#shard-1#000001.1"; subjects[want] != "orders_v2-shard-1-1" {
		t.Errorf("subject %q holds %q, want orders_v2-shard-1-1", want, subjects[want])
	}
}

// TestNATSNewConnectionAfterTheServerClosedIt: when the server ends the
// connection with an error (here a real one: a protocol line over its
// max_control_line, sent on the sink's own connection), nats.go closes it
// for good. The sink builds a new connection, becomes ready again and
// delivers every batch, the ones written around the close too.
func TestNATSNewConnectionAfterTheServerClosedIt(t *testing.T) {
	for _, mode := range []string{"jetstream", "core"} {
		t.Run(mode, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			ns := testkit.StartNATS(t, nil)
			nc, js := ns.Client(t)
			u := "nats://" + ns.URL + "?subject=re.{table}"
			var count func() int
			if mode == "jetstream" {
				st := testkit.CreateStream(t, js, "RE", "re.>")
				count = func() int { return int(testkit.StreamCount(t, st)) }
			} else {
				u += "&jetstream=false"
				sub, err := nc.SubscribeSync("re.>")
				if err != nil {
					t.Fatal(err)
				}
				nc.Flush()
				got := 0
				count = func() int {
					for {
						if _, err := sub.NextMsg(10 * time.Millisecond); err != nil {
							return got
						}
						got++
					}
				}
			}
			sk, _, err := open(ctx, u, sinkapi.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sk.Close(ctx)
			s := sk.(*Sink)
			a := testkit.NewAcks()
			write := func(id string, first int) {
				t.Helper()
				if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", first, 10)}, a.Ack(id)); err != nil {
					t.Fatal(err)
				}
			}
			write("before", 0)
			if err := a.WaitAck(t, "before"); err != nil {
				t.Fatal(err)
			}

			old := s.cur().nc
			if err := old.Publish(strings.Repeat("x", 8<<10), nil); err != nil {
				t.Fatal(err)
			}
			old.Flush() // the server answers -ERR and closes; nats.go closes for good
			eventually.True(t, 30*time.Second, "the server to close the connection", old.IsClosed)
			if e := old.LastError(); e == nil || !strings.Contains(strings.ToLower(e.Error()), "maximum control line") {
				t.Fatalf("connection closed with %v, want the server's control line error", e)
			}
			if mode == "jetstream" {
				write("around", 10) // on the closed connection or the new one
			}
			eventually.True(t, 30*time.Second, "a new connection", func() bool { return s.cur().nc != old && s.Ready() == nil })
			write("after", 20)
			for _, id := range []string{"around", "after"} {
				if mode == "core" && id == "around" {
					continue
				}
				if err := a.WaitAck(t, id); err != nil {
					t.Fatalf("batch %s: %v", id, err)
				}
			}
			want := 30
			if mode == "core" {
				want = 20
			}
			n := 0
			eventually.True(t, 30*time.Second, fmt.Sprintf("%d messages", want), func() bool { n += count(); return n >= want })
			if n != want {
				t.Fatalf("%d messages, want %d", n, want)
			}
		})
	}
}

// TestNATSRejectsSubjectsOverTheCap: a subject longer than max-subject is
// never sent (the server would close the connection); its event alone is
// rejected, the rest of the batch is delivered.
func TestNATSRejectsSubjectsOverTheCap(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	st := testkit.CreateStream(t, js, "TTL", "archiver.>")
	sk, _, err := open(ctx, "nats://"+ns.URL+"?subject=archiver.{table}&max-subject=100", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close(ctx)
	s := sk.(*Sink)
	// Templates cannot render one (TestSubjectLongKeys); set a literal one.
	s.tmpl = subjectTemplate{{{lit: "archiver"}}, {{lit: strings.Repeat("y", 200)}}}
	evs := testkit.Events("t", "s", 1, 3)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: evs[:1]}, a.Ack("long")); err != nil {
		t.Fatal(err)
	}
	testkit.AssertRejected(t, a.WaitAck(t, "long"), []int{0}, "over the cap of 100")
	s.tmpl = mustSubject(t, "archiver.{table}")
	if err := s.Write(ctx, sinkapi.Batch{Events: evs[1:]}, a.Ack("short")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "short"); err != nil {
		t.Fatal(err)
	}
	if n := testkit.StreamCount(t, st); n != 2 {
		t.Fatalf("stream holds %d messages, want 2", n)
	}
	if s.cur().nc.IsClosed() || s.Ready() != nil {
		t.Fatalf("connection touched: %v", s.Ready())
	}
}
