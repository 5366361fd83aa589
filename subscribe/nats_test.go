package subscribe_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/natstest"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/restore/restoretest"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/subscribe"
)

// expiries is how many items expire in the tests over a real sink.
const expiries = 500

// streams are the JetStream streams archiveToNATS fills, one per sink,
// and the sink's format parameter ("" names none: the default).
var streams = []struct{ name, format string }{
	{"TTL_DEFAULT", ""},
	{"TTL_CE", natsmsg.FormatCloudEvents},
	{"TTL_ENVELOPE", natsmsg.FormatEnvelope},
	{"TTL_ITEM", natsmsg.FormatItem},
}

// archiveToNATS expires 500 items of a table in an engine over HTTP and
// archives them through the real NATS sink into each of streams, on an
// in-process nats-server. It returns the server's host:port and the
// expiries as the stream had them, by message ID.
func archiveToNATS(t *testing.T) (string, map[string]event.Event) {
	t.Helper()
	bed := restoretest.Start(t, engine.Options{})
	bed.CreateTable("orders", "expires", st.StreamViewTypeNewAndOldImages)
	bed.PutExpiring("orders", expiries)
	if n := bed.ExpireAll(); n != expiries {
		t.Fatalf("the engine expired %d items, want %d", n, expiries)
	}
	addr := natstest.Start(t).Addr()
	for _, s := range streams {
		u := fmt.Sprintf("nats://%s?subject=%s.{table}.{kind}&create-stream=%s", addr, s.name, s.name)
		if s.format != "" {
			u += "&format=" + s.format
		}
		sk, _, err := sinks.Open(bed.Ctx, u, sinks.Options{})
		if err != nil {
			t.Fatalf("sinks.Open(%s): %v", u, err)
		}
		if n := bed.ArchiveTo(expiredOnly{sk}, "orders", "expires"); n != 2*expiries {
			t.Fatalf("read %d records for %s, want %d (the puts and the expiries)", n, s.name, 2*expiries)
		}
	}
	byID := map[string]event.Event{}
	for _, e := range bed.StreamEvents("orders", "expires") {
		if e.Kind == event.Expired {
			byID[event.MessageID(&e)] = e
		}
	}
	return addr, byID
}

// expiredOnly is a sink that is given a batch's expiries only, as the
// consumer gives a sink with events=expired.
type expiredOnly struct{ sinks.Sink }

func (s expiredOnly) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	var keep []event.Event
	for _, e := range b.Events {
		if e.Kind == event.Expired {
			keep = append(keep, e)
		}
	}
	b.Events = keep
	return s.Sink.Write(ctx, b, ack)
}

// readStream returns every message of stream, read by an ordered
// consumer (which leaves nothing behind on the server).
func readStream(t *testing.T, addr, stream string) []jetstream.Msg {
	t.Helper()
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for len(out) < expiries {
		batch, err := cons.Fetch(expiries-len(out), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			out = append(out, m)
		}
		if err := batch.Error(); err != nil {
			t.Fatalf("%s: after %d messages: %v", stream, len(out), err)
		}
	}
	return out
}

// TestDecodeRealSink decodes every message the real NATS sink wrote in
// each format and finds each item whole (types and digits) where the
// format keeps it. The program of testdata/subscriber, a module of its
// own, unmarshals the same items with attributevalue.UnmarshalMap
// (TestSubscriberOutsideTheModule).
func TestDecodeRealSink(t *testing.T) {
	addr, stream := archiveToNATS(t)
	ttl := restoretest.T0.Add(time.Minute)
	for _, s := range streams {
		t.Run(s.name, func(t *testing.T) {
			format := s.format
			if format == "" {
				format = natsmsg.DefaultFormat
			}
			seen := map[string]bool{}
			for _, m := range readStream(t, addr, s.name) {
				ev, err := subscribe.DecodeJetStream(m)
				if err != nil {
					t.Fatalf("%s: %v", m.Subject(), err)
				}
				if seen[ev.ID] {
					t.Fatalf("event %s twice", ev.ID)
				}
				seen[ev.ID] = true
				if ev.Format != format || ev.Table != "orders" || ev.Kind != event.Expired || ev.EventName != "REMOVE" ||
					ev.DeletedBy != event.DeletedByTTL || ev.Shard == "" || ev.Sequence == "" || ev.ID != m.Headers().Get(natsmsg.HeaderMsgID) ||
					ev.Region != "us-east-1" { // the engine's
					t.Fatalf("decoded %+v", ev)
				}
				rec, ok := stream[ev.ID]
				if !ok || !strings.HasPrefix(ev.ID, event.ExpiryIDPrefix) {
					t.Fatalf("event %s: not an expiry of the stream", ev.ID)
				}
				if format != natsmsg.FormatItem && ev.EventID != rec.EventID {
					t.Fatalf("event %s: EventID %q, want the stream's %q", ev.ID, ev.EventID, rec.EventID)
				}
				if want := event.ToDynamoDB(rec.Keys); !reflect.DeepEqual(ev.Keys, want) {
					t.Fatalf("Keys %#v, want %#v", ev.Keys, want)
				}
				if format == natsmsg.FormatItem {
					checkItemFormat(t, ev)
					continue
				}
				if want := event.ToDynamoDB(rec.OldImage); !reflect.DeepEqual(ev.Item, want) {
					t.Fatalf("event %s: item %#v, want %#v", ev.ID, ev.Item, want)
				}
				if ev.TTLAttribute != "expires" || ev.TTLValue != strconv.FormatInt(ttl.Unix(), 10) || !ev.TTLTime.Equal(ttl) ||
					ev.DeletionTime.IsZero() || !ev.Time.Equal(ev.DeletionTime) || ev.TTLLag != ev.DeletionTime.Sub(ttl) {
					t.Fatalf("times and TTL: %+v", ev)
				}
				checkCloudEvent(t, m.Headers(), ev, format)
			}
			if len(seen) != expiries {
				t.Fatalf("%d events, want %d", len(seen), expiries)
			}
		})
	}
}

// checkItemFormat checks what the item format keeps and what it loses
// (the package doc's list).
func checkItemFormat(t *testing.T, ev subscribe.Event) {
	t.Helper()
	if _, ok := ev.Item["b"].(*ddb.AttributeValueMemberS); !ok {
		t.Errorf("item format: binary arrived as %T, want the base64 string", ev.Item["b"])
	}
	if _, ok := ev.Item["ss"].(*ddb.AttributeValueMemberL); !ok {
		t.Errorf("item format: a string set arrived as %T, want a list", ev.Item["ss"])
	}
	if n, ok := ev.Item["n38"].(*ddb.AttributeValueMemberN); !ok || len(n.Value) != 38 {
		t.Errorf("item format: n38 arrived as %#v, want its 38 digits", ev.Item["n38"])
	}
	if !ev.Time.IsZero() || ev.TTLAttribute != "" || ev.CloudEvent != nil {
		t.Errorf("item format: decoded what it does not carry: %+v", ev)
	}
}

// checkCloudEvent checks the ce- headers of a message (cloudevents
// format) or their absence (envelope), raw and decoded.
func checkCloudEvent(t *testing.T, h nats.Header, ev subscribe.Event, format string) {
	t.Helper()
	if format != natsmsg.FormatCloudEvents {
		if ev.CloudEvent != nil || h.Get(natsmsg.CESpecVersion) != "" {
			t.Fatalf("%s message with CloudEvents attributes", format)
		}
		return
	}
	ceTime, err := time.Parse(time.RFC3339, h.Get(natsmsg.CETime))
	if h.Get(natsmsg.CESpecVersion) != "1.0" || h.Get(natsmsg.CEID) != h.Get(natsmsg.HeaderMsgID) ||
		h.Get(natsmsg.CEType) != "io.ttl-archiver.item.expired" || h.Get(natsmsg.CESource) == "" || err != nil {
		t.Fatalf("ce- headers %v (ce-time: %v)", h, err)
	}
	ce := ev.CloudEvent
	if ce == nil || ce.ID != ev.ID || !ce.Time.Equal(ceTime) || !ce.Time.Equal(ev.Time) ||
		ce.Extensions["dynamodbtable"] != "orders" || ce.Extensions["dynamodbsequence"] != ev.Sequence ||
		ce.Extensions["ttlattribute"] != "expires" || ce.Extensions["deletedby"] != event.DeletedByTTL ||
		ce.Extensions["dynamodbregion"] != ev.Region {
		t.Fatalf("CloudEvent %+v", ce)
	}
}
