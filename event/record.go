package event

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/internal/ddbjson"
)

// AppendStreamRecord appends r as JSON in the shape GetRecords returns it
// (eventID, eventName, dynamodb.Keys, ...), with images in DynamoDB JSON
// and ApproximateCreationDateTime as epoch seconds. It renders whatever r
// holds, however malformed (missing fields are left out), so a record the
// consumer could not decode is kept as the stream gave it: it is what
// [DeadLetter.Record] holds.
func AppendStreamRecord(dst []byte, r *types.Record) []byte {
	dst = append(dst, '{')
	sep := false
	field := func(name string) {
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = ddbjson.AppendString(dst, name)
		dst = append(dst, ':')
	}
	str := func(name string, v *string) {
		if v != nil {
			field(name)
			dst = ddbjson.AppendString(dst, *v)
		}
	}
	str("awsRegion", r.AwsRegion)
	if d := r.Dynamodb; d != nil {
		field("dynamodb")
		dst = appendStreamRecordBody(dst, d)
	}
	str("eventID", r.EventID)
	if r.EventName != "" {
		field("eventName")
		dst = ddbjson.AppendString(dst, string(r.EventName))
	}
	str("eventSource", r.EventSource)
	str("eventVersion", r.EventVersion)
	if id := r.UserIdentity; id != nil {
		field("userIdentity")
		dst = append(dst, '{')
		inner := false
		for _, kv := range [2]struct {
			k string
			v *string
		}{{"principalId", id.PrincipalId}, {"type", id.Type}} {
			if kv.v == nil {
				continue
			}
			if inner {
				dst = append(dst, ',')
			}
			inner = true
			dst = ddbjson.AppendString(dst, kv.k)
			dst = append(dst, ':')
			dst = ddbjson.AppendString(dst, *kv.v)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendStreamRecordBody writes a record's "dynamodb" member.
func appendStreamRecordBody(dst []byte, d *types.StreamRecord) []byte {
	dst = append(dst, '{')
	sep := false
	field := func(name string) {
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = ddbjson.AppendString(dst, name)
		dst = append(dst, ':')
	}
	if t := d.ApproximateCreationDateTime; t != nil {
		field("ApproximateCreationDateTime")
		dst = strconv.AppendInt(dst, t.Unix(), 10)
		if t.Unix() >= 0 {
			dst = appendFraction(dst, uint32(t.Nanosecond()))
		}
	}
	for _, im := range [3]struct {
		k string
		v Item
	}{{"Keys", d.Keys}, {"NewImage", d.NewImage}, {"OldImage", d.OldImage}} {
		if im.v != nil {
			field(im.k)
			dst = AppendItem(dst, im.v)
		}
	}
	if d.SequenceNumber != nil {
		field("SequenceNumber")
		dst = ddbjson.AppendString(dst, *d.SequenceNumber)
	}
	if d.SizeBytes != nil {
		field("SizeBytes")
		dst = strconv.AppendInt(dst, *d.SizeBytes, 10)
	}
	if d.StreamViewType != "" {
		field("StreamViewType")
		dst = ddbjson.AppendString(dst, string(d.StreamViewType))
	}
	return append(dst, '}')
}
