package subscribe_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats.go"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/subscribe"
)

// sample is an expiry as the consumer hands it to the sinks.
func sample() *event.Event {
	del := time.Date(2026, 3, 4, 5, 6, 7, 800, time.UTC)
	ttl := del.Add(-90 * time.Second)
	keys := event.Item{"pk": &st.AttributeValueMemberS{Value: "a b%\"é"}}
	return &event.Event{
		Kind: event.Expired, Table: "orders", EventName: "REMOVE", EventID: "id-1",
		StreamARN: "arn:aws:dynamodb:us-east-1:1:table/orders/stream/x", Region: "us-east-1", ShardID: "shard-1",
		SequenceNumber: "1234567890123456789012345678901234567890", DeletedBy: event.DeletedByTTL,
		ApproximateCreationTime: del, Keys: keys,
		OldImage: event.Item{"pk": keys["pk"], "b": &st.AttributeValueMemberB{Value: []byte{0, 255}},
			"ttl": &st.AttributeValueMemberN{Value: "1772600737"}},
		TTLAttribute: "ttl", TTLValue: "1772600737", TTLTime: ttl, TTLLag: 90 * time.Second,
	}
}

// message renders e as the sink does in format, its headers as a
// hand-written sink would set them (docs/MESSAGES.md); edit changes them.
func message(format string, edit func(h nats.Header)) *nats.Msg {
	return messageOf(sample(), format, edit)
}

// messageOf is message for the event e.
func messageOf(e *event.Event, format string, edit func(h nats.Header)) *nats.Msg {
	keys := string(event.MarshalItem(e.Keys))
	h := nats.Header{
		natsmsg.HeaderMsgID: {event.MessageID(e)}, natsmsg.HeaderTable: {e.Table}, natsmsg.HeaderKind: {string(e.Kind)},
		natsmsg.HeaderKeys: {keys}, natsmsg.HeaderShard: {e.ShardID}, natsmsg.HeaderSequence: {e.SequenceNumber},
		natsmsg.HeaderEventName: {e.EventName}, natsmsg.HeaderRegion: {e.Region}, natsmsg.HeaderDeletedBy: {e.DeletedBy},
	}
	data := event.MarshalLine(e)
	switch format {
	case natsmsg.FormatItem:
		data = event.PlainJSON(e.OldImage)
	case natsmsg.FormatCloudEvents:
		for k, v := range map[string]string{
			natsmsg.CESpecVersion: "1.0", natsmsg.CEID: event.MessageID(e), natsmsg.CESource: strings.Split(e.StreamARN, "/stream/")[0],
			natsmsg.CEType: natsmsg.TypePrefix + "expired", natsmsg.CETime: "2026-03-04T05:06:07.0000008Z",
			natsmsg.CESubject: `{%22pk%22:{%22S%22:%22a%20b%25\%22%C3%A9%22}}`, natsmsg.CETable: "orders",
			natsmsg.CERegion: e.Region,
		} {
			h[k] = []string{v}
		}
	}
	if edit != nil {
		edit(h)
	}
	return &nats.Msg{Subject: "archiver.orders.expired", Header: h, Data: data}
}

func TestDecodeFormats(t *testing.T) {
	for _, format := range natsmsg.Formats {
		t.Run(format, func(t *testing.T) {
			ev, err := subscribe.Decode(message(format, nil))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Format != format || ev.ID != event.MessageID(sample()) || !strings.HasPrefix(ev.ID, event.ExpiryIDPrefix) || ev.Table != "orders" || ev.Kind != event.Expired ||
				ev.Sequence != sample().SequenceNumber || ev.Shard != "shard-1" || ev.DeletedBy != event.DeletedByTTL || ev.Region != "us-east-1" {
				t.Fatalf("%+v", ev)
			}
			if pk, _ := ev.Keys["pk"].(*ddb.AttributeValueMemberS); pk == nil || pk.Value != "a b%\"é" {
				t.Fatalf("Keys %#v", ev.Keys)
			}
			b := ev.Item["b"]
			if format == natsmsg.FormatItem {
				if s, _ := b.(*ddb.AttributeValueMemberS); s == nil || s.Value != "AP8=" || !ev.Time.IsZero() {
					t.Fatalf("item format: b %#v, time %v", b, ev.Time)
				}
				return
			}
			if ev.EventID != "id-1" {
				t.Fatalf("EventID %q, want the body's id-1", ev.EventID)
			}
			if bb, _ := b.(*ddb.AttributeValueMemberB); bb == nil || string(bb.Value) != "\x00\xff" {
				t.Fatalf("b %#v", b)
			}
			if !ev.DeletionTime.Equal(sample().ApproximateCreationTime) || ev.TTLLag != 90*time.Second || ev.TTLValue != "1772600737" {
				t.Fatalf("%+v", ev)
			}
			if format == natsmsg.FormatCloudEvents {
				ce, keys := ev.CloudEvent, string(event.MarshalItem(sample().Keys))
				if ce == nil || ce.Subject != keys || !ce.Time.Equal(ev.Time) || ce.Extensions["dynamodbtable"] != "orders" || ce.Extensions["dynamodbregion"] != "us-east-1" {
					t.Fatalf("CloudEvent %+v", ce)
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	set := func(name, v string) func(nats.Header) { return func(h nats.Header) { h[name] = []string{v} } }
	del := func(name string) func(nats.Header) { return func(h nats.Header) { delete(h, name) } }
	tests := []struct {
		format string
		edit   func(nats.Header)
		data   string // replaces the body when set
		want   string // the error names this
	}{
		{natsmsg.FormatEnvelope, del(natsmsg.HeaderMsgID), "", "header Nats-Msg-Id: missing"},
		{natsmsg.FormatEnvelope, set(natsmsg.HeaderTable, "other"), "", "header Archiver-Table"},
		{natsmsg.FormatEnvelope, set(natsmsg.HeaderMsgID, "id-1"), "", "header Nats-Msg-Id: \"id-1\" differs from the body's message ID"},
		{natsmsg.FormatEnvelope, nil, `{"Item":{},"Metadata":{"eventID":"id-1","kind":"gone"}}`, "Metadata.kind"},
		{natsmsg.FormatEnvelope, nil, `{"Item":{},"Metadata":`, "body"},
		{natsmsg.FormatEnvelope, set(natsmsg.HeaderKeys, `{"pk":`), "", "header Archiver-Keys"},
		{natsmsg.FormatCloudEvents, del(natsmsg.HeaderKeys), "", "header Archiver-Keys: missing"},
		{natsmsg.FormatItem, del(natsmsg.HeaderKeys), "", "header Archiver-Keys: missing"},
		{natsmsg.FormatItem, set(natsmsg.HeaderKeys, `{"pk":"x"}`), "", "header Archiver-Keys"},
		{natsmsg.FormatItem, set(natsmsg.HeaderKind, "gone"), "", "header Archiver-Kind"},
		{natsmsg.FormatItem, set(natsmsg.HeaderSequence, "12a"), "", "header Archiver-Sequence"},
		{natsmsg.FormatItem, set(natsmsg.HeaderDeletedBy, "me"), "", "header Archiver-Deleted-By"},
		{natsmsg.FormatItem, set(natsmsg.HeaderEventName, "DROP"), "", "header Archiver-Event-Name"},
		{natsmsg.FormatItem, nil, `[1]`, "body: item: an array"},
		{natsmsg.FormatItem, nil, `{"a":1} {}`, "body: item: more than one"},
		{natsmsg.FormatCloudEvents, set(natsmsg.CESpecVersion, "0.3"), "", "header ce-specversion"},
		{natsmsg.FormatCloudEvents, set(natsmsg.CEID, "id-2"), "", "header ce-id"},
		{natsmsg.FormatCloudEvents, set(natsmsg.CEType, "io.ttl-archiver.item.deleted"), "", "header ce-type"},
		{natsmsg.FormatCloudEvents, set(natsmsg.CETime, "yesterday"), "", "header ce-time"},
		{natsmsg.FormatCloudEvents, del(natsmsg.CESource), "", "header ce-source: missing"},
		{natsmsg.FormatCloudEvents, set(natsmsg.CESubject, "%zz"), "", "header ce-subject"},
		{natsmsg.FormatEnvelope, set(natsmsg.HeaderRegion, "eu-west-1"), "", "header Archiver-Region"},
		{natsmsg.FormatCloudEvents, set(natsmsg.HeaderRegion, ""), "", "header Archiver-Region"},
		{natsmsg.FormatCloudEvents, set(natsmsg.CERegion, "eu-west-1"), "", "header ce-dynamodbregion"},
		{natsmsg.FormatItem, set(natsmsg.HeaderRegion, "us east"), "", "header Archiver-Region"},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.want, func(t *testing.T) {
			m := message(tt.format, tt.edit)
			if tt.data != "" {
				m.Data = []byte(tt.data)
			}
			_, err := subscribe.Decode(m)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one naming %q", err, tt.want)
			}
		})
	}
	if _, err := subscribe.Decode(nil); err == nil {
		t.Fatal("Decode(nil) succeeded")
	}
}

// TestDecodeOneExpiryTwoRegions: the messages of one expiry read in two
// Regions of a global table (each its own stream record: Region, event
// ID, shard, sequence number, time, principal) have one ID in every
// format, and each keeps its own Region and event ID.
func TestDecodeOneExpiryTwoRegions(t *testing.T) {
	west := sample()
	west.StreamARN, west.Region = "arn:aws:dynamodb:eu-west-1:1:table/orders/stream/y", "eu-west-1"
	west.EventID, west.ShardID, west.SequenceNumber = "id-west", "shard-9", "99"
	west.ApproximateCreationTime = west.ApproximateCreationTime.Add(time.Second)
	west.DeletedBy = event.DeletedByOther
	for _, format := range natsmsg.Formats {
		a, err := subscribe.Decode(messageOf(sample(), format, nil))
		if err != nil {
			t.Fatal(err)
		}
		b, err := subscribe.Decode(messageOf(west, format, nil))
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if a.ID != b.ID || a.Region == b.Region || (format != natsmsg.FormatItem && (a.EventID != "id-1" || b.EventID != "id-west")) {
			t.Errorf("%s: IDs %q and %q, Regions %q and %q, event IDs %q and %q", format, a.ID, b.ID, a.Region, b.Region, a.EventID, b.EventID)
		}
	}
}

// TestDecodeWithoutRegion: a message published before messages named
// their Region (no Archiver-Region, no ce-dynamodbregion, no region in
// the line) still decodes; its Region is its body's streamArn's, and
// none in the item format.
func TestDecodeWithoutRegion(t *testing.T) {
	for _, format := range natsmsg.Formats {
		m := message(format, func(h nats.Header) { delete(h, natsmsg.HeaderRegion); delete(h, natsmsg.CERegion) })
		m.Data = []byte(strings.Replace(string(m.Data), `,"region":"us-east-1"`, "", 1))
		ev, err := subscribe.Decode(m)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		want := "us-east-1"
		if format == natsmsg.FormatItem {
			want = ""
		}
		if ev.Region != want {
			t.Errorf("%s: Region %q, want %q", format, ev.Region, want)
		}
	}
}

// TestDecodeItemFormatTypes lists what the item format's plain JSON
// becomes.
func TestDecodeItemFormatTypes(t *testing.T) {
	m := message(natsmsg.FormatItem, nil)
	m.Data = []byte(`{"s":"x","n":12345678901234567890123456789012345678,"f":-1.5e-3,"t":true,"z":null,"l":[1,"a"],"m":{"k":[]}}`)
	ev, err := subscribe.Decode(m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"s": "*types.AttributeValueMemberS", "n": "*types.AttributeValueMemberN", "f": "*types.AttributeValueMemberN",
		"t": "*types.AttributeValueMemberBOOL", "z": "*types.AttributeValueMemberNULL", "l": "*types.AttributeValueMemberL", "m": "*types.AttributeValueMemberM"}
	for k, typ := range want {
		if got := typeName(ev.Item[k]); got != typ {
			t.Errorf("%s: %s, want %s", k, got, typ)
		}
	}
	if n := ev.Item["n"].(*ddb.AttributeValueMemberN).Value; n != "12345678901234567890123456789012345678" {
		t.Errorf("n: %s: digits lost", n)
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *ddb.AttributeValueMemberS:
		return "*types.AttributeValueMemberS"
	case *ddb.AttributeValueMemberN:
		return "*types.AttributeValueMemberN"
	case *ddb.AttributeValueMemberBOOL:
		return "*types.AttributeValueMemberBOOL"
	case *ddb.AttributeValueMemberNULL:
		return "*types.AttributeValueMemberNULL"
	case *ddb.AttributeValueMemberL:
		return "*types.AttributeValueMemberL"
	case *ddb.AttributeValueMemberM:
		return "*types.AttributeValueMemberM"
	}
	return "other"
}

// FuzzDecode feeds Decode hostile bodies and header values: it returns an
// event or an error, never panics.
func FuzzDecode(f *testing.F) {
	for _, format := range natsmsg.Formats {
		m := message(format, nil)
		f.Add(format, string(m.Data), m.Header.Get(natsmsg.HeaderKeys), m.Header.Get(natsmsg.CETime), m.Header.Get(natsmsg.CESubject))
	}
	f.Fuzz(func(t *testing.T, format, data, keys, ceTime, ceSubject string) {
		m := message(format, func(h nats.Header) {
			h[natsmsg.HeaderKeys] = []string{keys}
			if _, ok := h[natsmsg.CESpecVersion]; ok {
				h[natsmsg.CETime], h[natsmsg.CESubject] = []string{ceTime}, []string{ceSubject}
			}
		})
		m.Data = []byte(data)
		ev, err := subscribe.Decode(m)
		if err == nil && ev.ID == "" {
			t.Fatal("an event without an ID")
		}
		if err != nil && errors.Unwrap(err) == nil && !strings.HasPrefix(err.Error(), "subscribe: ") {
			t.Fatalf("error %q does not say where it comes from", err)
		}
	})
}
