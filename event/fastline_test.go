package event

import (
	"bytes"
	"cmp"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// fastLineEvents are events of every shape AppendLine writes.
func fastLineEvents() []Event {
	t := time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.UTC)
	item := Item{
		"pk":   &types.AttributeValueMemberS{Value: "user#1 ünïcode"},
		"n":    &types.AttributeValueMemberN{Value: "-12345678901234567890123456789012345678e-3"},
		"b":    &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 0xff}},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{1}, {}}},
		"m":    &types.AttributeValueMemberM{Value: Item{"x": &types.AttributeValueMemberNULL{Value: true}, "e": &types.AttributeValueMemberM{Value: Item{}}}},
		"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberBOOL{Value: false}, &types.AttributeValueMemberL{Value: []types.AttributeValue{}}}},
		"t":    &types.AttributeValueMemberBOOL{Value: true},
		"esc":  &types.AttributeValueMemberS{Value: "quote \" and \n newline"},
		"ttl":  &types.AttributeValueMemberN{Value: "1772600000"},
		"ekey": &types.AttributeValueMemberS{Value: ""},
	}
	keys := Item{"pk": item["pk"]}
	return []Event{
		{Kind: Expired, Table: "T", EventID: "e1", EventName: "REMOVE", SequenceNumber: "100", ShardID: "s", StreamARN: "arn", Region: "eu-west-1",
			ApproximateCreationTime: t, Keys: keys, OldImage: item, SizeBytes: 123, TTLAttribute: "ttl", TTLValue: "1772600000",
			TTLTime: time.Unix(1772600000, 0).UTC(), TTLLag: -1500 * time.Millisecond, DeletedBy: DeletedByTTL},
		{Kind: Modified, Table: "T", EventID: "e2", EventName: "MODIFY", SequenceNumber: "101", Keys: keys, NewImage: keys, OldImage: keys, ApproximateCreationTime: t},
		{Kind: Inserted, Table: "T", EventID: "e3", EventName: "INSERT", NewImage: keys},
		{Kind: Deleted, Table: "T", EventID: "e4", Keys: keys, TTLLag: 3*time.Second + 1},
		{Kind: Deleted, Table: "T", EventID: "e5", EventName: "REMOVE", DeadLetter: &DeadLetter{Sink: "s3://b", Reason: ReasonPermanent}},
		// A line written before lines named their Region: it is the
		// stream ARN's.
		{Kind: Expired, Table: "T", EventID: "e6", EventName: "REMOVE", SequenceNumber: "7", ShardID: "s", Keys: keys, OldImage: keys,
			StreamARN: "arn:aws:dynamodb:ap-southeast-2:123456789012:table/T/stream/2026-03-04T00:00:00.000"},
		{Kind: Expired, Table: "T", EventID: "e7", EventName: "REMOVE", SequenceNumber: "7", ShardID: "s", Keys: keys, OldImage: keys,
			StreamARN: "arn:aws:dynamodb:us-west-2:123456789012:table/T/stream/2026-03-04T00:00:00.000", Region: "us-west-2"},
		// Deleted within the TTL's second: "ttlLagSeconds":0 is written.
		{Kind: Expired, Table: "T", EventID: "e8", EventName: "REMOVE", SequenceNumber: "8", ShardID: "s", Keys: keys, OldImage: keys,
			ApproximateCreationTime: time.Unix(1772600000, 0).UTC(), TTLAttribute: "ttl", TTLValue: "1772600000", TTLTime: time.Unix(1772600000, 0).UTC()},
	}
}

// TestFastDecodeLineMatchesDecodeLine: on AppendLine's own lines the fast
// path decodes (but for dead letters, which it declines) and
// agrees with DecodeLine, and DecodeText with DecodeLineText.
func TestFastDecodeLineMatchesDecodeLine(t *testing.T) {
	d := &LineDecoder{}
	for _, e := range fastLineEvents() {
		line := MarshalLine(&e)
		checkDecodeText(t, d, line)
		got, ok := fastDecode(line, &d.in, false)
		want, err := DecodeLine(line)
		if err != nil {
			t.Fatalf("%s: DecodeLine: %v", line, err)
		}
		if wantOK := e.DeadLetter == nil; ok != wantOK {
			t.Fatalf("%s: fast path ok = %v, want %v", line, ok, wantOK)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nfast %+v\nwant %+v", line, got, want)
		}
		if wantRegion := cmp.Or(e.Region, RegionOf(e.StreamARN)); want.Region != wantRegion {
			t.Errorf("%s: Region %q, want %q", line, want.Region, wantRegion)
		}
		skipped, ok := fastDecode(line, &d.in, true)
		want.Keys, want.OldImage, want.NewImage = nil, nil, nil
		if ok != (e.DeadLetter == nil) || (ok && !reflect.DeepEqual(skipped, want)) {
			t.Errorf("%s: skipping images: ok %v\nfast %+v\nwant %+v", line, ok, skipped, want)
		}
	}
	// An escape AppendString does not write (it writes "A") is declined.
	line := bytes.Replace(MarshalLine(&fastLineEvents()[0]), []byte(`ünïcode"`), []byte(`\u0041"`), 1)
	if _, ok := fastDecode(line, nil, false); ok {
		t.Errorf("%s: a string escaped otherwise than AppendString does was not declined", line)
	}
}

// FuzzFastDecodeLine holds the fast path to DecodeLine: whatever it
// accepts, DecodeLine decodes to the same event; and DecodeText to
// DecodeLineText, fast or not.
func FuzzFastDecodeLine(f *testing.F) {
	for _, e := range fastLineEvents() {
		f.Add(MarshalLine(&e))
	}
	f.Add([]byte(`{"Item":{},"Keys":{},"Metadata":{"kind":"expired","table":"","eventID":"","eventName":"","sequenceNumber":"","shardId":"","streamArn":"","sizeBytes":-0,"ttlLagSeconds":0.5}}`))
	f.Add([]byte(`{"Item":{"k":{"S":"a"}},"Keys":{},"Metadata":{"kind":"deleted","table":"T","eventID":"e","eventName":"REMOVE","sequenceNumber":"1","shardId":"s","streamArn":"arn","image":"keys-only"}}`))
	d := &LineDecoder{}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecodeText(t, d, line)
		for _, skip := range []bool{false, true} {
			got, ok := fastDecode(line, &d.in, skip)
			if !ok {
				continue
			}
			want, err := DecodeLine(line)
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

// checkDecodeText fails t unless d.DecodeText gives what DecodeLineText
// gives for line: the same event, text and error.
func checkDecodeText(t *testing.T, d *LineDecoder, line []byte) {
	t.Helper()
	got, gotText, gotErr := d.DecodeText(line)
	want, wantText, wantErr := DecodeLineText(line)
	if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) || !sameText(gotText, wantText) {
		t.Fatalf("%q: DecodeText\n%+v %+v %v\nDecodeLineText\n%+v %+v %v", line, got, gotText, gotErr, want, wantText, wantErr)
	}
}

// sameText reports whether a and b hold the same bytes (nil and empty
// apart).
func sameText(a, b LineText) bool {
	same := func(x, y []byte) bool { return (x == nil) == (y == nil) && bytes.Equal(x, y) }
	return a.KeysOnly == b.KeysOnly && same(a.Item, b.Item) && same(a.Keys, b.Keys) && same(a.OldImage, b.OldImage)
}

// BenchmarkDecodeLine compares the fast path with DecodeLine on an
// expired session item's line.
func BenchmarkDecodeLine(b *testing.B) {
	e := fastLineEvents()[0]
	delete(e.OldImage, "esc")
	line := MarshalLine(&e)
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
			if _, err := DecodeLine(line); err != nil {
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
func fastDecode(line []byte, names *interner, skipImages bool) (Event, bool) {
	var e Event
	_, ok := fastDecodeLine(&e, line, names, skipImages, nil)
	return e, ok
}
