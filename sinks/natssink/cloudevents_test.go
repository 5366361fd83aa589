package natssink

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats.go"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// TestPercentEncode holds percentEncode to the NATS protocol binding's
// section 3.1.3.2 (1.0.3): space, '"', '%' and everything outside
// U+0021-U+007E are %XX of their UTF-8 bytes, upper-case; the rest stays.
func TestPercentEncode(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"plain-ASCII_0.9:/#?&=+{}[]", "plain-ASCII_0.9:/#?&=+{}[]"},
		{"Euro € 😀", "Euro%20%E2%82%AC%20%F0%9F%98%80"}, // the binding's own example
		{`{"pk":{"S":"a b"}}`, `{%22pk%22:{%22S%22:%22a%20b%22}}`},
		{"100%", "100%25"},
		{"tab\there\r\n", "tab%09here%0D%0A"},
		{"\x00\x1f\x7f", "%00%1F%7F"},
		{"\u0085", "%C2%85"},                                         // a C1 control
		{"bad\xffutf8", "bad%EF%BF%BDutf8"},                          // not UTF-8: U+FFFD
		{"\xe2\x82", "%EF%BF%BD%EF%BF%BD"},                           // a truncated sequence: one U+FFFD per byte
		{"~!#$&'()*+,-./;<=>?@\\^_`|", "~!#$&'()*+,-./;<=>?@\\^_`|"}, // printable punctuation stays
	}
	for _, c := range cases {
		got, arena := percentEncode(nil, c.in)
		if got != c.want {
			t.Errorf("percentEncode(%q) = %q, want %q", c.in, got, c.want)
		}
		if got == c.in && len(arena) != 0 {
			t.Errorf("percentEncode(%q) copied a value that needs no encoding", c.in)
		}
		if dec, err := percentDecode(got); err != nil || (utf8.ValidString(c.in) && dec != c.in) {
			t.Errorf("percentDecode(%q) = %q, %v; want %q", got, dec, err, c.in)
		}
	}
}

// TestPercentDecodeRefusesWhatTheBindingRefuses: the test's decoder, which
// stands for a receiver, follows the binding too (so the tests that decode
// the sink's headers with it mean something).
func TestPercentDecodeRefusesWhatTheBindingRefuses(t *testing.T) {
	for in, want := range map[string]string{"a%20b": "a b", "%e2%82%ac": "€", "%41": "A"} {
		if got, err := percentDecode(in); err != nil || got != want {
			t.Errorf("percentDecode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"%C0%A0", "%FF", "%2", "%zz", "a b", `"q"`} {
		if got, err := percentDecode(in); err == nil {
			t.Errorf("percentDecode(%q) = %q, want an error", in, got)
		}
	}
}

// percentDecode is a receiver's decoding of a header value, per the
// binding: one round of percent-decoding (lower-case hex accepted), and
// invalid UTF-8 (an overlong %C0%A0 among it) refused. Values this sink
// writes are never double-quoted, so a quote, like a space, is an error
// here.
func percentDecode(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("truncated escape at %d", i)
			}
			var v byte
			for _, h := range []byte(s[i+1 : i+3]) {
				switch {
				case h >= '0' && h <= '9':
					v = v<<4 | (h - '0')
				case h >= 'a' && h <= 'f':
					v = v<<4 | (h - 'a' + 10)
				case h >= 'A' && h <= 'F':
					v = v<<4 | (h - 'A' + 10)
				default:
					return "", fmt.Errorf("bad escape %q", s[i:i+3])
				}
			}
			b.WriteByte(v)
			i += 2
		case c <= ' ' || c >= 0x7f || c == '"':
			return "", fmt.Errorf("byte %#x must be percent-encoded", c)
		default:
			b.WriteByte(c)
		}
	}
	if !utf8.ValidString(b.String()) {
		return "", errors.New("not UTF-8 once decoded")
	}
	return b.String(), nil
}

// ceAttributeName is a CloudEvents attribute name: lower-case letters and
// digits (spec 1.0, "Attribute Naming Convention"; 20 characters at most
// is a SHOULD, held here too).
var ceAttributeName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// ceAttributes checks m against the binding's binary content mode and
// returns its CloudEvents attributes, decoded: every ce- header one value,
// a valid attribute name, a value that decodes; the required attributes
// present; no Content-Type (which marks the structured mode).
func ceAttributes(t testing.TB, h nats.Header) map[string]string {
	t.Helper()
	attrs := map[string]string{}
	for k, vs := range h {
		if strings.EqualFold(k, "content-type") {
			t.Fatalf("a %s header marks the structured mode: %q", k, vs)
		}
		name, ok := strings.CutPrefix(strings.ToLower(k), natsmsg.CEPrefix)
		if !ok {
			continue
		}
		if k != strings.ToLower(k) || !ceAttributeName.MatchString(name) {
			t.Fatalf("header %q: not ce- and a lower-case alphanumeric attribute name", k)
		}
		if len(vs) != 1 {
			t.Fatalf("header %s has %d values", k, len(vs))
		}
		v, err := percentDecode(vs[0])
		if err != nil {
			t.Fatalf("header %s = %q: %v", k, vs[0], err)
		}
		attrs[name] = v
	}
	for _, req := range []string{"specversion", "id", "source", "type"} {
		if attrs[req] == "" {
			t.Fatalf("required attribute %s missing: %v", req, attrs)
		}
	}
	return attrs
}

// TestNATSCloudEvents: format=cloudevents publishes, to a real
// nats-server, the archive line as the body with the Archiver- headers and
// the event's CloudEvents attributes as the binding's binary mode has them.
func TestNATSCloudEvents(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	st := testkit.CreateStream(t, js, "TTL", "ttl.>")
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=ttl.{table}.{kind}&events=all&format=cloudevents", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	evs := testkit.Events("sessions", "shard-1", 1, 4)
	evs[0].DeletedBy = event.DeletedByTTL
	evs[1].Kind, evs[1].DeletedBy = event.Deleted, event.DeletedByOther
	evs[2].Kind, evs[2].EventName, evs[2].NewImage, evs[2].OldImage = event.Inserted, "INSERT", evs[2].OldImage, nil
	evs[2].TTLValue, evs[2].TTLTime, evs[2].TTLLag = "", time.Time{}, 0
	evs[3].DeletedBy = event.DeletedByOther
	evs[3].Keys = event.Item{"pk": &types.AttributeValueMemberS{Value: "Euro € \"quoted\" 100%"}}
	evs[3].DeadLetter = &event.DeadLetter{Sink: "s3://b", Reason: event.ReasonPermanent, Error: "no", Attempts: 1}
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{ShardID: "shard-1", Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	msgs := testkit.StreamMsgs(t, st)
	if len(msgs) != len(evs) {
		t.Fatalf("%d messages, want %d", len(msgs), len(evs))
	}
	for i, m := range msgs {
		e := evs[i]
		t.Run(fmt.Sprint(e.Kind, i), func(t *testing.T) {
			h := m.Headers()
			attrs := ceAttributes(t, h)
			want := map[string]string{
				"specversion":      "1.0",
				"id":               event.MessageID(&e),
				"source":           "arn:aws:dynamodb:us-east-1:000000000000:table/sessions",
				"type":             "io.ttl-archiver.item." + string(e.Kind),
				"time":             e.ApproximateCreationTime.UTC().Format(time.RFC3339Nano),
				"subject":          string(event.MarshalItem(e.Keys)),
				"datacontenttype":  "application/json",
				"dynamodbtable":    "sessions",
				"dynamodbshard":    "shard-1",
				"dynamodbsequence": e.SequenceNumber,
				"dynamodbregion":   "us-east-1",
				"ttlattribute":     "expiresAt",
				"ttlvalue":         e.TTLValue,
				"deletedby":        e.DeletedBy,
			}
			if e.DeadLetter != nil {
				want["deadletter"] = e.DeadLetter.Reason
			}
			for k, v := range want {
				if v == "" {
					if _, ok := attrs[k]; ok {
						t.Errorf("attribute %s = %q, want it left out", k, attrs[k])
					}
					delete(want, k)
				} else if attrs[k] != v {
					t.Errorf("attribute %s = %q, want %q", k, attrs[k], v)
				}
			}
			if len(attrs) != len(want) {
				t.Errorf("attributes %v, want %v", attrs, want)
			}
			if h.Get(natsmsg.HeaderMsgID) != attrs["id"] || h.Get(HeaderKeys) != attrs["subject"] || h.Get(HeaderTable) != "sessions" {
				t.Errorf("the Archiver- headers and Nats-Msg-Id do not match the attributes: %v", h)
			}
			if _, err := time.Parse(time.RFC3339, attrs["time"]); err != nil {
				t.Errorf("ce-time is not RFC 3339: %v", err)
			}
			got, err := event.DecodeLine(m.Data())
			if err != nil || got.EventID != e.EventID {
				t.Errorf("the body is not the event's archive line (%v): %s", err, m.Data())
			}
		})
	}
}

// TestNATSFormats: envelope keeps its messages as before the CloudEvents
// format (no ce- header), item has the plain item as body, and both keep
// the Archiver- headers; the three share them.
func TestNATSFormats(t *testing.T) {
	tmpl, err := parseSubject("archiver.{table}.{kind}")
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.Events("sessions", "shard-1", 7, 1)[0]
	e.DeletedBy = event.DeletedByTTL
	for _, f := range natsmsg.Formats {
		t.Run(f, func(t *testing.T) {
			s := &Sink{tmpl: tmpl, c: Config{Format: f}}
			m, size := s.newRender(nil).message(&e)
			ce := 0
			for k := range m.Header {
				if strings.HasPrefix(k, natsmsg.CEPrefix) {
					ce++
				}
			}
			if (ce > 0) != (f == natsmsg.FormatCloudEvents) || ce > ceHeaders {
				t.Fatalf("%d ce- headers in format %s: %v", ce, f, m.Header)
			}
			for _, k := range headerNames {
				if m.Header.Get(k) == "" {
					t.Fatalf("header %s missing in format %s", k, f)
				}
			}
			wantBody := string(event.MarshalLine(&e))
			if f == natsmsg.FormatItem {
				wantBody = string(event.PlainJSON(e.Image()))
			}
			if string(m.Data) != wantBody {
				t.Fatalf("body %s, want %s", m.Data, wantBody)
			}
			if want := m.Size(); int64(want) != size {
				t.Fatalf("size %d, nats.go says %d bytes", size, want)
			}
		})
	}
}

// TestHeaderCountAndSize: a message of every format, for events covering
// every optional header, has exactly the headers headerCount counted (its
// map is made that size and never grows), and the size the render returns
// is nats.go's own (checkMessage and the pending budget use it instead of
// walking the headers once more).
func TestHeaderCountAndSize(t *testing.T) {
	tmpl, err := parseSubject("archiver.{table}.{kind}")
	if err != nil {
		t.Fatal(err)
	}
	evs := contractEvents()
	for _, f := range natsmsg.Formats {
		s := &Sink{tmpl: tmpl, c: Config{Format: f}}
		r := s.newRender(evs)
		for i := range evs {
			m, size := r.message(&evs[i])
			if n := s.headerCount(&evs[i], m.Header.Get(natsmsg.HeaderMsgID), m.Header.Get(HeaderKeys)); len(m.Header) != n {
				t.Errorf("format %s, event %d: %d headers, headerCount %d: %v", f, i, len(m.Header), n, m.Header)
			}
			if int64(m.Size()) != size {
				t.Errorf("format %s, event %d: size %d, nats.go says %d", f, i, size, m.Size())
			}
		}
	}
}

// TestCESource: the table's ARN from the stream's, and a URN naming the
// table when the event has no stream ARN.
func TestCESource(t *testing.T) {
	for _, c := range []struct{ arn, table, want string }{
		{"arn:aws:dynamodb:eu-west-1:123456789012:table/Orders/stream/2026-01-02T03:04:05.678", "Orders", "arn:aws:dynamodb:eu-west-1:123456789012:table/Orders"},
		{"", "Orders.v2", "urn:ttl-archiver:table:Orders.v2"},
		{"", "a b", "urn:ttl-archiver:table:a%20b"},
		{"arn:aws:dynamodb:local:000000000000:table/x", "x", "arn:aws:dynamodb:local:000000000000:table/x"},
	} {
		if got := ceSource(&event.Event{StreamARN: c.arn, Table: c.table}); got != c.want {
			t.Errorf("ceSource(%q, %q) = %q, want %q", c.arn, c.table, got, c.want)
		}
	}
}

// TestCEValuesReusedWithinABatch: a render formats ce-source once per
// stream ARN and ce-time once per time, reusing the last; in a batch whose
// ARNs and times repeat, change and come back (the same instant in another
// zone too), every message's ce- values are those of its event rendered
// alone.
func TestCEValuesReusedWithinABatch(t *testing.T) {
	tmpl, err := parseSubject("archiver.{table}.{kind}")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{tmpl: tmpl, c: Config{Format: natsmsg.FormatCloudEvents}}
	arnA := "arn:aws:dynamodb:eu-west-1:123456789012:table/A/stream/2026-01-02T03:04:05.678"
	arnB := "arn:aws:dynamodb:eu-west-1:123456789012:table/B b/stream/2026-01-02T03:04:05.678"
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	evs := testkit.Events("A", "shard-1", 1, 7)
	for i, c := range []struct {
		arn string
		at  time.Time
	}{
		{arnA, t0}, {arnA, t0}, {arnB, t0}, {arnB, t0.Add(time.Second)},
		{arnA, t0.Add(time.Second).In(time.FixedZone("X", 3600))}, {"", t0}, {arnA, time.Time{}},
	} {
		evs[i].StreamARN, evs[i].ApproximateCreationTime = c.arn, c.at
	}
	r := s.newRender(evs)
	for i := range evs {
		got, _ := r.message(&evs[i])
		want, _ := s.newRender(evs[i : i+1]).message(&evs[i])
		for _, k := range []string{natsmsg.CESource, natsmsg.CETime} {
			if g, w := got.Header[k], want.Header[k]; !reflect.DeepEqual(g, w) {
				t.Errorf("event %d: %s %q, alone %q", i, k, g, w)
			}
		}
	}
}
