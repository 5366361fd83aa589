package natssink

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// messagesDoc is the message contract.
var messagesDoc = filepath.Join("..", "..", "docs", "MESSAGES.md")

// contractEvents are events that, between them, make the sink set every
// header it can: native and swept expiries, a user delete, an insert, a
// modify with both images, a keys-only expiry, a dead letter and an
// undecodable record (as a dead-letter sink gets them).
func contractEvents() []event.Event {
	evs := testkit.Events("sessions", "shard-1", 1, 8)
	noTTL := func(e *event.Event) { e.TTLValue, e.TTLTime, e.TTLLag = "", time.Time{}, 0 }
	evs[0].DeletedBy = event.DeletedByTTL
	evs[1].DeletedBy = event.DeletedByOther
	evs[2].Kind, evs[2].DeletedBy = event.Deleted, event.DeletedByOther
	evs[3].Kind, evs[3].EventName, evs[3].NewImage, evs[3].OldImage = event.Inserted, "INSERT", evs[3].OldImage, nil
	noTTL(&evs[3])
	evs[4].Kind, evs[4].EventName, evs[4].NewImage = event.Modified, "MODIFY", evs[4].OldImage
	noTTL(&evs[4])
	evs[5].DeletedBy, evs[5].OldImage = event.DeletedByTTL, nil // keys-only
	noTTL(&evs[5])
	evs[6].DeletedBy = event.DeletedByTTL
	evs[6].DeadLetter = &event.DeadLetter{Sink: "s3://b/p", Reason: event.ReasonPermanent, Error: "AccessDenied", Attempts: 3, FirstFailure: testkit.Start}
	evs[7] = event.Event{Kind: event.Undecodable, Table: "sessions", StreamARN: evs[7].StreamARN, Region: evs[7].Region, ShardID: "shard-1", EventID: "bad-8",
		ApproximateCreationTime: testkit.Start, DeadLetter: &event.DeadLetter{Reason: event.ReasonUndecodable, Error: "unknown eventName", Record: []byte(`{"eventID":"bad-8","eventName":"BOGUS"}`)}}
	return evs
}

// TestMessagesContract keeps docs/MESSAGES.md, docs/schemas and the sink
// in step: messages the sink publishes to a real nats-server in every
// format set exactly the headers the document names, their bodies and
// key headers validate against the schemas, and the document names every
// format, schema and CloudEvents type there is.
func TestMessagesContract(t *testing.T) {
	doc, err := os.ReadFile(messagesDoc)
	if err != nil {
		t.Fatal(err)
	}
	schemas := newJSONSchemas(schemaDir)
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	evs := contractEvents()
	var msgs []jetstream.Msg
	for _, f := range natsmsg.Formats {
		// A stream per format: one stream would drop the second format's
		// messages as duplicates (the same Nats-Msg-Ids).
		st := testkit.CreateStream(t, js, "CONTRACT_"+f, "c."+f+".>")
		s, _, err := open(ctx, "nats://"+ns.URL+"?subject=c."+f+".{table}.{kind}.{pk}&events=all&format="+f+msgTTLContractQuery(f), sinkapi.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a := testkit.NewAcks()
		if err := s.Write(ctx, sinkapi.Batch{ShardID: "shard-1", Events: evs}, a.Ack(f)); err != nil {
			t.Fatal(err)
		}
		if err := a.WaitAck(t, f); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		got := testkit.StreamMsgs(t, st)
		if len(got) != len(evs) {
			t.Fatalf("format %s: %d messages, want %d", f, len(got), len(evs))
		}
		msgs = append(msgs, got...)
	}
	set := map[string]bool{}
	for _, m := range msgs {
		format := strings.Split(m.Subject(), ".")[1]
		for k := range m.Headers() {
			set[k] = true
		}
		body := "archive-line.schema.json"
		if format == natsmsg.FormatItem {
			body = "item.schema.json"
		}
		if err := schemas.Validate(body, m.Data()); err != nil {
			t.Errorf("%s: body against %s: %v\n%s", m.Subject(), body, err, m.Data())
		}
		if err := schemas.Validate("dynamodb-item.schema.json", []byte(m.Headers().Get(HeaderKeys))); err != nil {
			t.Errorf("%s: %s: %v", m.Subject(), HeaderKeys, err)
		}
		if format == natsmsg.FormatCloudEvents {
			attrs := ceAttributes(t, m.Headers())
			if err := schemas.Validate("dynamodb-item.schema.json", []byte(attrs["subject"])); err != nil {
				t.Errorf("%s: ce-subject: %v", m.Subject(), err)
			}
		}
	}
	named := docHeaders(t, string(doc))
	if got, want := sortedKeys(set), sortedKeys(named); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the sink sets headers %v; docs/MESSAGES.md names %v", got, want)
	}
	checkDocNames(t, string(doc))
}

// checkDocNames: the document names every format, every schema it links
// exists, and every CloudEvents type is in it.
func checkDocNames(t *testing.T, doc string) {
	for _, f := range natsmsg.Formats {
		if !strings.Contains(doc, "| `"+f+"`") {
			t.Errorf("docs/MESSAGES.md has no row for format %s", f)
		}
	}
	for _, m := range regexp.MustCompile(`\(schemas/([a-z-]+\.schema\.json)\)`).FindAllStringSubmatch(doc, -1) {
		if _, err := newJSONSchemas(schemaDir).file(m[1]); err != nil {
			t.Errorf("docs/MESSAGES.md links %s: %v", m[1], err)
		}
	}
	for _, k := range append(append([]event.Kind{}, event.Kinds...), event.Undecodable) {
		if ty := natsmsg.TypePrefix + string(k); !strings.Contains(doc, "`"+ty+"`") {
			t.Errorf("docs/MESSAGES.md does not name the type %s", ty)
		}
	}
}

// docHeaders returns the headers the tables of MESSAGES.md's Headers
// section name (a row's first cell, in backquotes).
func docHeaders(t *testing.T, doc string) map[string]bool {
	_, section, ok := strings.Cut(doc, "\n## Headers\n")
	if !ok {
		t.Fatal("docs/MESSAGES.md has no Headers section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(section, -1) {
		if out[m[1]] {
			t.Errorf("docs/MESSAGES.md names header %s twice", m[1])
		}
		out[m[1]] = true
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
