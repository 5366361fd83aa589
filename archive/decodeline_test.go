package archive

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// expiryEvent is an expired item's event, with a binary attribute, a
// string beyond ASCII and its TTL, as AppendLine writes it.
func expiryEvent() event.Event {
	item := event.Item{
		"pk":  &types.AttributeValueMemberS{Value: "user#1 ünïcode"},
		"b":   &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 0xff}},
		"ttl": &types.AttributeValueMemberN{Value: "1772600000"},
	}
	return event.Event{Kind: event.Expired, Table: "T", EventID: "e1", EventName: "REMOVE", SequenceNumber: "100", ShardID: "s", StreamARN: "arn",
		Region: "eu-west-1", ApproximateCreationTime: time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.UTC), Keys: event.Item{"pk": item["pk"]},
		OldImage: item, TTLAttribute: "ttl", TTLValue: "1772600000", TTLTime: time.Unix(1772600000, 0).UTC(), DeletedBy: event.DeletedByTTL}
}

// TestFastDecodeLineExpiryID: the fast path hashes an expiry's message ID
// from the line's own Item and Keys, with or without building the
// images, and gets what event.IDHasher computes from the event; it
// declines lines whose bytes are not AppendLine's canonical ones, whose
// identity DecodeLine's event then gives.
func TestFastDecodeLineExpiryID(t *testing.T) {
	e := expiryEvent()
	x := event.NewIDHasher()
	d, _ := x.Digest(&e)
	line := event.MarshalLine(&e)
	keysOnly := e
	keysOnly.OldImage = nil
	for _, tc := range []struct {
		name   string
		line   string
		fast   bool
		expiry bool
	}{
		{"canonical", string(line), true, true},
		{"keys only", string(event.MarshalLine(&keysOnly)), true, false},
		{"names out of order", strings.Replace(string(line), `{"Item":{"b":{"B":"AAEC/w=="},`, `{"Item":{"ttl":{"N":"1772600000"},"b":{"B":"AAEC/w=="},`, 1), false, true},
		{"a name twice", strings.Replace(string(line), `{"Item":{"b":{"B":"AAEC/w=="},`, `{"Item":{"b":{"B":"AAEC/w=="},"b":{"B":"AAEC/w=="},`, 1), false, true},
		{"raw U+2028", strings.Replace(string(line), `"user#1 ünïcode"`, "\"user#1 \u2028\"", -1), false, true},
		{"base64 padding bits", strings.Replace(string(line), `"AAEC/w=="`, `"AAEC/x=="`, 1), false, true},
	} {
		for _, skip := range []bool{false, true} {
			var got decoded
			decodeLine(&got, "k", 1, []byte(tc.line), &event.LineDecoder{}, decodeOpts{skipImages: skip, crossRegion: true})
			if got.err != nil {
				t.Fatalf("%s: %v", tc.name, got.err)
			}
			var fe event.Event
			_, fast := new(event.LineDecoder).DecodeFast(&fe, []byte(tc.line), skip)
			if fast != tc.fast {
				t.Errorf("%s (skip %v): fast path took it: %v, want %v", tc.name, skip, fast, tc.fast)
			}
			if (got.id.kind == idExpiry) != tc.expiry || (tc.name == "canonical" && got.id != expiryIdentity(d)) {
				t.Errorf("%s (skip %v): identity %+v", tc.name, skip, got.id)
			}
		}
	}
}

// FuzzDecodeLineIdentity: every line's identity, fast path or not, is
// the one DecodeLine's event has (event's FuzzFastDecodeLine holds the
// fast path's events to DecodeLine's).
func FuzzDecodeLineIdentity(f *testing.F) {
	e := expiryEvent()
	f.Add(event.MarshalLine(&e))
	e.Kind, e.DeletedBy = event.Deleted, event.DeletedByOther
	f.Add(event.MarshalLine(&e))
	names := &event.LineDecoder{}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, skip := range []bool{false, true} {
			var d decoded
			decodeLine(&d, "k", 1, line, names, decodeOpts{skipImages: skip, crossRegion: true})
			if want, err := event.DecodeLine(line); err == nil && d.err == nil {
				// A line without an event ID is its bytes (decodeLine's).
				if id := newIdentity(&want, names.IDHasher()); !id.none() && d.id != id {
					t.Fatalf("%q (skip images %v): identity %+v, DecodeLine's event's %+v", line, skip, d.id, id)
				}
			}
		}
	})
}
