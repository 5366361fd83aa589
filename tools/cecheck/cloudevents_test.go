// Package cecheck reads the archiver's NATS messages with
// cloudevents/sdk-go. It is a module of its own so that the archiver's
// go.mod never carries the SDK: run it with `go test .` in this directory
// (the Makefile's unit target does). The archiver's own tests
// (sinks/natssink/cloudevents_test.go, sinks/natssink/messages_test.go)
// hold the messages to the binding's text; this one shows that a
// CloudEvents SDK takes them.
//
// sdk-go's NATS protocol modules are not used: their binary reader differs
// from the binding (1.0.3) in places, the protocol the archiver follows.
// readBinary below is the binding's receiving side in a few lines, and
// everything the SDK does with what it reads (attribute and extension
// names, URI-references, timestamps, Validate) is the SDK's.
package cecheck

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/natstest"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks"
)

// natsMessage is a NATS message as sdk-go's binding.Message, read as the
// NATS protocol binding says: structured when Content-Type is
// application/cloudevents, else binary; each ce- header one attribute,
// its value percent-decoded once and refused when not UTF-8.
type natsMessage struct{ msg jetstream.Msg }

var ceSpecs = spec.WithPrefix(natsmsg.CEPrefix)

func (m natsMessage) ReadEncoding() binding.Encoding {
	if strings.HasPrefix(strings.ToLower(m.msg.Headers().Get("Content-Type")), "application/cloudevents") {
		return binding.EncodingStructured
	}
	return binding.EncodingBinary
}

func (m natsMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m natsMessage) ReadBinary(ctx context.Context, w binding.BinaryWriter) error {
	h := m.msg.Headers()
	version := ceSpecs.Version(h.Get(natsmsg.CESpecVersion))
	if version == nil {
		return binding.ErrUnknownEncoding
	}
	for name, vals := range h {
		lower := strings.ToLower(name)
		if !strings.HasPrefix(lower, natsmsg.CEPrefix) || len(vals) == 0 {
			continue
		}
		v, err := url.PathUnescape(vals[0])
		if err != nil || !utf8.ValidString(v) {
			return fmt.Errorf("header %s = %q: not a percent-encoded UTF-8 value (%v)", name, vals[0], err)
		}
		if attr := version.Attribute(lower); attr != nil {
			err = w.SetAttribute(attr, v)
		} else {
			err = w.SetExtension(strings.TrimPrefix(lower, natsmsg.CEPrefix), v)
		}
		if err != nil {
			return err
		}
	}
	return w.SetData(bytes.NewReader(m.msg.Data()))
}

// GetAttribute and GetExtension make natsMessage a
// binding.MessageMetadataReader, which ToEvent asks for.
func (m natsMessage) GetAttribute(k spec.Kind) (spec.Attribute, interface{}) {
	version := ceSpecs.Version(m.msg.Headers().Get(natsmsg.CESpecVersion))
	if version == nil {
		return nil, nil
	}
	attr := version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	v, err := url.PathUnescape(m.msg.Headers().Get(attr.PrefixedName()))
	if err != nil || v == "" {
		return attr, nil
	}
	return attr, v
}

func (m natsMessage) GetExtension(name string) interface{} {
	v, err := url.PathUnescape(m.msg.Headers().Get(natsmsg.CEPrefix + name))
	if err != nil || v == "" {
		return nil
	}
	return v
}

func (m natsMessage) Finish(error) error { return nil }

// testEvents are an expired item with every attribute type and a key that
// needs percent-encoding, a swept expiry, a user delete and an insert.
func testEvents() []event.Event {
	at := time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)
	var evs []event.Event
	for i, k := range []event.Kind{event.Expired, event.Expired, event.Deleted, event.Inserted} {
		keys := event.Item{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("user #%d \"€\" 100%%", i)}}
		img := event.Item{"pk": keys["pk"], "n": &types.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"},
			"b": &types.AttributeValueMemberB{Value: []byte{0, 0xff}}, "ss": &types.AttributeValueMemberSS{Value: []string{"a"}},
			"expiresAt": &types.AttributeValueMemberN{Value: "1772600000"}}
		e := event.Event{Kind: k, Table: "sessions", ShardID: "shardId-000001", EventID: fmt.Sprintf("e-%d", i),
			StreamARN: "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/stream/2026-03-04T00:00:00.000", Region: "eu-west-1",
			SequenceNumber: fmt.Sprintf("1%020d", i+1), EventName: "REMOVE", ApproximateCreationTime: at,
			Keys: keys, OldImage: img, TTLAttribute: "expiresAt", TTLValue: "1772600000", DeletedBy: event.DeletedByTTL}
		switch i {
		case 1, 2:
			e.DeletedBy = event.DeletedByOther
		case 3:
			e.EventName, e.NewImage, e.OldImage, e.TTLValue, e.DeletedBy = "INSERT", img, nil, "", ""
		}
		evs = append(evs, e)
	}
	return evs
}

// TestSDKReadsTheMessages: messages the sink publishes with
// format=cloudevents are CloudEvents to sdk-go: binary mode, every attribute and
// extension accepted, Validate passes, and the event's attributes and data
// are the stream record's.
func TestSDKReadsTheMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := natstest.Start(t).Addr()
	sink, _, err := sinks.Open(ctx, "nats://"+addr+"?subject=ce.{table}.{kind}&create-stream=CE&events=all&format=cloudevents", sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	evs := testEvents()
	acked := make(chan error, 1)
	if err := sink.Write(ctx, sinks.Batch{ShardID: "shardId-000001", Events: evs}, func(err error) { acked <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := readStream(ctx, t, addr, "CE", len(evs))
	for i, m := range msgs {
		e := evs[i]
		msg := natsMessage{m}
		if enc := msg.ReadEncoding(); enc != binding.EncodingBinary {
			t.Fatalf("message %d: encoding %v, want binary", i, enc)
		}
		ce, err := binding.ToEvent(ctx, msg)
		if err != nil {
			t.Fatalf("message %d: sdk-go: %v", i, err)
		}
		if err := ce.Validate(); err != nil {
			t.Fatalf("message %d: sdk-go Validate: %v", i, err)
		}
		want := map[string]string{
			"id": event.MessageID(&e), "source": "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions",
			"type": "io.ttl-archiver.item." + string(e.Kind), "subject": string(event.MarshalItem(e.Keys)),
			"datacontenttype": "application/json", "time": e.ApproximateCreationTime.Format(time.RFC3339Nano),
		}
		got := map[string]string{
			"id": ce.ID(), "source": ce.Source(), "type": ce.Type(), "subject": ce.Subject(),
			"datacontenttype": ce.DataContentType(), "time": ce.Time().UTC().Format(time.RFC3339Nano),
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("message %d: %s = %q, want %q", i, k, got[k], v)
			}
		}
		ext := ce.Extensions()
		for k, v := range map[string]string{"dynamodbsequence": e.SequenceNumber, "dynamodbtable": "sessions", "dynamodbshard": e.ShardID, "dynamodbregion": "eu-west-1", "deletedby": e.DeletedBy, "ttlvalue": e.TTLValue} {
			if s, _ := ext[k].(string); s != v {
				t.Errorf("message %d: extension %s = %v, want %q", i, k, ext[k], v)
			}
		}
		line, err := event.DecodeLine(ce.Data())
		if err != nil || line.EventID != e.EventID || line.SequenceNumber != e.SequenceNumber {
			t.Errorf("message %d: data is not the archive line (%v): %s", i, err, ce.Data())
		}
	}
}

// readStream reads n messages of stream name in order.
func readStream(ctx context.Context, t *testing.T, addr, name string, n int) []jetstream.Msg {
	_, js := natstest.Connect(t, addr)
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(n)
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for m := range batch.Messages() {
		out = append(out, m)
	}
	if len(out) != n {
		t.Fatalf("read %d of %d messages", len(out), n)
	}
	return out
}
