// Package subscribe decodes the messages the archiver's NATS sink
// publishes, in each of its formats, into an [Event] whose item and keys
// are the DynamoDB SDK's attribute values: attributevalue.UnmarshalMap
// takes them as they are.
//
//	ev, err := subscribe.Decode(msg) // a *nats.Msg
//	var o Order
//	err = attributevalue.UnmarshalMap(ev.Item, &o)
//
// A JetStream consumer's messages go through [DecodeJetStream]; any other
// client's through [DecodeParts]. The package imports nats.go, the AWS
// SDK's attribute-value types and the archiver's leaf packages (natsmsg,
// event) only: no sink, engine or S3 code. docs/MESSAGES.md is the
// contract it reads.
//
// The formats (the sink's format= parameter):
//
//   - cloudevents (the default) and envelope: the body is the archive line,
//     which keeps every type and every digit; Event carries everything the
//     archive has (times, TTL, lag, who deleted the item). A cloudevents
//     message also fills Event.CloudEvent from its ce- headers.
//   - item: the body is the item as plain JSON, and what it loses stays
//     lost: a binary attribute arrives as its base64 string (S), sets as
//     lists (L), numbers keep their digits (N) but an N attribute that held
//     a string of digits cannot be told apart, and NULL, BOOL and maps are
//     kept. The message carries no time, TTL or stream ARN, so those fields
//     are zero; Keys come from the Archiver-Keys header in DynamoDB JSON
//     and keep their types.
//
// Errors name the header or the field that was wrong; Decode never panics
// on any input.
//
// # Depending on it
//
// The package is github.com/ttl-archiver/archiver/subscribe, in the
// archiver's module github.com/ttl-archiver/archiver, which needs Go
// 1.26.8 or later (its go.mod's go line, to which go get raises the
// subscriber's; a go command from 1.21 on fetches that toolchain itself
// unless GOTOOLCHAIN=local):
//
//	go get github.com/ttl-archiver/archiver/subscribe@latest
//
// A build compiles only what the package imports: of the archiver, the
// leaf packages natsmsg (the header names) and event (the event and its
// kinds, with internal/ddbjson, its reader and writer of DynamoDB JSON);
// the AWS SDK's DynamoDB and DynamoDB Streams types, attribute
// values without a client (modules aws-sdk-go-v2/service/dynamodb and
// service/dynamodbstreams, with aws/smithy-go); and nats.go with its
// jetstream package and what it needs (nats-io/nkeys, nats-io/nuid,
// klauspost/compress, golang.org/x/crypto, golang.org/x/sys). No
// nats-server, no AWS client, no zap, Prometheus or S3 code
// (TestDependencies). The archiver's go.mod sets the least versions of
// those modules a subscriber's build takes. attributevalue.UnmarshalMap is
// the SDK's feature/dynamodb/attributevalue module, which a subscriber
// requires itself, as subscribe/testdata/subscriber, a module of its own,
// does. docs/MESSAGES.md says the same.
package subscribe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/natsmsg"
)

// Event is one decoded message.
type Event struct {
	// Format is the message's format: natsmsg.FormatCloudEvents,
	// FormatEnvelope or FormatItem.
	Format string
	// Subject is the NATS subject the message was published on.
	Subject string
	// ID is the message's ID (Nats-Msg-Id): the same for every copy of
	// one event, so subscribers de-duplicate on it. It is the stream
	// record's event ID, but for an expiry that carries the item's old
	// image: that has the ID its expiry has in every Region of a global
	// table (event.ExpiryIDPrefix and a digest of the table, keys and
	// old image; see event.IDHasher), so copies archived from two
	// Regions are one.
	ID string
	// EventID is the stream record's own event ID (the body's
	// Metadata.eventID); "" in the item format, which has no body to
	// carry it.
	EventID string
	// Table is the DynamoDB table's name.
	Table string
	// Kind is expired, deleted, inserted or modified (undecodable on a
	// dead-letter stream).
	Kind event.Kind
	// EventName is the stream record's INSERT, MODIFY or REMOVE.
	EventName string
	// Item is the item: its old image for a REMOVE (what was deleted), its
	// new image otherwise; the keys alone when KeysOnly.
	Item map[string]ddb.AttributeValue
	// Keys are the item's key attributes.
	Keys map[string]ddb.AttributeValue
	// OldImage is the image before a MODIFY that carried both (nil
	// otherwise).
	OldImage map[string]ddb.AttributeValue
	// KeysOnly is true when the stream carried no image of the item, so
	// Item holds its keys alone.
	KeysOnly bool
	// Time is when the stream record was written; for a REMOVE, the
	// deletion time. Zero in the item format.
	Time time.Time
	// DeletionTime is Time for a REMOVE, zero otherwise.
	DeletionTime time.Time
	// TTLAttribute is the table's TTL attribute and TTLValue its value in
	// the item (epoch seconds, decimal), when the archiver knew them;
	// TTLTime is TTLValue as a time and TTLLag the deletion time minus
	// TTLTime. All zero in the item format.
	TTLAttribute string
	TTLValue     string
	TTLTime      time.Time
	TTLLag       time.Duration
	// DeletedBy is "dynamodb-ttl" (DynamoDB's TTL process) or "other" for
	// a REMOVE, "" otherwise.
	DeletedBy string
	// Region is the AWS Region of the stream the record was read from
	// (Archiver-Region, the line's region, ce-dynamodbregion): in a
	// global table, the replica whose stream it was. "" when the message
	// names none (one published before messages carried it, in the item
	// format).
	Region string
	// Shard is the stream shard's ID.
	Shard string
	// Sequence is the record's sequence number: a decimal string of up to
	// 40 digits, larger than an int64; compare it with
	// [event.CompareSequence], never as strings.
	Sequence string
	// StreamARN is the table's stream ("" in the item format).
	StreamARN string
	// DeadLetter says why the event was dead-lettered, when it was
	// published by a dead-letter sink (nil otherwise).
	DeadLetter *event.DeadLetter
	// CloudEvent holds the CloudEvents attributes of a cloudevents
	// message (nil in the other formats).
	CloudEvent *CloudEvent
}

// CloudEvent is the CloudEvents 1.0 attributes of a message in the
// cloudevents format, percent-decoded.
type CloudEvent struct {
	SpecVersion     string    // "1.0"
	ID              string    // the message ID, as Nats-Msg-Id
	Source          string    // the table's ARN, or urn:ttl-archiver:table:NAME
	Type            string    // io.ttl-archiver.item.KIND
	Time            time.Time // the record's time
	Subject         string    // the item's key, DynamoDB JSON
	DataContentType string    // "application/json"
	// Extensions are the other ce- attributes by name without the prefix
	// (dynamodbtable, dynamodbshard, dynamodbsequence, dynamodbregion,
	// ttlattribute, ttlvalue, deletedby, deadletter).
	Extensions map[string]string
}

// Decode decodes a message of the NATS sink.
func Decode(m *nats.Msg) (Event, error) {
	if m == nil {
		return Event{}, errors.New("subscribe: nil message")
	}
	return DecodeParts(m.Subject, m.Header, m.Data)
}

// DecodeJetStream decodes a message a JetStream consumer
// (jetstream.Consumer's Consume, Fetch or Messages) delivered.
func DecodeJetStream(m jetstream.Msg) (Event, error) {
	if m == nil {
		return Event{}, errors.New("subscribe: nil message")
	}
	return DecodeParts(m.Subject(), m.Headers(), m.Data())
}

// DecodeParts decodes a message from its subject, headers and body: the
// parts every NATS client exposes.
func DecodeParts(subject string, h nats.Header, data []byte) (Event, error) {
	ev := Event{Subject: subject}
	var err error
	if ev.ID, err = header(h, natsmsg.HeaderMsgID); err != nil {
		return Event{}, err
	}
	if _, ce := h[natsmsg.CESpecVersion]; ce {
		ev.Format = natsmsg.FormatCloudEvents
	} else if isLine(data) {
		ev.Format = natsmsg.FormatEnvelope
	} else {
		ev.Format = natsmsg.FormatItem
	}
	if ev.Format == natsmsg.FormatItem {
		err = ev.fromItem(h, data)
	} else {
		err = ev.fromLine(h, data)
	}
	if err != nil {
		return Event{}, err
	}
	if ev.Format == natsmsg.FormatCloudEvents {
		if ev.CloudEvent, err = cloudEvent(h, &ev); err != nil {
			return Event{}, err
		}
	}
	return ev, nil
}

// isLine reports whether data is an archive line rather than an item: a
// JSON object with a "Metadata" member that is an object with an
// "eventID". An item of the item format that has such an attribute is
// read as a line, and fails as one (with an error, never quietly).
func isLine(data []byte) bool {
	var top struct {
		Metadata *struct {
			EventID *json.RawMessage `json:"eventID"`
		} `json:"Metadata"`
	}
	if json.Unmarshal(data, &top) != nil {
		return bytes.Contains(data, []byte(`"Metadata"`)) // a broken line: say so
	}
	return top.Metadata != nil && top.Metadata.EventID != nil
}

// fromLine fills ev from an archive line and checks the headers against
// it.
func (ev *Event) fromLine(h nats.Header, data []byte) error {
	e, err := event.DecodeLine(data)
	if err != nil {
		return fmt.Errorf("subscribe: body: %w", err)
	}
	for _, c := range []struct{ name, body, field string }{
		{natsmsg.HeaderMsgID, event.MessageID(&e), "message ID"},
		{natsmsg.HeaderTable, e.Table, "Metadata.table"},
		{natsmsg.HeaderKind, string(e.Kind), "Metadata.kind"},
	} {
		if v := h.Get(c.name); v != c.body {
			return fmt.Errorf("subscribe: header %s: %q differs from the body's %s %q", c.name, v, c.field, c.body)
		}
	}
	// A message published before messages named their Region has no
	// Archiver-Region, and its body's Region is its streamArn's.
	if v, ok := h[natsmsg.HeaderRegion]; ok && (len(v) == 0 || v[0] != e.Region) {
		return fmt.Errorf("subscribe: header %s: %q differs from the body's Metadata.region %q", natsmsg.HeaderRegion, h.Get(natsmsg.HeaderRegion), e.Region)
	}
	if _, err := headerKeys(h); err != nil {
		return err // the body's keys are the ones kept; the header must read too
	}
	ev.Table, ev.Kind, ev.EventName, ev.EventID = e.Table, e.Kind, e.EventName, e.EventID
	ev.Item = event.ToDynamoDB(e.Image())
	ev.Keys = event.ToDynamoDB(e.Keys)
	if e.EventName == "MODIFY" && e.NewImage != nil {
		ev.OldImage = event.ToDynamoDB(e.OldImage)
	}
	ev.KeysOnly = e.KeysOnly()
	ev.Time = e.ApproximateCreationTime
	if e.EventName == "REMOVE" || e.Kind == event.Expired || e.Kind == event.Deleted {
		ev.DeletionTime = e.ApproximateCreationTime
	}
	ev.TTLAttribute, ev.TTLValue, ev.TTLTime, ev.TTLLag = e.TTLAttribute, e.TTLValue, e.TTLTime, e.TTLLag
	ev.DeletedBy, ev.Shard, ev.Sequence, ev.StreamARN, ev.Region = e.DeletedBy, e.ShardID, e.SequenceNumber, e.StreamARN, e.Region
	ev.DeadLetter = e.DeadLetter
	return nil
}

// fromItem fills ev from a message of the item format: the headers say
// what the event is, the body is the item as plain JSON.
func (ev *Event) fromItem(h nats.Header, data []byte) error {
	var err error
	if ev.Table, err = header(h, natsmsg.HeaderTable); err != nil {
		return err
	}
	kind, err := header(h, natsmsg.HeaderKind)
	if err != nil {
		return err
	}
	ev.Kind = event.Kind(kind)
	if !ev.Kind.Valid() && ev.Kind != event.Undecodable {
		return fmt.Errorf("subscribe: header %s: %q is not one of expired, deleted, inserted, modified", natsmsg.HeaderKind, kind)
	}
	if err := ev.headers(h); err != nil {
		return err
	}
	if ev.Item, err = plainItem(data); err != nil {
		return fmt.Errorf("subscribe: body: %w", err)
	}
	return nil
}

// headers reads the Archiver- headers of the item format besides table
// and kind.
func (ev *Event) headers(h nats.Header) error {
	k, err := headerKeys(h)
	if err != nil {
		return err
	}
	ev.Keys = event.ToDynamoDB(k)
	ev.Shard = h.Get(natsmsg.HeaderShard)
	ev.Sequence = h.Get(natsmsg.HeaderSequence)
	if !decimal(ev.Sequence) {
		return fmt.Errorf("subscribe: header %s: %q is not a decimal number", natsmsg.HeaderSequence, ev.Sequence)
	}
	ev.EventName = h.Get(natsmsg.HeaderEventName)
	switch ev.EventName {
	case "INSERT", "MODIFY", "REMOVE", "":
	default:
		return fmt.Errorf("subscribe: header %s: %q is not INSERT, MODIFY or REMOVE", natsmsg.HeaderEventName, ev.EventName)
	}
	if ev.Region = h.Get(natsmsg.HeaderRegion); ev.Region != "" && !event.ValidRegion(ev.Region) {
		return fmt.Errorf("subscribe: header %s: %q is not a Region name", natsmsg.HeaderRegion, ev.Region)
	}
	ev.DeletedBy = h.Get(natsmsg.HeaderDeletedBy)
	switch ev.DeletedBy {
	case "", event.DeletedByTTL, event.DeletedByOther:
	default:
		return fmt.Errorf("subscribe: header %s: %q is not %s or %s", natsmsg.HeaderDeletedBy, ev.DeletedBy, event.DeletedByTTL, event.DeletedByOther)
	}
	return nil
}

// headerKeys reads the Archiver-Keys header: DynamoDB JSON, on every
// message of every format.
func headerKeys(h nats.Header) (event.Item, error) {
	keys, err := header(h, natsmsg.HeaderKeys)
	if err != nil {
		return nil, err
	}
	k, err := event.UnmarshalItem([]byte(keys))
	if err != nil {
		return nil, fmt.Errorf("subscribe: header %s: %w", natsmsg.HeaderKeys, err)
	}
	return k, nil
}

// header is h's value of name, which must be there and not empty.
func header(h nats.Header, name string) (string, error) {
	v := h.Get(name)
	if v == "" {
		return "", fmt.Errorf("subscribe: header %s: missing", name)
	}
	return v, nil
}

// decimal reports whether s is empty or decimal digits only.
func decimal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// cloudEvent reads the ce- headers of a cloudevents message, percent-
// decoded, and checks them against what the body said.
func cloudEvent(h nats.Header, ev *Event) (*CloudEvent, error) {
	ce := &CloudEvent{Extensions: map[string]string{}}
	fields := map[string]*string{
		natsmsg.CESpecVersion:     &ce.SpecVersion,
		natsmsg.CEID:              &ce.ID,
		natsmsg.CESource:          &ce.Source,
		natsmsg.CEType:            &ce.Type,
		natsmsg.CESubject:         &ce.Subject,
		natsmsg.CEDataContentType: &ce.DataContentType,
	}
	var ceTime string
	for name, vals := range h {
		if len(name) <= len(natsmsg.CEPrefix) || name[:len(natsmsg.CEPrefix)] != natsmsg.CEPrefix || len(vals) == 0 {
			continue
		}
		v, err := url.PathUnescape(vals[0])
		if err != nil {
			return nil, fmt.Errorf("subscribe: header %s: not percent-encoded: %w", name, err)
		}
		switch p, ok := fields[name]; {
		case ok:
			*p = v
		case name == natsmsg.CETime:
			ceTime = v
		default:
			ce.Extensions[name[len(natsmsg.CEPrefix):]] = v
		}
	}
	if ce.SpecVersion != natsmsg.SpecVersion {
		return nil, fmt.Errorf("subscribe: header %s: %q, want %q", natsmsg.CESpecVersion, ce.SpecVersion, natsmsg.SpecVersion)
	}
	if ce.ID != ev.ID {
		return nil, fmt.Errorf("subscribe: header %s: %q differs from %s %q", natsmsg.CEID, ce.ID, natsmsg.HeaderMsgID, ev.ID)
	}
	if ce.Source == "" {
		return nil, fmt.Errorf("subscribe: header %s: missing", natsmsg.CESource)
	}
	if want := natsmsg.TypePrefix + string(ev.Kind); ce.Type != want {
		return nil, fmt.Errorf("subscribe: header %s: %q, want %q for kind %s", natsmsg.CEType, ce.Type, want, ev.Kind)
	}
	if r, ok := ce.Extensions[natsmsg.CERegion[len(natsmsg.CEPrefix):]]; ok && r != ev.Region {
		return nil, fmt.Errorf("subscribe: header %s: %q differs from the body's Metadata.region %q", natsmsg.CERegion, r, ev.Region)
	}
	if ceTime != "" {
		t, err := time.Parse(time.RFC3339Nano, ceTime)
		if err != nil {
			return nil, fmt.Errorf("subscribe: header %s: %w", natsmsg.CETime, err)
		}
		ce.Time = t
	}
	return ce, nil
}
