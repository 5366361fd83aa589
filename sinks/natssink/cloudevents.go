package natssink

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

// appendCloudEvents sets e's CloudEvents headers on h and returns the bytes
// nats.go writes for them. own holds the values of the Archiver- headers
// already set (by headerNames' index; nil for one not set): a ce- header
// with the same value shares its slice, unless the value needs
// percent-encoding, which goes into the arena (as do the time's digits).
// Constant values share the render's slices, ce-source is encoded once
// per stream ARN and ce-time formatted once per time. nats.go never writes a header value in place, so sharing
// a one-element slice between headers and messages is safe. ceCount must
// count the headers it sets.
func (r *natsRender) appendCloudEvents(h nats.Header, e *event.Event, own *[len(headerNames)][]string) int {
	size := setHeader(h, natsmsg.CESpecVersion, r.fixed(ceSpecVersion))
	size += r.ceShared(h, natsmsg.CEID, own[0])
	size += setHeader(h, natsmsg.CESource, r.ceSource(e))
	if t := ceTypeIndex(e.Kind); t >= 0 {
		size += setHeader(h, natsmsg.CEType, r.fixed(t))
	} else {
		size += r.ceHeader(h, natsmsg.CEType, natsmsg.TypePrefix+string(e.Kind))
	}
	if !e.ApproximateCreationTime.IsZero() {
		size += setHeader(h, natsmsg.CETime, r.ceTime(e.ApproximateCreationTime))
	}
	size += r.ceHeader(h, natsmsg.CESubject, own[3][0])
	size += setHeader(h, natsmsg.CEDataContentType, r.fixed(ceDataContentType))
	size += r.ceShared(h, natsmsg.CETable, own[1])
	size += r.ceShared(h, natsmsg.CEShard, own[4])
	size += r.ceShared(h, natsmsg.CESequence, own[5])
	size += r.ceShared(h, natsmsg.CERegion, own[7])
	size += r.ceHeader(h, natsmsg.CETTLAttribute, e.TTLAttribute)
	size += r.ceHeader(h, natsmsg.CETTLValue, e.TTLValue)
	size += r.ceShared(h, natsmsg.CEDeletedBy, own[8])
	if e.DeadLetter != nil {
		size += r.ceHeader(h, natsmsg.CEDeadLetter, e.DeadLetter.Reason)
	}
	return size
}

// ceCount is how many ce- headers appendCloudEvents sets for e, with id
// and keys.
func ceCount(e *event.Event, id, keys string) int {
	n := 4 // specversion, source, type, datacontenttype
	for _, v := range [...]string{id, keys, e.Table, e.ShardID, e.SequenceNumber, e.Region, e.TTLAttribute, e.TTLValue, e.DeletedBy} {
		if v != "" {
			n++
		}
	}
	if !e.ApproximateCreationTime.IsZero() {
		n++
	}
	if e.DeadLetter != nil && e.DeadLetter.Reason != "" {
		n++
	}
	return n
}

// ceHeader sets CloudEvents header k to v percent-encoded, unless v is
// empty (an optional attribute without a value is left out), and returns
// the bytes nats.go writes for it.
func (r *natsRender) ceHeader(h nats.Header, k, v string) int {
	if v == "" {
		return 0
	}
	v, r.arena = percentEncode(r.arena, v)
	return setHeader(h, k, r.val(v))
}

// ceShared sets CloudEvents header k to the value of an Archiver- header,
// vs (nil or empty: k is left out): the same slice when the value needs
// no percent-encoding, else its encoding.
func (r *natsRender) ceShared(h nats.Header, k string, vs []string) int {
	if vs == nil || vs[0] == "" {
		return 0
	}
	enc, arena := percentEncode(r.arena, vs[0])
	if len(arena) == len(r.arena) {
		return setHeader(h, k, vs) // nothing to encode
	}
	r.arena = arena
	return setHeader(h, k, r.val(enc))
}

// The render's fixed ce- values (natsRender.fixed): those that never change,
// ce-type's one for each kind among them (ceTypeIndex).
const (
	ceSpecVersion = iota
	ceDataContentType
	ceTypeExpired
	ceTypeDeleted
	ceTypeInserted
	ceTypeModified
	ceTypeUndecodable
	ceFixed
)

// ceFixedValues are the values of the fixed ce- values, by index.
func ceFixedValues() [ceFixed]string {
	return [ceFixed]string{natsmsg.SpecVersion, natsmsg.DataContentType,
		natsmsg.TypePrefix + string(event.Expired), natsmsg.TypePrefix + string(event.Deleted),
		natsmsg.TypePrefix + string(event.Inserted), natsmsg.TypePrefix + string(event.Modified),
		natsmsg.TypePrefix + string(event.Undecodable)}
}

// ceTypeIndex is the fixed value of ce-type for kind k; -1 for a kind
// that is none of them.
func ceTypeIndex(k event.Kind) int {
	switch k {
	case event.Expired:
		return ceTypeExpired
	case event.Deleted:
		return ceTypeDeleted
	case event.Inserted:
		return ceTypeInserted
	case event.Modified:
		return ceTypeModified
	case event.Undecodable:
		return ceTypeUndecodable
	}
	return -1
}

// ceTime is t as ce-time's value, formatted once for each time: a burst
// of expiries shares its creation times (a stream's are whole seconds).
func (r *natsRender) ceTime(t time.Time) []string {
	if r.time != nil && t.Equal(r.t) {
		return r.time
	}
	start := len(r.arena)
	r.arena = t.UTC().AppendFormat(r.arena, time.RFC3339Nano)
	r.t, r.time = t, r.val(arenaString(r.arena[start:]))
	return r.time
}

// ceSource is e's ce-source, percent-encoded once for each stream ARN: a
// batch holds one shard's records, so every event after the first gets
// the last one's again.
func (r *natsRender) ceSource(e *event.Event) []string {
	if e.StreamARN != "" && e.StreamARN == r.arn {
		return r.source
	}
	var src string
	src, r.arena = percentEncode(r.arena, ceSource(e))
	vs := r.val(src)
	if e.StreamARN != "" {
		r.arn, r.source = e.StreamARN, vs
	}
	return vs
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
	i := plainPrefix(s)
	if i == len(s) {
		return s, arena
	}
	start := len(arena)
	for {
		arena = append(arena, s[:i]...) // a run that stays, copied at once
		if s = s[i:]; s == "" {
			break
		}
		n := 1
		switch c := s[0]; {
		case c < utf8.RuneSelf:
			arena = append(arena, '%', upperHex[c>>4], upperHex[c&0xf])
		default:
			r, size := utf8.DecodeRuneInString(s)
			if r == utf8.RuneError && size == 1 {
				arena = append(arena, "%EF%BF%BD"...)
				break
			}
			for _, b := range []byte(s[:size]) {
				arena = append(arena, '%', upperHex[b>>4], upperHex[b&0xf])
			}
			n = size
		}
		s = s[n:]
		i = plainPrefix(s)
	}
	return arenaString(arena[start:]), arena
}

// plainPrefix is the length of s's longest prefix that needs no
// percent-encoding.
func plainPrefix(s string) int {
	for i := 0; i < len(s); i++ {
		if mustEncode(s[i]) {
			return i
		}
	}
	return len(s)
}

// mustEncode reports whether the binding has byte c percent-encoded.
func mustEncode(c byte) bool {
	return c <= ' ' || c >= 0x7f || c == '"' || c == '%'
}

const upperHex = "0123456789ABCDEF"

// arenaString is b as a string without a copy: b is a region of a batch's
// arena, never written again.
func arenaString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
