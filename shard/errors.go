package shard

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/internal/awserr"
)

// errKind is what the walker does about an error.
type errKind int

const (
	errOther    errKind = iota // transient or unknown: back off, fresh iterator
	errCanceled                // our context ended
	errThrottle                // LimitExceeded, throttling codes: back off, same iterator
	errExpired                 // ExpiredIterator: fresh iterator after the last record
	errTrimmed                 // TrimmedDataAccess: count the gap, TRIM_HORIZON
	errNotFound                // ResourceNotFound: the shard or stream is gone
	errRejected                // 4xx validation-like: the request is wrong
)

func (k errKind) String() string {
	switch k {
	case errCanceled:
		return "canceled"
	case errThrottle:
		return "throttled"
	case errExpired:
		return "expired_iterator"
	case errTrimmed:
		return "trimmed"
	case errNotFound:
		return "not_found"
	case errRejected:
		return "rejected"
	}
	return "other"
}

// classify maps an error from the Streams or DynamoDB API to what the walker
// does about it. It matches the Streams exceptions that need their own
// handling with errors.As (the SDK's retryer wraps them, errors.As unwraps)
// or by their generic code, and leaves throttling and rejection to
// [awserr.Classify]; everything else is retried.
func classify(ctx context.Context, err error) errKind {
	if err == nil {
		return errOther
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ctx.Err())) {
		return errCanceled
	}
	var (
		expired  *types.ExpiredIteratorException
		trimmed  *types.TrimmedDataAccessException
		notFound *types.ResourceNotFoundException
	)
	switch code := awserr.Code(err); {
	case errors.As(err, &expired) || code == "ExpiredIteratorException":
		return errExpired
	case errors.As(err, &trimmed) || code == "TrimmedDataAccessException":
		return errTrimmed
	case errors.As(err, &notFound) || code == "ResourceNotFoundException":
		return errNotFound
	}
	switch awserr.Classify(err) {
	case awserr.Throttled:
		return errThrottle
	case awserr.Rejected:
		return errRejected
	}
	return errOther
}
