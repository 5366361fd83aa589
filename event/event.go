// Package event is the record model shared by the consumer and the sinks:
// one decoded DynamoDB Streams record, classified by what happened to the
// item. It sits below its users (consumer, sinks) and imports nothing else of
// ours but internal/ddbjson, the one reader and writer of DynamoDB JSON.
//
// It also holds what is known about a single stream record, for every
// package that reads records: [Decode] and [Classify] (which REMOVE is an
// expiry, under [ExpiredWhen]) and the record's sequence number helpers.
//
// The archive line is its text form: [AppendLine] writes one, [DecodeLine]
// and [DecodeLineText] read any (and explain what is wrong), and a
// [LineDecoder] reads an object's lines in one pass each, as AppendLine
// wrote them, for the archive reader and the Parquet writer alike.
//
// Images are kept as DynamoDB attribute values (the SDK's streams types), so
// nothing about an item is lost between the stream and an archive: numbers
// stay decimal strings, binary stays bytes, sets stay sets. Render them with
// [MarshalItem] (DynamoDB JSON) or [PlainJSON] (ordinary JSON).
package event

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Kind says what happened to an item.
type Kind string

// The four kinds. A REMOVE is Expired when DynamoDB's TTL process made it
// (userIdentity Type "Service", PrincipalId "dynamodb.amazonaws.com") and,
// when the consumer is told so (expired-when past-ttl), when its old image's
// TTL had passed; every other REMOVE is Deleted. [Event.DeletedBy] says
// which of the two paths deleted an expired item.
const (
	Expired  Kind = "expired"
	Deleted  Kind = "deleted"
	Inserted Kind = "inserted"
	Modified Kind = "modified"
)

// Undecodable is the kind of a stream record the consumer could not decode
// (no sequence number, an unknown event name). Such records are never
// routed to sinks: they go to the dead-letter sink, with the raw record in
// [DeadLetter.Record]. It is not one of [Kinds] and not [Kind.Valid].
const Undecodable Kind = "undecodable"

// Kinds lists every kind, in a stable order.
var Kinds = []Kind{Expired, Deleted, Inserted, Modified}

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool {
	switch k {
	case Expired, Deleted, Inserted, Modified:
		return true
	}
	return false
}

// Item is one item image in DynamoDB's attribute-value form.
type Item = map[string]types.AttributeValue

// Event is one stream record after decoding and classification.
//
// Position (StreamARN, ShardID, SequenceNumber) identifies the record
// uniquely and is what checkpoints and deterministic sink object names are
// derived from; EventID is the stream's own unique ID for the record and is
// what de-duplicating sinks (NATS Nats-Msg-Id) key on, but for an expiry
// with its old image, whose ID is the same in every Region ([IDHasher]).
type Event struct {
	Kind      Kind
	Table     string
	StreamARN string
	// Region is the AWS Region whose stream the record was read from:
	// the Region of StreamARN ([RegionOf]; "" when the ARN names none).
	// Two Regions' streams of one global table can hold equal shard IDs,
	// sequence numbers and, for one item's expiry, equal content:
	// Region is what tells their records apart.
	Region  string
	ShardID string
	// SequenceNumber is the record's decimal sequence number within its
	// shard. Compare with [CompareSequence], never as strings.
	SequenceNumber string
	EventID        string
	// EventName is the stream's own name: INSERT, MODIFY or REMOVE.
	EventName string
	// DeletedBy says who deleted the item, for every REMOVE:
	// [DeletedByTTL] or [DeletedByOther]; "" for other events.
	DeletedBy string
	// ApproximateCreationTime is when DynamoDB wrote the record: for an
	// expired item, the deletion time (to the stream's precision).
	ApproximateCreationTime time.Time
	Keys                    Item
	OldImage                Item // nil unless the view type carries it
	NewImage                Item // nil unless the view type carries it
	// SizeBytes is the record's size as the stream reports it.
	SizeBytes int64

	// TTLAttribute is the table's TTL attribute name, when TTL is enabled
	// and known.
	TTLAttribute string
	// TTLValue is the TTL attribute's decimal value in the old image of an
	// expired item ("" when unknown, e.g. under KEYS_ONLY).
	TTLValue string
	// TTLTime is TTLValue read as epoch seconds (zero when unknown).
	TTLTime time.Time
	// TTLLag is the deletion time minus TTLTime (zero when unknown).
	TTLLag time.Duration

	// DeadLetter is set on an event written to a dead-letter sink: why it
	// is there instead of (or besides) where it was routed. Nil otherwise.
	DeadLetter *DeadLetter
}

// The values of [Event.DeletedBy]. A stream record names its principal
// only for DynamoDB's own TTL deletes (its userIdentity); every other
// delete carries none: an application's DeleteItem, a sweeper such as
// `archiver sweep`, or a TTL delete replicated from another region of a
// global table. An Expired event with DeletedByOther is therefore an item
// someone else deleted after its TTL had passed.
const (
	DeletedByTTL   = "dynamodb-ttl" // DynamoDB's TTL process
	DeletedByOther = "other"        // any other principal (the stream does not say which)
)

// DeadLetter says why an event went to the dead-letter sink. Archive lines
// carry it as a top-level "DeadLetter" object (see [AppendLine]).
type DeadLetter struct {
	// Sink names the sink that failed the event (the sink's Name, which
	// holds no secrets); "" for a record that could not be decoded.
	Sink string
	// Reason is why it was dead-lettered: "permanent" (the sink will never
	// take it), "retry_for" (it kept failing for longer than the retry
	// limit) or "undecodable".
	Reason string
	// Error is the last error the sink (or the decoder) gave.
	Error string
	// Attempts is how many times the sink was given the event.
	Attempts int
	// FirstFailure is when the sink first failed the event.
	FirstFailure time.Time
	// Record is the raw stream record as JSON (see [AppendStreamRecord]),
	// for a record that could not be decoded; nil otherwise.
	Record []byte
}

// The reasons of [DeadLetter.Reason].
const (
	ReasonPermanent   = "permanent"
	ReasonRetryFor    = "retry_for"
	ReasonUndecodable = "undecodable"
)

// ImageKeysOnly is the archive line's Metadata.image for an event whose
// stream record carried no image of the item (see [Event.KeysOnly]).
const ImageKeysOnly = "keys-only"

// KeysOnly reports whether the event carries no image of the item, only
// its keys: its table's stream has view type KEYS_ONLY, or NEW_IMAGE for a
// REMOVE (which has no new image). Its archive line says so
// ("image":"keys-only"), so an analyst can tell a missing image from an
// item that held nothing but its keys. Undecodable records are never
// keys-only: they are no item's event.
func (e *Event) KeysOnly() bool {
	return e.Kind.Valid() && e.OldImage == nil && e.NewImage == nil
}

// NeedsOldImage reports whether any of kinds is a removal (expired,
// deleted): a removed item's attributes reach the archive only through
// the stream's old image (view type OLD_IMAGE or NEW_AND_OLD_IMAGES).
func NeedsOldImage(kinds []Kind) bool {
	for _, k := range kinds {
		if k == Expired || k == Deleted {
			return true
		}
	}
	return false
}

// Image returns the fullest image of the item the event carries: the old
// image of a REMOVE, the new image otherwise, falling back to the keys.
func (e *Event) Image() Item {
	if e.EventName == "REMOVE" || e.Kind == Expired || e.Kind == Deleted {
		if e.OldImage != nil {
			return e.OldImage
		}
	} else if e.NewImage != nil {
		return e.NewImage
	}
	if e.OldImage != nil {
		return e.OldImage
	}
	if e.NewImage != nil {
		return e.NewImage
	}
	return e.Keys
}
