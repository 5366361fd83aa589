package shard

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ttl-archiver/archiver/event"
)

// Undecodable is a record of a GetRecords response that neither decoder
// could read (a number where a string belongs, a B that is not base64, an
// attribute value with two type members). The rest of the response is
// read record by record, so the records around it flow on.
type Undecodable struct {
	// Index is the record's place in Batch.Records, which holds a
	// placeholder there with what could still be read of it: eventID,
	// eventName (INSERT, MODIFY or REMOVE only), and of dynamodb the
	// SequenceNumber (only a valid one), ApproximateCreationDateTime,
	// SizeBytes and Keys (when the fast decoder takes them). The rest of
	// the placeholder is empty.
	Index int
	// Raw is the record's bytes as the response held them. They point into
	// the response: whatever outlives the batch copies them.
	Raw []byte
	// Err is why the SDK's decoder refused the record.
	Err error
}

// salvage collects, for one GetRecords call, the records the protocol could
// not decode; the reader puts it in the call's context. Without one in the
// context a response that will not parse fails the call, as it does
// without this package.
type salvage struct{ bad []Undecodable }

type salvageKey struct{}

func withSalvage(ctx context.Context, s *salvage) context.Context {
	return context.WithValue(ctx, salvageKey{}, s)
}

func salvageFrom(ctx context.Context) *salvage {
	s, _ := ctx.Value(salvageKey{}).(*salvage)
	return s
}

// salvageGetRecords reads a response that failed to decode as a whole
// record by record: it splits the body (splitGetRecords), decodes each
// record alone (the fast decoder, then the SDK's), and keeps the records
// that still will not parse as placeholders listed in bad. ok is false
// when the body's structure cannot be split, or its NextShardIterator is
// not a string: then nothing is salvaged.
func (p fastProtocol) salvageGetRecords(ctx context.Context, schema *smithy.OperationSchema, reg *smithy.TypeRegistry, body []byte) (out dynamodbstreams.GetRecordsOutput, bad []Undecodable, ok bool) {
	next, raws, ok := splitGetRecords(body)
	if !ok {
		return out, nil, false
	}
	out.NextShardIterator = next
	if raws != nil { // Records as the SDK builds them: nil when the body has none
		out.Records = make([]types.Record, 0, len(raws))
	}
	for _, raw := range raws {
		one := make([]byte, 0, len(raw)+16)
		one = append(append(append(one, `{"Records":[`...), raw...), "]}"...)
		var (
			o   dynamodbstreams.GetRecordsOutput
			err error
		)
		if p.sdkOnly || !decodeGetRecords(one, &o) {
			o = dynamodbstreams.GetRecordsOutput{}
			resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 200,
				Body: io.NopCloser(bytes.NewReader(one)), ContentLength: int64(len(one))}}
			err = p.sdkDecode(ctx, schema, reg, resp, &o)
		}
		switch {
		case err != nil:
			bad = append(bad, Undecodable{Index: len(out.Records), Raw: raw, Err: err})
			out.Records = append(out.Records, placeholder(raw))
		case len(o.Records) > 1:
			return dynamodbstreams.GetRecordsOutput{}, nil, false // cannot happen: one element in, at most one out
		default:
			out.Records = append(out.Records, o.Records...)
		}
	}
	return out, bad, true
}

// splitGetRecords walks a GetRecords body without decoding it: a top-level
// object whose NextShardIterator is a string or null, whose Records is an
// array, and whose other members are skipped. It returns the iterator and
// each element of Records as the bytes the body holds (nil without a
// Records member). The walk checks
// only the structure (brackets, strings, commas and colons), so a record
// holding anything a decoder would refuse still has its bounds found.
// Repeated members: the last one counts, as for the SDK. An empty body is
// an empty response.
func splitGetRecords(body []byte) (next *string, recs [][]byte, ok bool) {
	w := &jsonWalk{b: body}
	if w.end() {
		return nil, nil, true // an empty body is an empty response, as for the SDK
	}
	ok = w.members(func(key string, start, end int) bool {
		val := body[start:end]
		switch key {
		case "NextShardIterator":
			if string(val) == "null" {
				next = nil
				return true
			}
			s, ok := decodeString(val)
			next = &s
			return ok
		case "Records":
			recs = [][]byte{}
			return (&jsonWalk{b: val}).elements(func(start, end int) {
				recs = append(recs, val[start:end])
			})
		}
		return true
	})
	return next, recs, ok // what follows the object is ignored, as the SDK ignores it
}

// placeholder is the record of an undecodable one's raw bytes: what can
// still be read of it (see Undecodable.Index). A field that will not read
// is left out.
func placeholder(raw []byte) types.Record {
	var r types.Record
	(&jsonWalk{b: raw}).members(func(key string, start, end int) bool {
		val := raw[start:end]
		switch key {
		case "eventID":
			if s, ok := decodeString(val); ok {
				r.EventID = &s
			}
		case "eventName":
			if s, ok := decodeString(val); ok && (s == "INSERT" || s == "MODIFY" || s == "REMOVE") {
				r.EventName = types.OperationType(s)
			}
		case "dynamodb":
			r.Dynamodb = placeholderStream(val)
		}
		return true
	})
	return r
}

func placeholderStream(raw []byte) *types.StreamRecord {
	sr := &types.StreamRecord{}
	(&jsonWalk{b: raw}).members(func(key string, start, end int) bool {
		d := &recordDecoder{b: raw[start:end], s: string(raw[start:end])}
		switch key {
		case "SequenceNumber":
			if s, ok := d.str(); ok && d.i == len(d.b) && event.ValidSequence(s) {
				sr.SequenceNumber = &s
			}
		case "ApproximateCreationDateTime":
			if t, ok := d.epochSeconds(); ok && d.i == len(d.b) {
				sr.ApproximateCreationDateTime = &t
			}
		case "SizeBytes":
			if n, ok := d.int64(); ok && d.i == len(d.b) && n >= 0 {
				sr.SizeBytes = &n
			}
		case "Keys":
			if m, ok := d.item(); ok && d.i == len(d.b) {
				sr.Keys = m // the fast decoder's reading is the SDK's
			}
		}
		return true
	})
	return sr
}

// decodeString decodes val, a whole JSON string token.
func decodeString(val []byte) (string, bool) {
	d := &recordDecoder{b: val, s: string(val)}
	s, ok := d.str()
	return s, ok && d.i == len(val)
}

// jsonWalk finds the bounds of JSON values without decoding them.
type jsonWalk struct {
	b []byte
	i int
}

// members walks an object, calling fn with each key (decoded) and the
// bounds of its value; it stops when fn returns false.
func (w *jsonWalk) members(fn func(key string, start, end int) bool) bool {
	return w.seq('{', '}', func() bool {
		start := w.i
		if !w.skip() || w.b[start] != '"' {
			return false
		}
		key, ok := decodeString(w.b[start:w.i])
		if !ok {
			return false
		}
		w.ws()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return false
		}
		w.i++
		w.ws()
		vstart := w.i
		return w.skip() && fn(key, vstart, w.i)
	})
}

// elements walks an array, calling fn with the bounds of each element.
func (w *jsonWalk) elements(fn func(start, end int)) bool {
	ok := w.seq('[', ']', func() bool {
		start := w.i
		if !w.skip() {
			return false
		}
		fn(start, w.i)
		return true
	})
	return ok && w.end()
}

// seq reads open, elements separated by commas, and close.
func (w *jsonWalk) seq(open, close byte, elem func() bool) bool {
	w.ws()
	if w.i >= len(w.b) || w.b[w.i] != open {
		return false
	}
	w.i++
	w.ws()
	if w.i < len(w.b) && w.b[w.i] == close {
		w.i++
		return true
	}
	for {
		w.ws()
		if !elem() {
			return false
		}
		w.ws()
		if w.i >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
		case ',':
			w.i++
		case close:
			w.i++
			return true
		default:
			return false
		}
	}
}

// end reports whether only whitespace is left.
func (w *jsonWalk) end() bool {
	w.ws()
	return w.i == len(w.b)
}

func (w *jsonWalk) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// skip moves past one value: a string, an object or array with matching
// brackets (nesting is counted, not recursed into, so no depth can
// exhaust the stack), or a scalar (any bytes up to a delimiter).
func (w *jsonWalk) skip() bool {
	var stack []byte
	for {
		if w.i >= len(w.b) {
			return false
		}
		switch c := w.b[w.i]; c {
		case '"':
			if !w.skipString() {
				return false
			}
		case '{', '[':
			stack = append(stack, c+2) // '{'+2 is '}', '['+2 is ']'
			w.i++
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return false
			}
			stack = stack[:len(stack)-1]
			w.i++
		case ',', ':', ' ', '\t', '\n', '\r':
			if len(stack) == 0 {
				return false
			}
			w.i++
		default:
			start := w.i
			for w.i < len(w.b) && !isDelimiter(w.b[w.i]) {
				w.i++
			}
			if w.i == start {
				return false
			}
		}
		if len(stack) == 0 {
			return true
		}
	}
}

// skipString moves past a string token, escapes included.
func (w *jsonWalk) skipString() bool {
	for j := w.i + 1; j < len(w.b); j++ {
		switch w.b[j] {
		case '\\':
			j++
		case '"':
			w.i = j + 1
			return true
		}
	}
	return false
}

func isDelimiter(c byte) bool {
	switch c {
	case '"', '{', '}', '[', ']', ',', ':', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
