// Package natsmsg names the parts of the messages the NATS sink publishes:
// header names, the formats, and the CloudEvents attributes and types. It
// is the contract shared by the sink (package sinks) and its readers
// (package subscribe); it imports nothing, so a subscriber that needs the
// names pulls in nothing else. docs/MESSAGES.md describes the messages.
package natsmsg

// The formats of a nats:// sink (its format= parameter).
const (
	// FormatCloudEvents (the default) is FormatEnvelope plus the
	// CloudEvents 1.0 attributes as ce- headers (the NATS protocol
	// binding's binary content mode).
	FormatCloudEvents = "cloudevents"
	// FormatEnvelope is the archive line as the body, with the Archiver-
	// headers: cloudevents without the ce- headers.
	FormatEnvelope = "envelope"
	// FormatItem is the item alone as plain JSON, with the Archiver-
	// headers.
	FormatItem = "item"
	// DefaultFormat is the format of a sink that names none.
	DefaultFormat = FormatCloudEvents
)

// Formats lists the formats, the default first.
var Formats = []string{FormatCloudEvents, FormatEnvelope, FormatItem}

// HeaderMsgID is JetStream's de-duplication header, on every message of
// every format: the stream record's event ID, but for an expiry that
// carries the item's old image, whose ID is the same in every Region of a
// global table (ExpiryIDPrefix in package event; docs/MESSAGES.md,
// "Message IDs").
const HeaderMsgID = "Nats-Msg-Id"

// The Archiver- headers, on every message of every format.
// HeaderDeletedBy is on REMOVE messages only: "dynamodb-ttl" when
// DynamoDB's TTL process deleted the item, "other" otherwise.
// HeaderRegion is on every message whose record came from a stream whose
// ARN names a Region (every record the archiver reads).
const (
	HeaderTable     = "Archiver-Table"
	HeaderKind      = "Archiver-Kind"
	HeaderKeys      = "Archiver-Keys" // DynamoDB JSON of the key attributes, keys sorted
	HeaderShard     = "Archiver-Shard"
	HeaderSequence  = "Archiver-Sequence" // a decimal string of up to 40 digits: not an int64
	HeaderEventName = "Archiver-Event-Name"
	HeaderRegion    = "Archiver-Region" // the AWS Region of the stream the record was read from
	HeaderDeletedBy = "Archiver-Deleted-By"
)

// CEPrefix is the prefix of every CloudEvents attribute's header in the
// binary content mode; the header's name is the prefix and the
// attribute's name.
const CEPrefix = "ce-"

// The CloudEvents headers of FormatCloudEvents. Values are percent-encoded
// as the NATS protocol binding (1.0.3, section 3.1.3.2) requires: space,
// '"', '%' and every byte outside printable ASCII as %XX.
const (
	CESpecVersion     = "ce-specversion"     // "1.0"
	CEID              = "ce-id"              // the message ID, as Nats-Msg-Id
	CESource          = "ce-source"          // the table's ARN (see docs/MESSAGES.md)
	CEType            = "ce-type"            // TypePrefix + the kind
	CETime            = "ce-time"            // the record's creation time: for a REMOVE, the deletion time
	CESubject         = "ce-subject"         // the item's key: DynamoDB JSON, keys sorted
	CEDataContentType = "ce-datacontenttype" // "application/json"

	// Extension attributes: lower-case letters and digits, as the
	// CloudEvents spec requires. All are Strings.
	CETable        = "ce-dynamodbtable"    // the table's name
	CEShard        = "ce-dynamodbshard"    // the stream shard's ID
	CESequence     = "ce-dynamodbsequence" // the record's sequence number (decimal, up to 40 digits)
	CERegion       = "ce-dynamodbregion"   // the AWS Region of the stream the record was read from
	CETTLAttribute = "ce-ttlattribute"     // the table's TTL attribute, when known
	CETTLValue     = "ce-ttlvalue"         // its value in the old image (epoch seconds, decimal), when known
	CEDeletedBy    = "ce-deletedby"        // REMOVEs only: "dynamodb-ttl" or "other"
	CEDeadLetter   = "ce-deadletter"       // dead letters only: why ("permanent", "retry_for", "undecodable")
)

// SpecVersion is the CloudEvents version of the messages.
const SpecVersion = "1.0"

// DataContentType is the media type of a CloudEvents message's data (the
// archive line).
const DataContentType = "application/json"

// TypePrefix prefixes the kind in ce-type: io.ttl-archiver.item.expired,
// .deleted, .inserted and .modified; a record the archiver could not
// decode (on a dead-letter sink) is io.ttl-archiver.item.undecodable.
const TypePrefix = "io.ttl-archiver.item."
