package shard

import (
	"context"
	"errors"
	"net"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
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

// throttleCodes are the error codes (besides LimitExceededException) that
// mean "slow down".
var throttleCodes = map[string]bool{
	"LimitExceededException":                 true,
	"ThrottlingException":                    true,
	"Throttling":                             true,
	"ThrottledException":                     true,
	"RequestThrottledException":              true,
	"TooManyRequestsException":               true,
	"ProvisionedThroughputExceededException": true,
	"RequestLimitExceeded":                   true,
	"RequestThrottled":                       true,
	"SlowDown":                               true,
}

// rejectCodes are client errors that retrying the same request will not fix.
var rejectCodes = map[string]bool{
	"ValidationException":           true,
	"InvalidParameterException":     true,
	"InvalidParameterValue":         true,
	"SerializationException":        true,
	"UnknownOperationException":     true,
	"InvalidAction":                 true,
	"UnrecognizedClientException":   true,
	"AccessDeniedException":         true,
	"MissingAuthenticationToken":    true,
	"InvalidSignatureException":     true,
	"IncompleteSignatureException":  true,
	"NotImplemented":                true,
	"InvalidParameterCombination":   true,
	"InvalidQueryParameter":         true,
	"MalformedQueryString":          true,
	"OptInRequired":                 true,
	"UnsupportedOperationException": true,
}

// classify maps an error from the Streams or DynamoDB API to what the walker
// does about it. It matches the SDK's exception types with errors.As (the
// SDK's retryer wraps them, errors.As unwraps) and generic codes through
// smithy.APIError.
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
		limit    *types.LimitExceededException
		notFound *types.ResourceNotFoundException
	)
	switch {
	case errors.As(err, &expired):
		return errExpired
	case errors.As(err, &trimmed):
		return errTrimmed
	case errors.As(err, &limit):
		return errThrottle
	case errors.As(err, &notFound):
		return errNotFound
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code := api.ErrorCode()
		switch {
		case code == "ExpiredIteratorException":
			return errExpired
		case code == "TrimmedDataAccessException":
			return errTrimmed
		case code == "ResourceNotFoundException":
			return errNotFound
		case throttleCodes[code]:
			return errThrottle
		case rejectCodes[code]:
			return errRejected
		}
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		switch s := resp.HTTPStatusCode(); {
		case s == 429:
			return errThrottle
		case s >= 500:
			return errOther
		case s == 400 && api == nil:
			return errRejected
		}
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return errOther
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return errCanceled
	}
	return errOther
}
