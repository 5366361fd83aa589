package consumer

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// The userIdentity DynamoDB's TTL process puts on the REMOVE records it
// makes.
const (
	ttlIdentityType      = "Service"
	ttlIdentityPrincipal = "dynamodb.amazonaws.com"
)

// RecordError says which field of a stream record is missing or malformed.
type RecordError struct {
	ShardID string
	// Index is the record's position in its batch.
	Index int
	// Field is the record field at fault, e.g. "dynamodb.SequenceNumber".
	Field   string
	Problem string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("consumer: shard %s record %d: field %s: %s", e.ShardID, e.Index, e.Field, e.Problem)
}

// Classify returns the kind of a stream record: Expired for a REMOVE made by
// DynamoDB's TTL process (userIdentity Type "Service", PrincipalId
// "dynamodb.amazonaws.com"), Deleted for any other REMOVE, Inserted for
// INSERT and Modified for MODIFY. It fails on any other event name.
func Classify(r types.Record) (event.Kind, error) {
	switch r.EventName {
	case types.OperationTypeInsert:
		return event.Inserted, nil
	case types.OperationTypeModify:
		return event.Modified, nil
	case types.OperationTypeRemove:
		if id := r.UserIdentity; id != nil && deref(id.Type) == ttlIdentityType && deref(id.PrincipalId) == ttlIdentityPrincipal {
			return event.Expired, nil
		}
		return event.Deleted, nil
	case "":
		return "", errors.New("missing")
	}
	return "", fmt.Errorf("unknown event name %q (want INSERT, MODIFY or REMOVE)", string(r.EventName))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Decode turns one stream record into an event of the given table, stream
// and shard, classified by [Classify]. ttlAttribute is the table's TTL
// attribute name ("" when unknown); for an expired record whose old image
// holds it as a Number, the event's TTLValue, TTLTime and TTLLag are set.
// Images are kept as they are (no copy: the event shares them with r).
func Decode(table, streamARN, shardID string, r types.Record, ttlAttribute string) (event.Event, error) {
	return decode(table, streamARN, shardID, 0, r, ttlAttribute)
}

func decode(table, streamARN, shardID string, index int, r types.Record, ttlAttribute string) (event.Event, error) {
	fail := func(field, problem string) (event.Event, error) {
		return event.Event{}, &RecordError{ShardID: shardID, Index: index, Field: field, Problem: problem}
	}
	kind, err := Classify(r)
	if err != nil {
		return fail("eventName", err.Error())
	}
	d := r.Dynamodb
	if d == nil {
		return fail("dynamodb", "missing")
	}
	seq := deref(d.SequenceNumber)
	if seq == "" {
		return fail("dynamodb.SequenceNumber", "missing")
	}
	if !event.ValidSequence(seq) {
		return fail("dynamodb.SequenceNumber", fmt.Sprintf("%q is not a decimal number", seq))
	}
	e := event.Event{
		Kind:           kind,
		Table:          table,
		StreamARN:      streamARN,
		ShardID:        shardID,
		SequenceNumber: seq,
		EventID:        deref(r.EventID),
		EventName:      string(r.EventName),
		Keys:           d.Keys,
		OldImage:       d.OldImage,
		NewImage:       d.NewImage,
	}
	if d.ApproximateCreationDateTime != nil {
		e.ApproximateCreationTime = *d.ApproximateCreationDateTime
	}
	if d.SizeBytes != nil {
		e.SizeBytes = *d.SizeBytes
	}
	if kind == event.Expired {
		e.TTLAttribute = ttlAttribute
		if ttlAttribute != "" {
			if n, ok := d.OldImage[ttlAttribute].(*types.AttributeValueMemberN); ok {
				e.TTLValue = n.Value
				if t, ok := ParseEpochSeconds(n.Value); ok {
					e.TTLTime = t
					if !e.ApproximateCreationTime.IsZero() {
						e.TTLLag = e.ApproximateCreationTime.Sub(t)
					}
				}
			}
		}
	}
	return e, nil
}

// maxEpochSeconds is 9999-12-31T23:59:59Z: a TTL value beyond it is not a
// time this program represents.
const maxEpochSeconds = 253402300799

// ParseEpochSeconds reads a DynamoDB Number as epoch seconds: decimal, with
// an optional sign, fraction and exponent ("1700000000", "1.7e9",
// "1700000000.25"). It reports false for anything else, for negative values
// and for values past the year 9999. Fractions are kept to the nanosecond.
func ParseEpochSeconds(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return time.Time{}, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > maxEpochSeconds {
			return time.Time{}, false
		}
		return time.Unix(n, 0).UTC(), true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return time.Time{}, false // no "Inf", "NaN", hex, underscores
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxEpochSeconds+1 {
		return time.Time{}, false
	}
	// Exact: the value is in range, so the rational is small.
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return time.Time{}, false
	}
	ns := new(big.Rat).Mul(r, big.NewRat(int64(time.Second), 1))
	q := new(big.Int).Quo(ns.Num(), ns.Denom()) // truncates toward zero
	if !q.IsInt64() {
		return time.Time{}, false
	}
	total := q.Int64()
	sec, nsec := total/int64(time.Second), total%int64(time.Second)
	if sec > maxEpochSeconds {
		return time.Time{}, false
	}
	return time.Unix(sec, nsec).UTC(), true
}
