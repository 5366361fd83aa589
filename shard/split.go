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
	"github.com/ttl-archiver/archiver/internal/ddbjson"
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
	w := ddbjson.NewScanner(body)
	if w.AtEnd() {
		return nil, nil, true // an empty body is an empty response, as for the SDK
	}
	ok = w.Members(func(key string, start, end int) bool {
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
			vals := ddbjson.NewScanner(val)
			return vals.Elements(func(start, end int) {
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
	w := ddbjson.NewScanner(raw)
	w.Members(func(key string, start, end int) bool {
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
	w := ddbjson.NewScanner(raw)
	w.Members(func(key string, start, end int) bool {
		d := &recordDecoder{Wire: ddbjson.NewWire(bytes.Clone(raw[start:end]))}
		switch key {
		case "SequenceNumber":
			if s, ok := d.Str(); ok && d.AtEnd() && event.ValidSequence(s) {
				sr.SequenceNumber = &s
			}
		case "ApproximateCreationDateTime":
			if t, ok := d.epochSeconds(); ok && d.AtEnd() {
				sr.ApproximateCreationDateTime = &t
			}
		case "SizeBytes":
			if n, ok := d.int64(); ok && d.AtEnd() && n >= 0 {
				sr.SizeBytes = &n
			}
		case "Keys":
			if m, ok := d.Item(); ok && d.AtEnd() {
				sr.Keys = m // the fast decoder's reading is the SDK's
			}
		}
		return true
	})
	return sr
}

// decodeString decodes val, a whole JSON string token.
func decodeString(val []byte) (string, bool) {
	d := ddbjson.NewScanner(bytes.Clone(val))
	s, ok := d.Str()
	return s, ok && d.Pos() == len(val)
}
