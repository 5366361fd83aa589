package sinks

import (
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/nats-io/nats.go"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/natsmsg"
)

// The CloudEvents format (format=cloudevents) is the envelope
// format (the archive line as the body, the Archiver- headers) plus the
// event's CloudEvents 1.0 attributes as ce- headers: the binary content
// mode of the CloudEvents NATS protocol binding (1.0.3). The message has no
// Content-Type header, which would mark the structured mode. The attributes
// are listed in docs/MESSAGES.md and named in [natsmsg].

// appendCloudEvents sets e's CloudEvents headers on h. id is the event ID
// (Nats-Msg-Id) and keys the DynamoDB JSON of its key attributes. A value
// that needs percent-encoding is encoded into arena, which is returned
// extended (the values point into it, as appendMessage's do), with the
// bytes the headers add to the message.
func appendCloudEvents(arena []byte, h nats.Header, e *event.Event, id, keys string) ([]byte, int) {
	size := 0
	set := func(name, value string) {
		if value == "" {
			return // an optional attribute without a value is left out
		}
		var enc string
		enc, arena = percentEncode(arena, value)
		h[name] = []string{enc}
		size += len(name) + len(enc) + 4
	}
	set(natsmsg.CESpecVersion, natsmsg.SpecVersion)
	set(natsmsg.CEID, id)
	set(natsmsg.CESource, ceSource(e))
	set(natsmsg.CEType, natsmsg.TypePrefix+string(e.Kind))
	if !e.ApproximateCreationTime.IsZero() {
		start := len(arena)
		arena = e.ApproximateCreationTime.UTC().AppendFormat(arena, time.RFC3339Nano)
		set(natsmsg.CETime, arenaString(arena[start:]))
	}
	set(natsmsg.CESubject, keys)
	set(natsmsg.CEDataContentType, natsmsg.DataContentType)
	set(natsmsg.CETable, e.Table)
	set(natsmsg.CEShard, e.ShardID)
	set(natsmsg.CESequence, e.SequenceNumber)
	set(natsmsg.CERegion, e.Region)
	set(natsmsg.CETTLAttribute, e.TTLAttribute)
	set(natsmsg.CETTLValue, e.TTLValue)
	set(natsmsg.CEDeletedBy, e.DeletedBy)
	if e.DeadLetter != nil {
		set(natsmsg.CEDeadLetter, e.DeadLetter.Reason)
	}
	return arena, size
}

// ceSource is the event's ce-source: the table's ARN, which the stream's
// ARN begins with (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME, cut before
// "/stream/"). An event without a stream ARN (an archive line that held
// none) has urn:ttl-archiver:table:NAME, the name path-escaped.
func ceSource(e *event.Event) string {
	if arn, _, ok := strings.Cut(e.StreamARN, "/stream/"); ok && arn != "" {
		return arn
	}
	if e.StreamARN != "" {
		return e.StreamARN
	}
	return "urn:ttl-archiver:table:" + url.PathEscape(e.Table)
}

// percentEncode encodes s as a CloudEvents NATS header value (binding
// 1.0.3, section 3.1.3.2): space, '"', '%' and every byte outside printable
// ASCII become %XX (upper-case hex; a character's UTF-8 bytes one by one),
// everything else stays. Bytes that are not UTF-8 become U+FFFD's, so the
// value always decodes: the binding has a decoder refuse invalid UTF-8. A
// value that needs nothing is returned as it is; otherwise the encoding is
// appended to arena, which is returned extended.
func percentEncode(arena []byte, s string) (string, []byte) {
	i := 0
	for i < len(s) && !mustEncode(s[i]) {
		i++
	}
	if i == len(s) {
		return s, arena
	}
	start := len(arena)
	arena = append(arena, s[:i]...)
	for i < len(s) {
		c := s[i]
		if !mustEncode(c) {
			arena = append(arena, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			arena = append(arena, '%', upperHex[c>>4], upperHex[c&0xf])
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			arena = append(arena, "%EF%BF%BD"...)
			i++
			continue
		}
		for _, b := range []byte(s[i : i+n]) {
			arena = append(arena, '%', upperHex[b>>4], upperHex[b&0xf])
		}
		i += n
	}
	return arenaString(arena[start:]), arena
}

// mustEncode reports whether the binding has byte c percent-encoded.
func mustEncode(c byte) bool {
	return c <= ' ' || c >= 0x7f || c == '"' || c == '%'
}

const upperHex = "0123456789ABCDEF"

// arenaString is b as a string without a copy: b is a region of a batch's
// arena, never written again.
func arenaString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
