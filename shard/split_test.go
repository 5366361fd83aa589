package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// decodeSalvaging runs p's DeserializeResponse on a 200 response with body,
// as a reader's call does (a salvage in the context).
func decodeSalvaging(p smithyhttp.ClientProtocol, body []byte) (*dynamodbstreams.GetRecordsOutput, []Undecodable, error) {
	sv := &salvage{}
	out := &dynamodbstreams.GetRecordsOutput{}
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}}
	err := p.DeserializeResponse(withSalvage(context.Background(), sv), getRecordsSchema, dynamodbstreams.TypeRegistry, resp, out)
	return out, sv.bad, err
}

func TestSplitGetRecords(t *testing.T) {
	cases := []struct {
		name string
		body string
		next *string
		recs []string
		ok   bool
	}{
		{"two records", `{"NextShardIterator":"i\u0041","Records":[{"a":1} , {"b":[1,{"c":"]}"}]}]}`, aws.String("iA"), []string{`{"a":1}`, `{"b":[1,{"c":"]}"}]}`}, true},
		{"bad contents still split", `{"Records":[{"dynamodb":{"Keys":{"pk":{"S":1}}}},{"x":tru}],"NextShardIterator":"n"}`, aws.String("n"),
			[]string{`{"dynamodb":{"Keys":{"pk":{"S":1}}}}`, `{"x":tru}`}, true},
		{"null iterator, unknown members skipped", `{"NextShardIterator":null,"X":{"y":[]},"Records":[]}`, nil, []string{}, true},
		{"no records", `{}`, nil, nil, true},
		{"empty body", " \n", nil, nil, true},
		{"escaped quote in a record", `{"Records":[{"s":"a\"}"}]}`, nil, []string{`{"s":"a\"}"}`}, true},
		{"iterator not a string", `{"NextShardIterator":3,"Records":[]}`, nil, nil, false},
		{"records not an array", `{"Records":{}}`, nil, nil, false},
		{"brackets do not match", `{"Records":[{"a":[}]}`, nil, nil, false},
		{"truncated", `{"Records":[{"a":1}`, nil, nil, false},
		{"unterminated string", `{"Records":[{"a":"x}]}`, nil, nil, false},
		{"trailing garbage ignored, as by the SDK", `{"Records":[]} x`, nil, []string{}, true},
		{"empty element", `{"Records":[,]}`, nil, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, recs, ok := splitGetRecords([]byte(tc.body))
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if !reflect.DeepEqual(next, tc.next) {
				t.Errorf("next = %v, want %v", aws.ToString(next), aws.ToString(tc.next))
			}
			var got []string
			if recs != nil {
				got = []string{}
			}
			for _, r := range recs {
				got = append(got, string(r))
			}
			if !reflect.DeepEqual(got, tc.recs) {
				t.Errorf("records = %q, want %q", got, tc.recs)
			}
		})
	}
}

// goodRecord is a well-formed record with sequence number seq.
func goodRecord(seq, pk string) string {
	return `{"awsRegion":"us-east-1","dynamodb":{"ApproximateCreationDateTime":1763800000,"Keys":{"pk":{"S":"` + pk + `"}},` +
		`"SequenceNumber":"` + seq + `","SizeBytes":10,"StreamViewType":"KEYS_ONLY"},"eventID":"e` + seq + `","eventName":"INSERT","eventSource":"aws:dynamodb","eventVersion":"1.1"}`
}

// badRecord is a record whose Keys the SDK cannot decode.
func badRecord(seq, keys string) string {
	return `{"dynamodb":{"ApproximateCreationDateTime":1763800001,"Keys":` + keys + `,"SequenceNumber":"` + seq + `","SizeBytes":7},"eventID":"bad","eventName":"REMOVE"}`
}

// TestSalvageUndecodableRecords: a response the SDK refuses as a whole is
// read record by record; the record that will not parse becomes a
// placeholder listed as undecodable with its raw bytes, its neighbours are
// decoded as the SDK decodes them, and the iterator is kept.
func TestSalvageUndecodableRecords(t *testing.T) {
	cases := []struct{ name, bad string }{
		{"number where a string belongs", badRecord("2", `{"pk":{"S":1}}`)},
		{"B that is not base64", badRecord("2", `{"pk":{"B":"!!!"}}`)},
		{"two type members", badRecord("2", `{"pk":{"S":"a","N":"1"}}`)},
		{"unreadable sequence number", `{"dynamodb":{"Keys":{"pk":{"S":"a"}},"SequenceNumber":2},"eventName":"FOO"}`},
		{"bad new image, keys kept", `{"dynamodb":{"Keys":{"pk":{"S":"k"}},"NewImage":{"pk":{"S":1}},"SequenceNumber":"2"},"eventName":"INSERT"}`},
		{"not an object", `[1,2]`},
	}
	for _, tc := range cases {
		for _, p := range []struct {
			name string
			p    smithyhttp.ClientProtocol
		}{{"fast", fastProtocol{ClientProtocol: sdkProtocol()}}, {"sdk only", fastProtocol{ClientProtocol: sdkProtocol(), sdkOnly: true}}} {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				body := `{"NextShardIterator":"next-it","Records":[` + goodRecord("1", "a") + `,` + tc.bad + `,` + goodRecord("3", "c") + `]}`
				if _, err := decodeWith(sdkProtocol(), []byte(body)); err == nil {
					t.Fatal("the SDK decodes the body: not a test of salvage")
				}
				if _, err := decodeWith(p.p, []byte(body)); err == nil {
					t.Fatal("without a salvage in the context, the call succeeded")
				}
				out, bad, err := decodeSalvaging(p.p, []byte(body))
				if err != nil {
					t.Fatalf("salvage: %v", err)
				}
				if aws.ToString(out.NextShardIterator) != "next-it" || len(out.Records) != 3 {
					t.Fatalf("got iterator %q and %d records", aws.ToString(out.NextShardIterator), len(out.Records))
				}
				if len(bad) != 1 || bad[0].Index != 1 || string(bad[0].Raw) != tc.bad || bad[0].Err == nil {
					t.Fatalf("undecodable = %+v", bad)
				}
				var smErr *smithy.DeserializationError
				if !errors.As(bad[0].Err, &smErr) {
					t.Errorf("error %T %v, want the SDK's DeserializationError", bad[0].Err, bad[0].Err)
				}
				for i, seq := range []string{"1", "3"} {
					want, err := decodeWith(sdkProtocol(), []byte(`{"Records":[`+goodRecord(seq, string(rune('a'+2*i)))+`]}`))
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(out.Records[2*i], want.Records[0]) {
						t.Errorf("record %s differs from the SDK's decoding", seq)
					}
				}
				ph := out.Records[1]
				if strings.Contains(tc.name, "sequence") || tc.bad == `[1,2]` {
					if event.RecordSequence(&ph) != "" || ph.EventName != "" {
						t.Errorf("placeholder %+v has a sequence number or event name it should not", ph)
					}
					return
				}
				if strings.Contains(tc.name, "keys kept") {
					if k, ok := ph.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS); !ok || k.Value != "k" || event.RecordSequence(&ph) != "2" || ph.EventName != "INSERT" {
						t.Errorf("placeholder %+v %+v, want its keys, sequence number and event name", ph, ph.Dynamodb)
					}
					return
				}
				if event.RecordSequence(&ph) != "2" || ph.EventName != "REMOVE" || aws.ToString(ph.EventID) != "bad" ||
					aws.ToInt64(ph.Dynamodb.SizeBytes) != 7 || ph.Dynamodb.ApproximateCreationDateTime.Unix() != 1763800001 || ph.Dynamodb.Keys != nil {
					t.Errorf("placeholder %+v %+v", ph, ph.Dynamodb)
				}
			})
		}
	}
}

func TestSplitAtUndecodable(t *testing.T) {
	recs := make([]types.Record, 5)
	for i := range recs {
		recs[i].EventID = aws.String(string(rune('a' + i)))
	}
	u := func(i int) Undecodable { return Undecodable{Index: i, Raw: []byte{byte('a' + i)}} }
	cases := []struct {
		name string
		bad  []Undecodable
		want []string // each batch: its records' IDs, undecodable one upper-cased
	}{
		{"none", nil, []string{"abcde"}},
		{"first", []Undecodable{u(0)}, []string{"Abcde"}},
		{"middle", []Undecodable{u(2)}, []string{"ab", "Cde"}},
		{"last", []Undecodable{u(4)}, []string{"abcd", "E"}},
		{"two in a row", []Undecodable{u(1), u(2)}, []string{"a", "B", "Cde"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, b := range splitAtUndecodable(Batch{ShardID: "s", Records: recs, Undecodable: tc.bad}) {
				var s strings.Builder
				for i, r := range b.Records {
					id := aws.ToString(r.EventID)
					if len(b.Undecodable) > 0 && b.Undecodable[0].Index == i {
						if i != 0 || string(b.Undecodable[0].Raw) != id {
							t.Errorf("undecodable %+v at %d of batch %q", b.Undecodable, i, id)
						}
						id = strings.ToUpper(id)
					}
					s.WriteString(id)
				}
				got = append(got, s.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("batches %q, want %q", got, tc.want)
			}
		})
	}
	if got := splitAtUndecodable(Batch{}); got != nil {
		t.Errorf("empty batch split into %v", got)
	}
	if got := shiftUndecodable([]Undecodable{u(1), u(3)}, 2); len(got) != 1 || got[0].Index != 1 {
		t.Errorf("shiftUndecodable = %+v", got)
	}
}

// FuzzSplitGetRecords: the record-by-record reading never panics, and on
// every valid JSON body the SDK decodes it builds exactly what the SDK
// builds, with no record taken for undecodable. (The SDK also decodes some
// bodies that are not JSON, {"Keys":{0}} among them; those are not
// responses, and the salvage may refuse them.)
func FuzzSplitGetRecords(f *testing.F) {
	f.Add([]byte(everyShape))
	f.Add([]byte(`{"NextShardIterator":"n","Records":[` + goodRecord("1", "a") + `,` + badRecord("2", `{"pk":{"S":1}}`) + `]}`))
	f.Add([]byte(`{"Records":[null,{},[],"x",1]}`))
	f.Add([]byte(`{"Records":[{"dynamodb":{"Keys":{"pk":{"S":"a","N":"1"}}}}],"Records":[]}`))
	f.Add([]byte(`{"Records":[{"a":[[[[[[[[[[]]]]]]]]]]}]}`))
	sdk, wrapped := sdkProtocol(), fastProtocol{ClientProtocol: sdkProtocol()}
	f.Fuzz(func(t *testing.T, body []byte) {
		splitGetRecords(body)
		want, wantErr := decodeWith(sdk, body)
		got, bad, ok := wrapped.salvageGetRecords(context.Background(), getRecordsSchema, dynamodbstreams.TypeRegistry, body)
		for _, u := range bad {
			placeholder(u.Raw)
		}
		if wantErr != nil || !json.Valid(body) {
			return
		}
		if !ok || len(bad) > 0 {
			t.Fatalf("the SDK decodes %q, the salvage did not (ok %v, undecodable %+v)", body, ok, bad)
		}
		if !reflect.DeepEqual(got.NextShardIterator, want.NextShardIterator) || !reflect.DeepEqual(got.Records, want.Records) {
			t.Fatalf("salvage differs from the SDK for %q\nsalvage: %#v\nsdk:     %#v", body, got, *want)
		}
	})
}

// undecodableLog is a Processor and Positions that keeps every batch and
// stores the last sequence number of each processed batch; with refuse it
// fails every batch holding an undecodable record, as a consumer without
// a dead-letter sink does.
type undecodableLog struct {
	refuse bool
	mu     sync.Mutex
	ids    []string // eventIDs in processing order; undecodable ones as "!raw"
	pos    map[string]Position
}

func (l *undecodableLog) Process(ctx context.Context, b Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse && len(b.Undecodable) > 0 {
		return errors.New("undecodable record")
	}
	for i, r := range b.Records {
		if len(b.Undecodable) > 0 && b.Undecodable[0].Index == i {
			l.ids = append(l.ids, "!"+string(b.Undecodable[0].Raw))
			continue
		}
		l.ids = append(l.ids, itemKey(r))
	}
	if seq, _ := event.LastSequence(b.Records); seq != "" {
		l.pos[b.ShardID] = Position{SequenceNumber: seq}
	}
	return nil
}
func (l *undecodableLog) ShardEnded(context.Context, string, string) error   { return nil }
func (l *undecodableLog) ShardStopped(context.Context, string, string) error { return nil }
func (l *undecodableLog) Positions(context.Context, string) (map[string]Position, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]Position{}
	for k, v := range l.pos {
		out[k] = v
	}
	return out, nil
}

func (l *undecodableLog) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

// TestReaderPassesUndecodableRecords: over the engine, a record the SDK
// cannot parse (planted with the engine's record injection) reaches
// Process raw, in its place, and the records after it flow on; a Processor
// that refuses it holds the shard there, and the walker reports the shard
// as failing at that position.
func TestReaderPassesUndecodableRecords(t *testing.T) {
	cases := []struct{ name, keys string }{
		{"number where a string belongs", `{"pk":{"S":1}}`},
		{"B that is not base64", `{"pk":{"B":"!!!"}}`},
		{"two type members", `{"pk":{"S":"a","N":"1"}}`},
	}
	for _, tc := range cases {
		for _, sdkOnly := range []bool{false, true} {
			name := tc.name
			if sdkOnly {
				name += "/sdk decoding"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, engine.Options{StreamShards: 1})
				arn := e.createTable(t, "poison")
				e.put(t, "poison", "before", 0, 3)
				shardID := openShards(t, e.streams, arn)[0].ID
				if _, err := e.eng.InjectRecord("poison", shardID, engine.InjectedRecord{EventName: "INSERT", Keys: json.RawMessage(tc.keys), SizeBytes: -1}); err != nil {
					t.Fatal(err)
				}
				e.put(t, "poison", "after", 0, 3)

				// Refused: the shard holds before the record and fails there.
				refuse := &undecodableLog{refuse: true, pos: map[string]Position{}}
				w, err := New(Options{Streams: e.streams, StreamARNs: []string{arn}, Processor: refuse, Positions: refuse,
					SDKDecoding: sdkOnly, IdleBackoff: 10 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- w.Run(ctx) }()
				var f Failing
				eventually.True(t, 30*time.Second, "three failures at the record", func() bool {
					all := w.Failing()
					if len(all) == 1 {
						f = all[0]
					}
					return f.Failures >= 3
				})
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got := refuse.seen(); len(got) != 3 || !strings.HasPrefix(got[2], "before") {
					t.Errorf("before the refused record Process saw %q, want the 3 records before it", got)
				}
				stored := refuse.pos[shardID].SequenceNumber
				if f.ShardID != shardID || f.Table != "poison" || f.Oldest.IsZero() ||
					f.Position != "AFTER_SEQUENCE_NUMBER "+stored || f.Err == nil {
					t.Errorf("failing = %+v, want the shard at AFTER_SEQUENCE_NUMBER %s", f, stored)
				}

				// Taken: every record, in order, the bad one raw.
				take := &undecodableLog{pos: map[string]Position{}}
				startWalker(t, Options{Streams: e.streams, StreamARNs: []string{arn}, Processor: take, Positions: take, SDKDecoding: sdkOnly})
				eventually.True(t, 30*time.Second, "7 records", func() bool { return len(take.seen()) >= 7 })
				got := take.seen()
				if len(got) != 7 || !strings.HasPrefix(got[2], "before") || !strings.HasPrefix(got[4], "after") ||
					!strings.HasPrefix(got[3], "!{") || !strings.Contains(got[3], tc.keys) {
					t.Errorf("Process saw %q", got)
				}
			})
		}
	}
}
