package archive

import (
	"cmp"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// fastLineEvents are events of every shape AppendLine writes.
func fastLineEvents() []event.Event {
	t := time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.UTC)
	item := event.Item{
		"pk":   &types.AttributeValueMemberS{Value: "user#1 ünïcode"},
		"n":    &types.AttributeValueMemberN{Value: "-12345678901234567890123456789012345678e-3"},
		"b":    &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 0xff}},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{1}, {}}},
		"m":    &types.AttributeValueMemberM{Value: event.Item{"x": &types.AttributeValueMemberNULL{Value: true}, "e": &types.AttributeValueMemberM{Value: event.Item{}}}},
		"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberBOOL{Value: false}, &types.AttributeValueMemberL{Value: []types.AttributeValue{}}}},
		"t":    &types.AttributeValueMemberBOOL{Value: true},
		"esc":  &types.AttributeValueMemberS{Value: "quote \" and \n newline"},
		"ttl":  &types.AttributeValueMemberN{Value: "1772600000"},
		"ekey": &types.AttributeValueMemberS{Value: ""},
	}
	keys := event.Item{"pk": item["pk"]}
	return []event.Event{
		{Kind: event.Expired, Table: "T", EventID: "e1", EventName: "REMOVE", SequenceNumber: "100", ShardID: "s", StreamARN: "arn", Region: "eu-west-1",
			ApproximateCreationTime: t, Keys: keys, OldImage: item, SizeBytes: 123, TTLAttribute: "ttl", TTLValue: "1772600000",
			TTLTime: time.Unix(1772600000, 0).UTC(), TTLLag: -1500 * time.Millisecond, DeletedBy: event.DeletedByTTL},
		{Kind: event.Modified, Table: "T", EventID: "e2", EventName: "MODIFY", SequenceNumber: "101", Keys: keys, NewImage: keys, OldImage: keys, ApproximateCreationTime: t},
		{Kind: event.Inserted, Table: "T", EventID: "e3", EventName: "INSERT", NewImage: keys},
		{Kind: event.Deleted, Table: "T", EventID: "e4", Keys: keys, TTLLag: 3*time.Second + 1},
		{Kind: event.Deleted, Table: "T", EventID: "e5", EventName: "REMOVE", DeadLetter: &event.DeadLetter{Sink: "s3://b", Reason: event.ReasonPermanent}},
		// A line written before lines named their Region: it is the
		// stream ARN's.
		{Kind: event.Expired, Table: "T", EventID: "e6", EventName: "REMOVE", SequenceNumber: "7", ShardID: "s", Keys: keys, OldImage: keys,
			StreamARN: "arn:aws:dynamodb:ap-southeast-2:123456789012:table/T/stream/2026-03-04T00:00:00.000"},
		{Kind: event.Expired, Table: "T", EventID: "e7", EventName: "REMOVE", SequenceNumber: "7", ShardID: "s", Keys: keys, OldImage: keys,
			StreamARN: "arn:aws:dynamodb:us-west-2:123456789012:table/T/stream/2026-03-04T00:00:00.000", Region: "us-west-2"},
		// Deleted within the TTL's second: "ttlLagSeconds":0 is written.
		{Kind: event.Expired, Table: "T", EventID: "e8", EventName: "REMOVE", SequenceNumber: "8", ShardID: "s", Keys: keys, OldImage: keys,
			ApproximateCreationTime: time.Unix(1772600000, 0).UTC(), TTLAttribute: "ttl", TTLValue: "1772600000", TTLTime: time.Unix(1772600000, 0).UTC()},
	}
}

// TestFastDecodeLineMatchesDecodeLine: on AppendLine's own lines the fast
// path decodes (but for escapes and dead letters, which it declines) and
// agrees with DecodeLine.
func TestFastDecodeLineMatchesDecodeLine(t *testing.T) {
	for i, e := range fastLineEvents() {
		if i == 0 {
			delete(e.OldImage, "esc")
		}
		line := event.MarshalLine(&e)
		got, ok := fastDecode(line, &interner{}, false)
		want, err := event.DecodeLine(line)
		if err != nil {
			t.Fatalf("%s: DecodeLine: %v", line, err)
		}
		if wantOK := e.DeadLetter == nil; ok != wantOK {
			t.Fatalf("%s: fast path ok = %v, want %v", line, ok, wantOK)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nfast %+v\nwant %+v", line, got, want)
		}
		if wantRegion := cmp.Or(e.Region, event.RegionOf(e.StreamARN)); want.Region != wantRegion {
			t.Errorf("%s: Region %q, want %q", line, want.Region, wantRegion)
		}
		skipped, ok := fastDecode(line, &interner{}, true)
		want.Keys, want.OldImage, want.NewImage = nil, nil, nil
		if ok != (e.DeadLetter == nil) || (ok && !reflect.DeepEqual(skipped, want)) {
			t.Errorf("%s: skipping images: ok %v\nfast %+v\nwant %+v", line, ok, skipped, want)
		}
	}
	if _, ok := fastDecode(event.MarshalLine(&fastLineEvents()[0]), nil, false); ok {
		t.Error("a line with an escaped string was not declined")
	}
}

// TestFastDecodeLineExpiryID: the fast path hashes an expiry's message ID
// from the line's own Item and Keys, with or without building the
// images, and gets what event.IDHasher computes from the event; it
// declines lines whose bytes are not AppendLine's canonical ones, whose
// identity DecodeLine's event then gives.
func TestFastDecodeLineExpiryID(t *testing.T) {
	e := fastLineEvents()[0]
	delete(e.OldImage, "esc")
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
			decodeLine(&got, "k", 1, []byte(tc.line), &interner{}, decodeOpts{skipImages: skip, crossRegion: true})
			if got.err != nil {
				t.Fatalf("%s: %v", tc.name, got.err)
			}
			_, fast := fastDecode([]byte(tc.line), &interner{}, skip)
			if fast != tc.fast {
				t.Errorf("%s (skip %v): fast path took it: %v, want %v", tc.name, skip, fast, tc.fast)
			}
			if (got.id.kind == idExpiry) != tc.expiry || (tc.name == "canonical" && got.id != expiryIdentity(d)) {
				t.Errorf("%s (skip %v): identity %+v", tc.name, skip, got.id)
			}
		}
	}
}

// FuzzFastDecodeLine holds the fast path to DecodeLine: whatever it
// accepts, DecodeLine decodes to the same event, and every line's
// identity is the one DecodeLine's event has.
func FuzzFastDecodeLine(f *testing.F) {
	for _, e := range fastLineEvents() {
		f.Add(event.MarshalLine(&e))
	}
	f.Add([]byte(`{"Item":{},"Keys":{},"Metadata":{"kind":"expired","table":"","eventID":"","eventName":"","sequenceNumber":"","shardId":"","streamArn":"","sizeBytes":-0,"ttlLagSeconds":0.5}}`))
	names := &interner{}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, skip := range []bool{false, true} {
			var d decoded
			decodeLine(&d, "k", 1, line, names, decodeOpts{skipImages: skip, crossRegion: true})
			if want, err := event.DecodeLine(line); err == nil && d.err == nil {
				// A line without an event ID is its bytes (decodeLine's).
				if id := newIdentity(&want, names.hasher()); !id.none() && d.id != id {
					t.Fatalf("%q (skip images %v): identity %+v, DecodeLine's event's %+v", line, skip, d.id, id)
				}
			}
			got, ok := fastDecode(line, names, skip)
			if !ok {
				continue
			}
			want, err := event.DecodeLine(line)
			if err != nil {
				t.Fatalf("fast path (skip images %v) accepted %q, DecodeLine: %v", skip, line, err)
			}
			if skip {
				want.Keys, want.OldImage, want.NewImage = nil, nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q (skip images %v):\nfast %+v\nwant %+v", line, skip, got, want)
			}
		}
	})
}

// BenchmarkDecodeLine compares the fast path with event.DecodeLine on an
// expired session item's line.
func BenchmarkDecodeLine(b *testing.B) {
	e := fastLineEvents()[0]
	delete(e.OldImage, "esc")
	line := event.MarshalLine(&e)
	b.Run("fast", func(b *testing.B) {
		names := &interner{}
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fastDecode(line, names, false); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("fast, images skipped", func(b *testing.B) {
		names := &interner{}
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fastDecode(line, names, true); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("DecodeLine", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := event.DecodeLine(line); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzParseUTC holds parseUTC to time.Parse(RFC3339Nano).
func FuzzParseUTC(f *testing.F) {
	for _, s := range []string{"2026-03-04T05:06:07Z", "2026-03-04T05:06:07.890123456Z", "2024-02-29T23:59:59.5Z",
		"2025-02-29T00:00:00Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:60Z", "2026-03-04T05:06:07.Z", "2026-13-04T05:06:07Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseUTC([]byte(s))
		if !ok {
			return
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("parseUTC accepted %q, time.Parse: %v", s, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: parseUTC %v, time.Parse %v", s, got, want)
		}
	})
}

// fastDecode runs fastDecodeLine on a new event.
func fastDecode(line []byte, names *interner, skipImages bool) (event.Event, bool) {
	var e event.Event
	_, ok := fastDecodeLine(&e, line, names, skipImages)
	return e, ok
}
