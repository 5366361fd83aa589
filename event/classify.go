package event

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// The userIdentity DynamoDB's TTL process puts on the REMOVE records it
// makes.
const (
	ttlIdentityType      = "Service"
	ttlIdentityPrincipal = "dynamodb.amazonaws.com"
)

// RecordError says which field of a stream record is missing or malformed.
// Its message starts "consumer:": the consumer is what refuses such a
// record, and dead letters and logs have always carried that prefix.
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

// ExpiredWhen says which REMOVE records are expiries (the consumer's
// Config.ExpiredWhen, `--expired-when`).
type ExpiredWhen int

const (
	// ExpiredWhenService (the default): only the deletes of DynamoDB's own
	// TTL process, as [Classify] says.
	ExpiredWhenService ExpiredWhen = iota
	// ExpiredWhenPastTTL: also any other REMOVE made after the item's TTL
	// had passed, such as the deletes of a sweeper (`archiver sweep`), as
	// [ClassifyWith] says.
	ExpiredWhenPastTTL
)

// String returns the option's value: "service" or "past-ttl".
func (w ExpiredWhen) String() string {
	switch w {
	case ExpiredWhenService:
		return "service"
	case ExpiredWhenPastTTL:
		return "past-ttl"
	}
	return fmt.Sprintf("ExpiredWhen(%d)", int(w))
}

// ParseExpiredWhen reads "service" or "past-ttl".
func ParseExpiredWhen(s string) (ExpiredWhen, error) {
	for _, w := range []ExpiredWhen{ExpiredWhenService, ExpiredWhenPastTTL} {
		if s == w.String() {
			return w, nil
		}
	}
	return 0, fmt.Errorf("%q is not service or past-ttl", s)
}

// Classify returns the kind of a stream record: Expired for a REMOVE made by
// DynamoDB's TTL process (userIdentity Type "Service", PrincipalId
// "dynamodb.amazonaws.com"), Deleted for any other REMOVE, Inserted for
// INSERT and Modified for MODIFY. It fails on any other event name.
func Classify(r types.Record) (Kind, error) {
	switch r.EventName {
	case types.OperationTypeInsert:
		return Inserted, nil
	case types.OperationTypeModify:
		return Modified, nil
	case types.OperationTypeRemove:
		if IsTTLDelete(&r) {
			return Expired, nil
		}
		return Deleted, nil
	case "":
		return "", errors.New("missing")
	}
	return "", fmt.Errorf("unknown event name %q (want INSERT, MODIFY or REMOVE)", string(r.EventName))
}

// ClassifyWith returns the kind of a stream record under the given rule.
// Under [ExpiredWhenService] it is [Classify]. Under [ExpiredWhenPastTTL] a
// REMOVE that Classify calls Deleted is Expired when the TTL attribute
// (ttlAttribute, "" when unknown) of its old image had passed when the item
// was deleted:
//
//   - the attribute is a Number of epoch seconds ([ParseEpochSeconds]:
//     fractions and exponents allowed), and
//   - it lies before the end of the record's creation second: TTL < C + 1 s,
//     where C is ApproximateCreationDateTime truncated to the second, and
//   - it lies no more than five years before C (DynamoDB's TTL ignores
//     older values, so a 0 meaning "never" does not make a delete an expiry).
//
// DynamoDB Streams gives the creation time rounded down to the second (the
// engine does the same), so the delete happened somewhere in [C, C+1 s).
// Comparing with C itself would miss an item swept in the second its TTL
// fell in, which is the usual case for a sweeper running every second;
// TTL < C + 1 s cannot. For a TTL of whole seconds, as DynamoDB's TTL
// expects, the rule is exact: the delete came after the TTL unless it came
// at the very instant of it. A user's delete of an item not yet expired
// happened before its TTL, so in a second C <= TTL - 1 and it stays
// Deleted. Only a fractional TTL inside the creation second is ambiguous
// (the stream cannot say whether the delete came before or after it
// within that second); it counts as an expiry, and its TTL lag
// (C - TTL) is then below zero.
//
// A REMOVE without an old image (KEYS_ONLY, NEW_IMAGE), without the
// attribute, with a value that is not a Number of epoch seconds, or without
// a creation time stays Deleted.
func ClassifyWith(r types.Record, when ExpiredWhen, ttlAttribute string) (Kind, error) {
	k, err := Classify(r)
	if err != nil || k != Deleted || when != ExpiredWhenPastTTL {
		return k, err
	}
	if TTLPassed(r.Dynamodb, ttlAttribute) {
		return Expired, nil
	}
	return k, nil
}

// fiveYears is how far before its deletion a TTL may lie and still be one
// DynamoDB's TTL honours.
const fiveYears = 5 * 365 * 24 * time.Hour

// TTLPassed applies [ClassifyWith]'s past-TTL rule to a REMOVE's stream
// record: whether the TTL attribute attr of its old image had passed when
// the item was deleted.
func TTLPassed(d *types.StreamRecord, attr string) bool {
	if d == nil || attr == "" || d.ApproximateCreationDateTime == nil || d.ApproximateCreationDateTime.IsZero() {
		return false
	}
	n, ok := d.OldImage[attr].(*types.AttributeValueMemberN)
	if !ok {
		return false
	}
	// ParseEpochSeconds truncates below the nanosecond, which keeps the
	// comparison with a whole second exact.
	ttl, ok := ParseEpochSeconds(n.Value)
	if !ok {
		return false
	}
	second := d.ApproximateCreationDateTime.Truncate(time.Second)
	return ttl.Before(second.Add(time.Second)) && !ttl.Before(second.Add(-fiveYears))
}

// IsTTLDelete reports whether r carries the userIdentity of DynamoDB's TTL
// process.
func IsTTLDelete(r *types.Record) bool {
	id := r.UserIdentity
	return id != nil && deref(id.Type) == ttlIdentityType && deref(id.PrincipalId) == ttlIdentityPrincipal
}

// deletedBy is the event's DeletedBy: who made a REMOVE; "" for other
// records.
func deletedBy(r *types.Record) string {
	switch {
	case r.EventName != types.OperationTypeRemove:
		return ""
	case IsTTLDelete(r):
		return DeletedByTTL
	}
	return DeletedByOther
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
// A REMOVE's DeletedBy says whether DynamoDB's TTL process made it; the
// event's Region is the stream ARN's ([RegionOf]). Images are kept as they are (no copy: the event shares them with r).
func Decode(table, streamARN, shardID string, r types.Record, ttlAttribute string) (Event, error) {
	return DecodeWith(table, streamARN, shardID, 0, r, ttlAttribute, ExpiredWhenService)
}

// DecodeWith is [Decode] of the record at index in its batch (a
// [RecordError] names it), classified by [ClassifyWith] under when.
func DecodeWith(table, streamARN, shardID string, index int, r types.Record, ttlAttribute string, when ExpiredWhen) (Event, error) {
	fail := func(field, problem string) (Event, error) {
		return Event{}, &RecordError{ShardID: shardID, Index: index, Field: field, Problem: problem}
	}
	kind, err := ClassifyWith(r, when, ttlAttribute)
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
	if !ValidSequence(seq) {
		return fail("dynamodb.SequenceNumber", fmt.Sprintf("%q is not a decimal number", seq))
	}
	e := Event{
		Kind:           kind,
		Table:          table,
		StreamARN:      streamARN,
		Region:         RegionOf(streamARN),
		ShardID:        shardID,
		SequenceNumber: seq,
		EventID:        deref(r.EventID),
		EventName:      string(r.EventName),
		DeletedBy:      deletedBy(&r),
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
	if kind == Expired {
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
