package event

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"github.com/ttl-archiver/archiver/internal/ddbjson"
)

// ExpiryIDPrefix begins the message ID of an expiry that carries the
// item's old image (see [IDHasher]): "expiry1-" and 32 lower-case hex
// digits. The 1 numbers the rule: a change to what is hashed takes
// another prefix, so IDs of two rules never meet.
const ExpiryIDPrefix = "expiry1-"

// ExpiryDigestSize is the bytes of an expiry's digest: the first 16 of
// its SHA-256.
const ExpiryDigestSize = 16

// HasExpiryID reports whether e's message ID is the one its expiry has
// in every Region (see [IDHasher]): it is an expiry, it carries the old
// image, and it is no dead letter (a dead letter reports one archiver's
// failure to deliver one record: it keeps the record's event ID).
func (e *Event) HasExpiryID() bool {
	return e.Kind == Expired && e.OldImage != nil && e.DeadLetter == nil
}

// IDHasher computes message IDs: the NATS sink's Nats-Msg-Id and ce-id,
// and the identity archive readers de-duplicate on. It holds a SHA-256
// state and a buffer, reused, so an ID costs no allocation; one IDHasher
// serves one goroutine.
//
// An event's message ID is its stream record's event ID, except for an
// expiry that carries the item's old image ([Event.HasExpiryID]): in a
// global table each Region's stream has its own record (and event ID) of
// one expiry, and when two Regions' TTL both delete an item, or an
// archiver per Region and one reading every Region overlap, one expiry
// is archived and published more than once. Its ID is therefore made of
// what every Region's record of it has alike: ExpiryIDPrefix and the
// first 16 bytes, in hex, of the SHA-256 of
//
//	{"Item":OLDIMAGE,"Keys":KEYS,"Table":TABLE}
//
// OLDIMAGE and KEYS as the archive line renders Item and Keys (DynamoDB
// JSON, attribute names sorted, no spaces; [AppendItem]) and TABLE the
// table's name as a JSON string: the line's own first bytes up to the
// end of Keys, then ,"Table":"NAME"}. The old image holds the TTL value,
// so an item re-created and expiring again with another TTL or other
// content has another ID; an identical item expiring twice has one (and
// JetStream keeps one message of the two within its duplicate window).
// An expiry without an old image (a KEYS_ONLY stream) keeps its event
// ID: the keys alone cannot tell one life of an item from the next. An
// event without an event ID has STREAMARN/SHARD/SEQUENCE.
type IDHasher struct {
	h    hash.Hash
	buf  []byte
	sum  []byte
	head []byte
}

// NewIDHasher returns an IDHasher.
func NewIDHasher() *IDHasher {
	return &IDHasher{h: sha256.New()}
}

// MessageID returns e's message ID (see [IDHasher]). It allocates a
// SHA-256 state: a loop over many events keeps one IDHasher.
func MessageID(e *Event) string {
	return string(NewIDHasher().AppendMessageID(nil, e))
}

// ExpiryDigest returns the digest of an expiry's message ID: head is the
// start of its archive line, {"Item":OLDIMAGE,"Keys":KEYS, exactly as
// [AppendLine] renders it, and table its table's name.
func (x *IDHasher) ExpiryDigest(head []byte, table string) [ExpiryDigestSize]byte {
	x.buf = append(ddbjson.AppendString(append(x.buf[:0], `,"Table":`...), table), '}')
	x.h.Reset()
	x.h.Write(head)
	x.h.Write(x.buf)
	x.sum = x.h.Sum(x.sum[:0])
	return [ExpiryDigestSize]byte(x.sum)
}

// AppendExpiryID appends the message ID of an expiry whose digest is d.
func AppendExpiryID(dst []byte, d [ExpiryDigestSize]byte) []byte {
	dst = append(dst, ExpiryIDPrefix...)
	return hex.AppendEncode(dst, d[:])
}

// Digest returns the digest of e's expiry ID when it has one
// ([Event.HasExpiryID]), computed from its keys and old image rendered as
// the line renders them; [IDHasher.AppendLine] saves that rendering where
// the line is rendered anyway.
func (x *IDHasher) Digest(e *Event) ([ExpiryDigestSize]byte, bool) {
	if !e.HasExpiryID() {
		return [ExpiryDigestSize]byte{}, false
	}
	x.head = appendLineHead(x.head[:0], e)
	return x.ExpiryDigest(x.head, e.Table), true
}

// AppendMessageID appends e's message ID to dst.
func (x *IDHasher) AppendMessageID(dst []byte, e *Event) []byte {
	if d, ok := x.Digest(e); ok {
		return AppendExpiryID(dst, d)
	}
	return appendPlainID(dst, e)
}

// AppendLine appends e's archive line, as [AppendLine] does, then e's
// message ID (see [IDHasher]), computed from the line's own bytes; id is
// where the ID begins (the line ends there, with its newline).
func (x *IDHasher) AppendLine(dst []byte, e *Event) (out []byte, id int) {
	start := len(dst)
	dst = appendLineHead(dst, e)
	head := len(dst)
	dst = appendLineRest(dst, e)
	id = len(dst)
	if !e.HasExpiryID() {
		return appendPlainID(dst, e), id
	}
	return AppendExpiryID(dst, x.ExpiryDigest(dst[start:head], e.Table)), id
}

// appendPlainID appends the message ID of an event without an expiry ID:
// its event ID, or where it was read when it has none.
func appendPlainID(dst []byte, e *Event) []byte {
	if e.EventID != "" {
		return append(dst, e.EventID...)
	}
	return append(append(append(append(append(dst, e.StreamARN...), '/'), e.ShardID...), '/'), e.SequenceNumber...)
}
