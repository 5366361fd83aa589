package shard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	smithytime "github.com/aws/smithy-go/time"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ttl-archiver/archiver/internal/ddbjson"
)

// FastGetRecords is a dynamodbstreams option (for the client or one call)
// that decodes successful GetRecords responses with a decoder written for
// that one shape instead of the SDK's general one. Decoding is most of a
// reader's CPU; this decoder takes about half of it.
//
// The result is the same value the SDK builds, field for field (a
// differential fuzz test holds it to that). Whatever the decoder does not
// recognise (an unknown member, null, an unusual number, a malformed
// document) goes to the SDK's decoder unchanged, as does every other
// operation and every error response, so errors keep the SDK's types and
// messages. Readers use it unless [Options.SDKDecoding] is set. Set on a
// client, it also turns a panic of the SDK's decoder on a malformed
// response of any operation into an error.
func FastGetRecords(o *dynamodbstreams.Options) {
	if _, done := o.Protocol.(fastProtocol); done || o.Protocol == nil {
		return
	}
	o.Protocol = fastProtocol{ClientProtocol: o.Protocol}
}

// sdkGetRecords is FastGetRecords without the fast decoder (readers with
// [Options.SDKDecoding]): the SDK decodes every response, and a response
// that will not parse is still read record by record for a reader.
func sdkGetRecords(o *dynamodbstreams.Options) {
	if _, done := o.Protocol.(fastProtocol); done || o.Protocol == nil {
		return
	}
	o.Protocol = fastProtocol{ClientProtocol: o.Protocol, sdkOnly: true}
}

// maxPresize bounds the buffer sized from Content-Length up front (a
// GetRecords response is at most about 1 MB of records plus JSON).
const maxPresize = 16 << 20

// fastProtocol wraps the client's protocol and takes over the decoding of
// successful GetRecords responses. When a response will not parse as a
// whole and the call's context asks for it (a reader's calls do), it is
// read record by record (salvageGetRecords): the records that still will
// not parse are reported in the context's salvage, not as an error.
type fastProtocol struct {
	smithyhttp.ClientProtocol
	sdkOnly bool // never the fast decoder: Options.SDKDecoding
}

func (p fastProtocol) DeserializeResponse(ctx context.Context, schema *smithy.OperationSchema, reg *smithy.TypeRegistry, resp *smithyhttp.Response, out smithy.Deserializable) error {
	o, ok := out.(*dynamodbstreams.GetRecordsOutput)
	if !ok || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return p.sdkDecode(ctx, schema, reg, resp, out)
	}
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= maxPresize {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return &smithy.DeserializationError{Err: err}
	}
	body := buf.Bytes()
	sv := salvageFrom(ctx)
	if sv != nil {
		sv.bad = nil // a retried call starts afresh
	}
	if !p.sdkOnly && decodeGetRecords(body, o) {
		return nil
	}
	*o = dynamodbstreams.GetRecordsOutput{}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	err := p.sdkDecode(ctx, schema, reg, resp, out)
	if err == nil || sv == nil {
		return err
	}
	salvaged, bad, ok := p.salvageGetRecords(ctx, schema, reg, body)
	if !ok || len(bad) == 0 {
		// The body cannot be split, or every record decodes alone while
		// the whole does not: the response itself is wrong.
		return err
	}
	*o, sv.bad = salvaged, bad
	return nil
}

// sdkDecode is the SDK's decoding of every response the fast decoder does
// not take. The SDK's decoder panics on some malformed bodies (smithy-go
// v1.28.8: a timestamp of "NaN" reaches big.NewFloat(NaN)); that becomes a
// DeserializationError, so a bad response fails one call instead of the
// process.
func (p fastProtocol) sdkDecode(ctx context.Context, schema *smithy.OperationSchema, reg *smithy.TypeRegistry, resp *smithyhttp.Response, out smithy.Deserializable) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &smithy.DeserializationError{Err: fmt.Errorf("malformed GetRecords response (the SDK's decoder panicked: %v)", r)}
		}
	}()
	return p.ClientProtocol.DeserializeResponse(ctx, schema, reg, resp, out)
}

// recordDecoder reads one GetRecords response body: the response's shape
// here, its attribute values and tokens by ddbjson's wire reader (whose
// strings are slices of the body, so the strings of a whole response share
// the response's one allocation, as the SDK's arena does). Every method
// reports false for anything it does not recognise; the caller then leaves
// the body to the SDK.
type recordDecoder struct {
	ddbjson.Wire

	// Slabs for the small values a record points to: a response's
	// thousands of them cost a few allocations instead of one each.
	strs  ddbjson.Slab[string]
	times ddbjson.Slab[time.Time]
	ints  ddbjson.Slab[int64]
	srs   ddbjson.Slab[types.StreamRecord]
	ids   ddbjson.Slab[types.Identity]
}

// decodeGetRecords fills out from body and reports whether it could. The
// strings of out point into body (no copy of the response is made), so
// body must never be written again; DeserializeResponse reads every
// response into a buffer of its own.
func decodeGetRecords(body []byte, out *dynamodbstreams.GetRecordsOutput) bool {
	if len(body) == 0 {
		return false // the SDK's rule for an empty body applies
	}
	d := &recordDecoder{Wire: ddbjson.NewWire(body)}
	ok := d.Object(func(key string) bool {
		switch key {
		case "NextShardIterator":
			var ok bool
			out.NextShardIterator, ok = d.strPtr()
			return ok
		case "Records":
			out.Records = make([]types.Record, 0)
			return d.Array(func() bool {
				var r types.Record
				if !d.record(&r) {
					return false
				}
				out.Records = append(out.Records, r)
				return true
			})
		}
		return false
	})
	return ok && d.AtEnd()
}

func (d *recordDecoder) record(r *types.Record) bool {
	return d.Object(func(key string) bool {
		var ok bool
		switch key {
		case "awsRegion":
			r.AwsRegion, ok = d.strPtr()
		case "eventID":
			r.EventID, ok = d.strPtr()
		case "eventSource":
			r.EventSource, ok = d.strPtr()
		case "eventVersion":
			r.EventVersion, ok = d.strPtr()
		case "eventName":
			var s string
			s, ok = d.Str()
			r.EventName = types.OperationType(s)
		case "userIdentity":
			id := d.ids.New()
			r.UserIdentity = id
			ok = d.Object(func(key string) bool {
				var ok bool
				switch key {
				case "PrincipalId":
					id.PrincipalId, ok = d.strPtr()
				case "Type":
					id.Type, ok = d.strPtr()
				}
				return ok
			})
		case "dynamodb":
			sr := d.srs.New()
			r.Dynamodb = sr
			ok = d.streamRecord(sr)
		}
		return ok
	})
}

func (d *recordDecoder) streamRecord(sr *types.StreamRecord) bool {
	return d.Object(func(key string) bool {
		var ok bool
		switch key {
		case "ApproximateCreationDateTime":
			t := d.times.New()
			*t, ok = d.epochSeconds()
			sr.ApproximateCreationDateTime = t
		case "Keys":
			sr.Keys, ok = d.Item()
		case "NewImage":
			sr.NewImage, ok = d.Item()
		case "OldImage":
			sr.OldImage, ok = d.Item()
		case "SequenceNumber":
			sr.SequenceNumber, ok = d.strPtr()
		case "SizeBytes":
			n := d.ints.New()
			*n, ok = d.int64()
			sr.SizeBytes = n
		case "StreamViewType":
			var s string
			s, ok = d.Str()
			sr.StreamViewType = types.StreamViewType(s)
		}
		return ok
	})
}

func (d *recordDecoder) strPtr() (*string, bool) {
	p := d.strs.New()
	var ok bool
	*p, ok = d.Str()
	return p, ok
}

// int64 reads an integer as the SDK's ReadInt64 does (integers only).
func (d *recordDecoder) int64() (int64, bool) {
	tok, integer, ok := d.Number()
	if !ok || !integer {
		return 0, false
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	return n, err == nil
}

// epochSeconds reads a timestamp in epoch seconds as the SDK's ReadTime
// does: the number as a float64, then smithy's millisecond conversion.
func (d *recordDecoder) epochSeconds() (time.Time, bool) {
	tok, integer, ok := d.Number()
	if !ok {
		return time.Time{}, false
	}
	var f float64
	if integer {
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		f = float64(n)
	} else {
		var err error
		if f, err = strconv.ParseFloat(tok, 64); err != nil || math.IsInf(f, 0) {
			return time.Time{}, false
		}
	}
	return smithytime.ParseEpochSeconds(f), true
}
