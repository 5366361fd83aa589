package event

import (
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// CompareSequence compares two decimal stream sequence numbers numerically
// and returns -1, 0 or +1. Sequence numbers are unsigned decimal strings of
// up to 40 digits; comparing them as strings is wrong as soon as their
// lengths differ. Leading zeros are ignored.
func CompareSequence(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// ValidSequence reports whether s is a stream sequence number: 1 to 64
// decimal digits. (DynamoDB Streams' are up to 40 digits.)
func ValidSequence(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// RecordSequence is the record's sequence number, or "" when it has no
// valid one ([ValidSequence]).
func RecordSequence(r *types.Record) string {
	if d := r.Dynamodb; d != nil && d.SequenceNumber != nil && ValidSequence(*d.SequenceNumber) {
		return *d.SequenceNumber
	}
	return ""
}

// FirstSequence is the sequence number of the first record in recs that
// has a valid one ("" when none has).
func FirstSequence(recs []types.Record) string {
	for i := range recs {
		if s := RecordSequence(&recs[i]); s != "" {
			return s
		}
	}
	return ""
}

// LastSequence is the sequence number of the last record in recs that has
// a valid one ("" when none has), and the number of records after that
// one. A malformed record's position is not a place to resume from; the
// last well-formed one before it is.
func LastSequence(recs []types.Record) (seq string, after int) {
	for i := len(recs) - 1; i >= 0; i-- {
		if s := RecordSequence(&recs[i]); s != "" {
			return s, len(recs) - 1 - i
		}
	}
	return "", len(recs)
}

// FirstCreation is the creation time of the first record in recs that has
// one (zero when none has).
func FirstCreation(recs []types.Record) time.Time {
	for i := range recs {
		if d := recs[i].Dynamodb; d != nil && d.ApproximateCreationDateTime != nil {
			return *d.ApproximateCreationDateTime
		}
	}
	return time.Time{}
}
