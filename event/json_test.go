package event

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// everyType is an item holding every DynamoDB attribute type, nested.
func everyType() Item {
	return Item{
		"pk":    &types.AttributeValueMemberS{Value: "user#1 \"quoted\" \n\t<&> é 😀 \u2028"},
		"n":     &types.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"},
		"frac":  &types.AttributeValueMemberN{Value: "-0.000000000000000000000000000000000001"},
		"exp":   &types.AttributeValueMemberN{Value: "1E+5"},
		"b":     &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 0xff, 0xfe}},
		"empty": &types.AttributeValueMemberB{Value: []byte{}},
		"ss":    &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":    &types.AttributeValueMemberNS{Value: []string{"1", "2.50"}},
		"bs":    &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"null":  &types.AttributeValueMemberNULL{Value: true},
		"t":     &types.AttributeValueMemberBOOL{Value: true},
		"f":     &types.AttributeValueMemberBOOL{Value: false},
		"m": &types.AttributeValueMemberM{Value: Item{
			"inner": &types.AttributeValueMemberN{Value: "7"},
			"deep":  &types.AttributeValueMemberM{Value: Item{"x": &types.AttributeValueMemberL{Value: []types.AttributeValue{}}}},
		}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "x"},
			&types.AttributeValueMemberN{Value: "0"},
			&types.AttributeValueMemberNULL{Value: true},
			&types.AttributeValueMemberM{Value: Item{}},
		}},
	}
}

func sampleEvent() Event {
	item := everyType()
	return Event{
		Kind:                    Expired,
		Table:                   "sessions",
		StreamARN:               "arn:aws:dynamodb:us-east-1:000000000000:table/sessions/stream/2026-01-01T00:00:00.000",
		Region:                  "us-east-1",
		ShardID:                 "shardId-00000001",
		SequenceNumber:          "000000000000000000123",
		EventID:                 "e-1",
		EventName:               "REMOVE",
		DeletedBy:               DeletedByTTL,
		ApproximateCreationTime: time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC),
		Keys:                    Item{"pk": item["pk"]},
		OldImage:                item,
		SizeBytes:               321,
		TTLAttribute:            "expiresAt",
		TTLValue:                "1767322800.25",
		TTLTime:                 time.Unix(1767322800, 250_000_000).UTC(),
		TTLLag:                  3*time.Hour + 4*time.Minute + 5*time.Second + 350*time.Millisecond + 7,
	}
}

func TestLineRoundTrip(t *testing.T) {
	removeEv := sampleEvent()
	insertEv := sampleEvent()
	insertEv.Kind, insertEv.EventName, insertEv.DeletedBy = Inserted, "INSERT", ""
	insertEv.NewImage, insertEv.OldImage = insertEv.OldImage, nil
	insertEv.TTLLag, insertEv.TTLTime, insertEv.TTLValue = 0, time.Time{}, ""
	modifyEv := sampleEvent()
	modifyEv.Kind, modifyEv.EventName, modifyEv.DeletedBy = Modified, "MODIFY", ""
	modifyEv.NewImage = Item{"pk": modifyEv.Keys["pk"], "v": &types.AttributeValueMemberN{Value: "2"}}
	negLag := sampleEvent()
	negLag.TTLLag = -1500 * time.Millisecond
	swept := sampleEvent() // expired, deleted by someone else (past-ttl)
	swept.DeletedBy = DeletedByOther
	userDelete := sampleEvent()
	userDelete.Kind, userDelete.DeletedBy = Deleted, DeletedByOther
	userDelete.TTLAttribute, userDelete.TTLValue, userDelete.TTLTime, userDelete.TTLLag = "", "", time.Time{}, 0
	dead := sampleEvent()
	dead.DeadLetter = &DeadLetter{Sink: "nats://127.0.0.1:4222", Reason: ReasonPermanent, Error: "maximum payload exceeded",
		Attempts: 3, FirstFailure: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	undecodable := Event{Kind: Undecodable, Table: "sessions", ShardID: "shardId-1",
		Keys: Item{"pk": &types.AttributeValueMemberS{Value: "a"}},
		DeadLetter: &DeadLetter{Reason: ReasonUndecodable, Error: "field eventName: unknown", Attempts: 0,
			Record: []byte(`{"eventName":"PUT","dynamodb":{"Keys":{"pk":{"S":"a"}}}}`)}}
	undecodable.NewImage = undecodable.Keys // what DecodeLine makes of the line's Item
	keysOnly := sampleEvent()               // a KEYS_ONLY (or NEW_IMAGE) stream's expiry
	keysOnly.OldImage, keysOnly.TTLValue, keysOnly.TTLTime, keysOnly.TTLLag = nil, "", time.Time{}, 0
	keysOnlyInsert := insertEv
	keysOnlyInsert.NewImage = nil
	zeroLag := sampleEvent() // deleted within the TTL's second
	zeroLag.TTLTime, zeroLag.TTLLag = zeroLag.ApproximateCreationTime, 0

	for name, e := range map[string]Event{"remove": removeEv, "insert": insertEv, "modify": modifyEv, "negative lag": negLag,
		"swept": swept, "user delete": userDelete, "dead letter": dead, "undecodable": undecodable,
		"keys only": keysOnly, "keys only insert": keysOnlyInsert, "zero lag": zeroLag} {
		t.Run(name, func(t *testing.T) {
			line := AppendLine(nil, &e)
			if !strings.HasSuffix(string(line), "}\n") || strings.Count(string(line), "\n") != 1 {
				t.Fatalf("not one line: %q", line)
			}
			if !json.Valid(line) {
				t.Fatalf("invalid JSON: %s", line)
			}
			got, err := DecodeLine(line)
			if err != nil {
				t.Fatalf("DecodeLine: %v\n%s", err, line)
			}
			if !got.ApproximateCreationTime.Equal(e.ApproximateCreationTime) || !got.TTLTime.Equal(e.TTLTime) {
				t.Fatalf("times differ: %v %v", got.ApproximateCreationTime, got.TTLTime)
			}
			got.ApproximateCreationTime, got.TTLTime = e.ApproximateCreationTime, e.TTLTime
			if !reflect.DeepEqual(got, e) {
				t.Fatalf("round trip differs:\n got %+v\nwant %+v\nline %s", got, e, line)
			}
			if marked := strings.Contains(string(line), `"image":"keys-only"`); marked != (e.Kind.Valid() && e.OldImage == nil && e.NewImage == nil) {
				t.Fatalf("image marker %v for images old=%v new=%v: %s", marked, e.OldImage != nil, e.NewImage != nil, line)
			}
			if again := AppendLine(nil, &got); string(again) != string(line) {
				t.Fatalf("re-rendering differs:\n%s%s", again, line)
			}
			checkLineText(t, line, got)
		})
	}
}

// checkLineText holds DecodeLineText to DecodeLine, which decoded line as
// want: the same event without images, the images' text as the line has
// it.
func checkLineText(t *testing.T, line []byte, want Event) {
	t.Helper()
	got, text, err := DecodeLineText(line)
	if err != nil {
		t.Fatalf("DecodeLineText: %v\n%s", err, line)
	}
	if keysOnly := want.KeysOnly(); text.KeysOnly != keysOnly {
		t.Errorf("DecodeLineText: KeysOnly %v, want %v", text.KeysOnly, keysOnly)
	}
	item, err := UnmarshalItem(text.Item)
	if err != nil {
		t.Fatalf("DecodeLineText: Item text: %v", err)
	}
	image := want.Image()
	if image == nil {
		image = Item{}
	}
	if !reflect.DeepEqual(item, image) && !(text.KeysOnly && reflect.DeepEqual(item, want.Keys)) {
		t.Errorf("DecodeLineText: Item text %s, want the image %s", text.Item, MarshalItem(image))
	}
	if hasOld := want.EventName == "MODIFY" && want.OldImage != nil && want.NewImage != nil; hasOld != (text.OldImage != nil) {
		t.Errorf("DecodeLineText: OldImage text %q, want one: %v", text.OldImage, hasOld)
	}
	want.NewImage, want.OldImage = nil, nil
	got.ApproximateCreationTime, got.TTLTime = want.ApproximateCreationTime, want.TTLTime
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeLineText: event\n got %+v\nwant %+v", got, want)
	}
}

func TestLineRestoresItem(t *testing.T) {
	e := sampleEvent()
	var l struct{ Item json.RawMessage }
	if err := json.Unmarshal(MarshalLine(&e), &l); err != nil {
		t.Fatal(err)
	}
	item, err := UnmarshalItem(l.Item)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(item, e.OldImage) {
		t.Fatalf("Item is not the old image: %s", l.Item)
	}
	var meta struct{ Metadata map[string]any }
	_ = json.Unmarshal(MarshalLine(&e), &meta)
	for k, want := range map[string]any{
		"kind": "expired", "table": "sessions", "eventID": "e-1", "sequenceNumber": "000000000000000000123",
		"deletionTime": "2026-01-02T03:04:05.6Z", "ttlValue": "1767322800.25", "ttlAttribute": "expiresAt",
		"deletedBy": "dynamodb-ttl",
	} {
		if meta.Metadata[k] != want {
			t.Errorf("Metadata.%s = %v, want %v", k, meta.Metadata[k], want)
		}
	}
}

// TestLineTTLLagWhenKnown: ttlLagSeconds is written whenever the TTL time
// and the deletion time are both known, a lag of 0 included, and left out
// when either is unknown (a lag then is 0 and unknown alike).
func TestLineTTLLagWhenKnown(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name     string
		ttl      time.Time
		created  time.Time
		lag      time.Duration
		want     string
		wantNone bool
	}{
		{"zero lag", created, created, 0, `,"ttlLagSeconds":0,`, false},
		{"lag", created.Add(-90 * time.Second), created, 90 * time.Second, `,"ttlLagSeconds":90,`, false},
		{"negative lag", created.Add(time.Second / 2), created, -time.Second / 2, `,"ttlLagSeconds":-0.5,`, false},
		{"no TTL time", time.Time{}, created, 0, "", true},
		{"no deletion time", created, time.Time{}, 0, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := sampleEvent()
			e.TTLTime, e.ApproximateCreationTime, e.TTLLag = tc.ttl, tc.created, tc.lag
			line := string(MarshalLine(&e))
			if has := strings.Contains(line, `"ttlLagSeconds"`); has == tc.wantNone || (!tc.wantNone && !strings.Contains(line, tc.want)) {
				t.Fatalf("line %s\nwant ttlLagSeconds %q (none: %v)", line, tc.want, tc.wantNone)
			}
			got, err := DecodeLine([]byte(line))
			if err != nil || got.TTLLag != tc.lag {
				t.Errorf("DecodeLine: lag %v, %v; want %v", got.TTLLag, err, tc.lag)
			}
		})
	}
}

// TestLineDeletedByAddsOneMember: deletedBy is one more member at the end
// of Metadata; every other byte of the line is what it was without it (S3
// keys and the 412 resolution rely on deterministic bytes).
func TestLineDeletedByAddsOneMember(t *testing.T) {
	for _, by := range []string{DeletedByTTL, DeletedByOther} {
		e := sampleEvent()
		e.DeletedBy = ""
		without := string(MarshalLine(&e))
		e.DeletedBy = by
		with := string(MarshalLine(&e))
		want := strings.TrimSuffix(without, "}}") + `,"deletedBy":"` + by + `"}}`
		if with != want {
			t.Fatalf("deletedBy %q:\n got %s\nwant %s", by, with, want)
		}
	}
}

func TestDecodeLineErrors(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"not json", `nope`, "archive line"},
		{"no metadata", `{"Item":{}}`, "Metadata: missing"},
		{"no item", `{"Metadata":{"kind":"expired"}}`, "Item: missing"},
		{"bad kind", `{"Item":{},"Metadata":{"kind":"gone"}}`, "Metadata.kind"},
		{"bad event name", `{"Item":{},"Metadata":{"kind":"expired","eventName":"PUT"}}`, "Metadata.eventName"},
		{"bad sequence", `{"Item":{},"Metadata":{"kind":"expired","sequenceNumber":"12a"}}`, "Metadata.sequenceNumber"},
		{"bad time", `{"Item":{},"Metadata":{"kind":"expired","approximateCreationDateTime":"yesterday"}}`, "approximateCreationDateTime"},
		{"bad lag", `{"Item":{},"Metadata":{"kind":"expired","ttlLagSeconds":1e-12}}`, "ttlLagSeconds"},
		{"bad number", `{"Item":{"a":{"N":"x"}},"Metadata":{"kind":"expired"}}`, `attribute "a": N`},
		{"bad base64", `{"Item":{"a":{"B":"!!"}},"Metadata":{"kind":"expired"}}`, `attribute "a": B`},
		{"two type keys", `{"Item":{"a":{"S":"x","N":"1"}},"Metadata":{"kind":"expired"}}`, "exactly one type key"},
		{"unknown type", `{"Item":{"a":{"X":"x"}},"Metadata":{"kind":"expired"}}`, `unknown type key "X"`},
		{"nested path", `{"Item":{"a":{"M":{"b":{"L":[{"N":"q"}]}}}},"Metadata":{"kind":"expired"}}`, `attribute "a.b[0]"`},
		{"null false", `{"Item":{"a":{"NULL":false}},"Metadata":{"kind":"expired"}}`, "NULL: want true"},
		{"trailing value", `{"Item":{},"Metadata":{"kind":"expired"}} {}`, "more than one"},
		{"undecodable without dead letter", `{"Item":{},"Metadata":{"kind":"undecodable"}}`, "Metadata.kind"},
		{"bad dead-letter reason", `{"Item":{},"Metadata":{"kind":"expired"},"DeadLetter":{"reason":"bored"}}`, "DeadLetter.reason"},
		{"bad dead-letter time", `{"Item":{},"Metadata":{"kind":"expired"},"DeadLetter":{"reason":"permanent","firstFailure":"then"}}`, "DeadLetter.firstFailure"},
		{"bad deleted by", `{"Item":{},"Metadata":{"kind":"expired","eventName":"REMOVE","deletedBy":"ttl"}}`, "Metadata.deletedBy"},
		{"deleted by on an insert", `{"Item":{},"Metadata":{"kind":"inserted","eventName":"INSERT","deletedBy":"other"}}`, "Metadata.deletedBy"},
		{"bad image", `{"Item":{},"Metadata":{"kind":"expired","image":"none"}}`, "Metadata.image"},
		{"bad region", `{"Item":{},"Metadata":{"kind":"expired","region":"us-east-1/x"}}`, "Metadata.region"},
		{"region with a dot", `{"Item":{},"Metadata":{"kind":"expired","region":"us.east"}}`, "Metadata.region"},
		{"negative attempts", `{"Item":{},"Metadata":{"kind":"expired"},"DeadLetter":{"reason":"permanent","attempts":-1}}`, "DeadLetter.attempts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeLine([]byte(tc.line))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeLine checks that DecodeLine never panics and that whatever it
// accepts renders back to a line that decodes to the same event.
func FuzzDecodeLine(f *testing.F) {
	e := sampleEvent()
	f.Add(MarshalLine(&e))
	f.Add([]byte(`{"Item":{"a":{"L":[{"M":{"b":{"BS":["AA=="]}}}]}},"Metadata":{"kind":"deleted","eventName":"REMOVE"}}`))
	f.Add([]byte(`{"Item":{},"Metadata":{"kind":"expired","ttlLagSeconds":-0.5}}`))
	f.Add([]byte(`{"Item":{},"Metadata":{"kind":"expired","eventName":"REMOVE","deletedBy":"other","ttlValue":"1.5e9"}}`))
	f.Add([]byte(`{"Item":{},"Metadata":{"kind":"deleted","deletedBy":"dynamodb-ttl"}}`))
	f.Add([]byte(`{"Item":{},"Metadata":{"kind":"modified","eventName":"MODIFY","deletedBy":"other"}}`))
	f.Add([]byte(`{"Item":{"n":{"N":"+.5e-3"}},"Keys":null,"Metadata":{"kind":"inserted"}}`))
	f.Add([]byte(`{"Item":{},"Metadata":{"kind":"undecodable"},"DeadLetter":{"reason":"undecodable","record":{"eventName":"X"},"attempts":0}}`))
	f.Add([]byte(`{"Item":{},"Metadata":{"kind":"expired"},"DeadLetter":{"reason":"retry_for","sink":"s3://b","firstFailure":"2026-01-02T03:04:05Z","attempts":9}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := DecodeLine(data)
		if err != nil {
			return
		}
		line := AppendLine(nil, &ev)
		if !json.Valid(line) {
			t.Fatalf("rendered invalid JSON: %s", line)
		}
		ev2, err := DecodeLine(line)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, line)
		}
		if again := AppendLine(nil, &ev2); string(again) != string(line) {
			t.Fatalf("not stable:\n%s%s", line, again)
		}
		if !json.Valid(PlainJSON(ev.Image())) {
			t.Fatalf("plain JSON invalid: %s", PlainJSON(ev.Image()))
		}
		te, _, err := DecodeLineText(data)
		if err != nil {
			t.Fatalf("DecodeLine decodes, DecodeLineText: %v", err)
		}
		if !reflect.DeepEqual(te.Keys, ev.Keys) {
			t.Fatalf("DecodeLineText's Keys %v, DecodeLine's %v", te.Keys, ev.Keys)
		}
	})
}

// TestAppendTime: the hand-rolled formatter agrees with RFC3339Nano for
// every shape of fraction, any zone, and years it hands to the standard one.
func TestAppendTime(t *testing.T) {
	zone := time.FixedZone("x", -7*3600-30*60)
	times := []time.Time{
		time.Unix(0, 0),
		time.Date(2026, 11, 22, 9, 5, 7, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 123_456_789, zone),
		time.Date(1999, 12, 31, 23, 59, 59, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 5, time.UTC),
		{},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1000; i++ {
		times = append(times, time.Unix(r.Int64N(300_000_000_000)-62_000_000_000, r.Int64N(1e9)))
	}
	for _, tm := range times {
		want := `"` + tm.UTC().Format(time.RFC3339Nano) + `"`
		if got := string(appendTime(nil, tm)); got != want {
			t.Errorf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	}
}

func TestAppendSeconds(t *testing.T) {
	cases := map[time.Duration]string{
		0: "0", 90 * time.Second: "90", 1500 * time.Millisecond: "1.5", -time.Nanosecond: "-0.000000001",
		time.Duration(math.MinInt64): "-9223372036.854775808", 3*time.Second + 120*time.Microsecond: "3.00012",
	}
	for d, want := range cases {
		if got := string(appendSeconds(nil, d)); got != want {
			t.Errorf("appendSeconds(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestNeedsOldImage(t *testing.T) {
	for _, tc := range []struct {
		kinds []Kind
		want  bool
	}{
		{nil, false},
		{[]Kind{Inserted, Modified}, false},
		{[]Kind{Expired}, true},
		{[]Kind{Inserted, Deleted}, true},
	} {
		if got := NeedsOldImage(tc.kinds); got != tc.want {
			t.Errorf("NeedsOldImage(%v) = %v, want %v", tc.kinds, got, tc.want)
		}
	}
}
