package shard

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	smithytime "github.com/aws/smithy-go/time"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ttl-archiver/archiver/event"
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

// recordDecoder reads one GetRecords response body. Every method reports
// false for anything it does not recognise; the caller then leaves the body
// to the SDK.
type recordDecoder struct {
	b []byte
	// s is b as one string (the same bytes, not a copy): unescaped
	// strings are slices of it, so the strings of a whole response share
	// the response's one allocation (as the SDK's arena does).
	s string
	i int

	// Slabs for the small values a record points to: a response's
	// thousands of them cost a few allocations instead of one each.
	strs  slab[string]
	times slab[time.Time]
	ints  slab[int64]
	srs   slab[types.StreamRecord]
	ids   slab[types.Identity]
	avS   slab[types.AttributeValueMemberS]
	avN   slab[types.AttributeValueMemberN]
}

// slab hands out pointers into chunks of T.
type slab[T any] struct{ chunk []T }

func (s *slab[T]) new() *T {
	if len(s.chunk) == 0 {
		s.chunk = make([]T, 64)
	}
	p := &s.chunk[0]
	s.chunk = s.chunk[1:]
	return p
}

// decodeGetRecords fills out from body and reports whether it could. The
// strings of out point into body (no copy of the response is made), so
// body must never be written again; DeserializeResponse reads every
// response into a buffer of its own.
func decodeGetRecords(body []byte, out *dynamodbstreams.GetRecordsOutput) bool {
	if len(body) == 0 {
		return false // the SDK's rule for an empty body applies
	}
	d := &recordDecoder{b: body, s: unsafe.String(unsafe.SliceData(body), len(body))}
	ok := d.object(func(key string) bool {
		switch key {
		case "NextShardIterator":
			var ok bool
			out.NextShardIterator, ok = d.strPtr()
			return ok
		case "Records":
			out.Records = make([]types.Record, 0)
			return d.array(func() bool {
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
	d.ws()
	return ok && d.i == len(d.b)
}

func (d *recordDecoder) record(r *types.Record) bool {
	return d.object(func(key string) bool {
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
			s, ok = d.str()
			r.EventName = types.OperationType(s)
		case "userIdentity":
			id := d.ids.new()
			r.UserIdentity = id
			ok = d.object(func(key string) bool {
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
			sr := d.srs.new()
			r.Dynamodb = sr
			ok = d.streamRecord(sr)
		}
		return ok
	})
}

func (d *recordDecoder) streamRecord(sr *types.StreamRecord) bool {
	return d.object(func(key string) bool {
		var ok bool
		switch key {
		case "ApproximateCreationDateTime":
			t := d.times.new()
			*t, ok = d.epochSeconds()
			sr.ApproximateCreationDateTime = t
		case "Keys":
			sr.Keys, ok = d.item()
		case "NewImage":
			sr.NewImage, ok = d.item()
		case "OldImage":
			sr.OldImage, ok = d.item()
		case "SequenceNumber":
			sr.SequenceNumber, ok = d.strPtr()
		case "SizeBytes":
			n := d.ints.new()
			*n, ok = d.int64()
			sr.SizeBytes = n
		case "StreamViewType":
			var s string
			s, ok = d.str()
			sr.StreamViewType = types.StreamViewType(s)
		}
		return ok
	})
}

func (d *recordDecoder) item() (map[string]types.AttributeValue, bool) {
	m := make(map[string]types.AttributeValue)
	ok := d.object(func(key string) bool {
		av, ok := d.value()
		m[key] = av
		return ok
	})
	return m, ok
}

// value reads one attribute value: an object with exactly one member.
func (d *recordDecoder) value() (types.AttributeValue, bool) {
	var av types.AttributeValue
	members := 0
	ok := d.object(func(key string) bool {
		members++
		var ok bool
		switch key {
		case "S":
			v := d.avS.new()
			v.Value, ok = d.str()
			av = v
		case "N":
			v := d.avN.new()
			v.Value, ok = d.str()
			av = v
		case "B":
			var b []byte
			b, ok = d.blob()
			av = &types.AttributeValueMemberB{Value: b}
		case "BOOL":
			var b bool
			b, ok = d.boolean()
			av = &types.AttributeValueMemberBOOL{Value: b}
		case "NULL":
			var b bool
			b, ok = d.boolean()
			av = &types.AttributeValueMemberNULL{Value: b}
		case "SS", "NS":
			ss := make([]string, 0)
			ok = d.array(func() bool {
				s, ok := d.str()
				ss = append(ss, s)
				return ok
			})
			if key == "SS" {
				av = &types.AttributeValueMemberSS{Value: ss}
			} else {
				av = &types.AttributeValueMemberNS{Value: ss}
			}
		case "BS":
			bs := make([][]byte, 0)
			ok = d.array(func() bool {
				b, ok := d.blob()
				bs = append(bs, b)
				return ok
			})
			av = &types.AttributeValueMemberBS{Value: bs}
		case "L":
			l := make([]types.AttributeValue, 0)
			ok = d.array(func() bool {
				v, ok := d.value()
				l = append(l, v)
				return ok
			})
			av = &types.AttributeValueMemberL{Value: l}
		case "M":
			var m map[string]types.AttributeValue
			m, ok = d.item()
			av = &types.AttributeValueMemberM{Value: m}
		}
		return ok
	})
	return av, ok && members == 1
}

// ws skips JSON whitespace.
func (d *recordDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// object reads {"key": value, ...}, calling member for each key with the
// decoder at the value.
func (d *recordDecoder) object(member func(key string) bool) bool {
	return d.seq('{', '}', func() bool {
		key, ok := d.str()
		if !ok {
			return false
		}
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return false
		}
		d.i++
		d.ws()
		return member(key)
	})
}

// array reads [value, ...], calling elem with the decoder at each value.
func (d *recordDecoder) array(elem func() bool) bool {
	return d.seq('[', ']', elem)
}

// seq reads open, elements separated by commas, and close.
func (d *recordDecoder) seq(open, close byte, elem func() bool) bool {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != open {
		return false
	}
	d.i++
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == close {
		d.i++
		return true
	}
	for {
		d.ws()
		if !elem() {
			return false
		}
		d.ws()
		if d.i >= len(d.b) {
			return false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case close:
			d.i++
			return true
		default:
			return false
		}
	}
}

// str reads a JSON string. One without escapes is a slice of the body, as
// the SDK takes it (bytes as they are); one with escapes is unquoted by
// encoding/json, whose rules the SDK's unquoting copies.
func (d *recordDecoder) str() (string, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	start := d.i + 1
	j := start
	// Eight bytes per step while none is '"', '\\' or a control byte.
	for j+8 <= len(d.b) {
		v := binary.LittleEndian.Uint64(d.b[j:])
		if hasLess(v, 0x20)|hasByte(v, '"')|hasByte(v, '\\') != 0 {
			break
		}
		j += 8
	}
	escaped := false
	for ; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			if !escaped {
				return d.s[start:j], true
			}
			var s string
			if err := json.Unmarshal(d.b[start-1:j+1], &s); err != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			escaped = true
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return "", false // invalid JSON: the SDK reports it
		}
	}
	return "", false
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasLess reports (non-zero) whether a byte of v is below n (n <= 128).
func hasLess(v uint64, n byte) uint64 { return (v - ones*uint64(n)) &^ v & highs }

// hasByte reports (non-zero) whether a byte of v is c.
func hasByte(v uint64, c byte) uint64 {
	x := v ^ (ones * uint64(c))
	return (x - ones) &^ x & highs
}

func (d *recordDecoder) strPtr() (*string, bool) {
	p := d.strs.new()
	var ok bool
	*p, ok = d.str()
	return p, ok
}

// blob reads a base64 string, decoded as the SDK does.
func (d *recordDecoder) blob() ([]byte, bool) {
	s, ok := d.str()
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil
}

// boolean reads true or false.
func (d *recordDecoder) boolean() (bool, bool) {
	rest := d.b[d.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		d.i += 4
		return true, d.delimited()
	case bytes.HasPrefix(rest, []byte("false")):
		d.i += 5
		return false, d.delimited()
	}
	return false, false
}

// delimited reports whether the token just read ends where it should.
func (d *recordDecoder) delimited() bool {
	if d.i == len(d.b) {
		return true
	}
	switch d.b[d.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// number reads a JSON number token (grammar checked by
// event.IsJSONNumber) and reports whether it is a plain integer.
func (d *recordDecoder) number() (tok string, integer bool, ok bool) {
	start, j := d.i, d.i
	for j < len(d.b) && isNumberByte(d.b[j]) {
		j++
	}
	tok = d.s[start:j]
	if !event.IsJSONNumber(tok) {
		return "", false, false
	}
	d.i = j
	return tok, !strings.ContainsAny(tok, ".eE"), d.delimited()
}

// isNumberByte reports whether c may appear in a JSON number.
func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// int64 reads an integer as the SDK's ReadInt64 does (integers only).
func (d *recordDecoder) int64() (int64, bool) {
	tok, integer, ok := d.number()
	if !ok || !integer {
		return 0, false
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	return n, err == nil
}

// epochSeconds reads a timestamp in epoch seconds as the SDK's ReadTime
// does: the number as a float64, then smithy's millisecond conversion.
func (d *recordDecoder) epochSeconds() (time.Time, bool) {
	tok, integer, ok := d.number()
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
