// Package awserr is the archiver's one classifier of errors from AWS calls
// (DynamoDB, DynamoDB Streams, S3): it says whether the service asked the
// caller to slow down, failed on its side, refused the request, or never
// answered. Every caller maps these classes to what it does about them
// (the walker, the sweeper, the lease store, restore, the S3 sink), so the
// lists of error codes live here alone.
//
// It matches codes through smithy.APIError (the SDK's typed exceptions
// implement it, and errors.As unwraps the SDK's retryer and operation
// errors) and statuses through the HTTP response error in the chain.
package awserr

import (
	"context"
	"errors"

	"github.com/aws/smithy-go"
)

// Class is what an error says about sending the same request again.
type Class int

const (
	// None is the class of a nil error.
	None Class = iota
	// Throttled: the service asked the caller to slow down (a throttling
	// code, HTTP 429). The same request may succeed later.
	Throttled
	// Transient: the service failed on its side (5xx, a server fault, a
	// conflict of concurrent requests) or never answered (a network
	// error, a connection reset, a timeout of the client's own). Another
	// attempt may succeed.
	Transient
	// Rejected: the request itself is wrong and fails again whoever sends
	// it (validation, signature, access denied, an unknown operation: see
	// rejectCodes), or a 400 answer that carries no error code.
	Rejected
	// Refused: any other 4xx answer, or an error the service marked as the
	// client's fault without an HTTP answer (a failed condition, an expired
	// token): retrying the same request is not expected to help, though
	// the code is not one known to be final.
	Refused
	// Canceled: the caller's context ended (context.Canceled or
	// DeadlineExceeded in the chain) before the service answered.
	Canceled
)

func (c Class) String() string {
	switch c {
	case None:
		return "none"
	case Throttled:
		return "throttled"
	case Transient:
		return "transient"
	case Rejected:
		return "rejected"
	case Refused:
		return "refused"
	case Canceled:
		return "canceled"
	}
	return "unknown"
}

// throttleCodes are the error codes that mean "slow down", from DynamoDB,
// DynamoDB Streams, S3, KMS (through S3) and AWS's query protocols.
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
	"KMS.ThrottlingException":                true,
}

// transientCodes are faults of the service, or conflicts between
// concurrent requests, that a later attempt may not meet, whatever the
// status they come with.
var transientCodes = map[string]bool{
	"InternalServerError":              true,
	"InternalError":                    true,
	"ServiceUnavailable":               true,
	"TransactionConflictException":     true,
	"ReplicatedWriteConflictException": true,
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

// Classify says what err, returned by an AWS call, means for a retry. The
// error code decides first (throttling, transient, rejected), then a
// server fault, then the HTTP status (429 throttled, 5xx transient, a
// bare 400 rejected, other 4xx refused); an error with neither code nor
// status is Canceled when a context error is in its chain and Transient
// otherwise (the service never answered). Callers that must tell their own
// context's end from a timeout of the call check their context first.
func Classify(err error) Class {
	if err == nil {
		return None
	}
	var api smithy.APIError
	hasAPI := errors.As(err, &api)
	if hasAPI {
		switch code := api.ErrorCode(); {
		case throttleCodes[code]:
			return Throttled
		case transientCodes[code]:
			return Transient
		case rejectCodes[code]:
			return Rejected
		}
		if api.ErrorFault() == smithy.FaultServer {
			return Transient
		}
	}
	switch s := StatusCode(err); {
	case s == 429:
		return Throttled
	case s >= 500:
		return Transient
	case s == 400 && !hasAPI:
		return Rejected
	case s >= 400:
		return Refused
	}
	if hasAPI {
		if api.ErrorFault() == smithy.FaultClient {
			return Refused
		}
		return Transient
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled
	}
	return Transient
}

// IsThrottle reports whether the service asked the caller to slow down.
func IsThrottle(err error) bool { return Classify(err) == Throttled }

// IsRetryable reports whether another attempt of the same request may
// succeed: throttling, a fault of the service, or no answer at all (but
// not a context that ended).
func IsRetryable(err error) bool {
	c := Classify(err)
	return c == Throttled || c == Transient
}

// IsConditionFailed reports a DynamoDB ConditionalCheckFailedException
// (typed or generic): the write's condition did not hold, which is an
// answer, not a failure.
func IsConditionFailed(err error) bool { return Code(err) == "ConditionalCheckFailedException" }

// credentialCodes are the answers that refuse the caller's credentials
// themselves, from DynamoDB, DynamoDB Streams, S3 and STS: an unknown
// access key, a signature made with another secret, a missing, invalid or
// expired session token. A permission refused to valid credentials
// (AccessDenied) is not one. XAdminUserNotFound is versitygw's answer to
// an unknown access key (S3's is InvalidAccessKeyId).
var credentialCodes = map[string]bool{
	"InvalidAccessKeyId":                  true,
	"SignatureDoesNotMatch":               true,
	"ExpiredToken":                        true,
	"ExpiredTokenException":               true,
	"InvalidToken":                        true,
	"TokenRefreshRequired":                true,
	"InvalidClientTokenId":                true,
	"UnrecognizedClientException":         true,
	"InvalidSignatureException":           true,
	"IncompleteSignatureException":        true,
	"MissingAuthenticationToken":          true,
	"MissingAuthenticationTokenException": true,
	"XAdminUserNotFound":                  true,
}

// IsCredentials reports whether the service refused the caller's
// credentials (see credentialCodes): fixing the credentials is the only
// cure, and its Code names what was wrong.
func IsCredentials(err error) bool { return credentialCodes[Code(err)] }

// Code is the AWS error code in err's chain ("" when there is none).
func Code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// StatusCode is the HTTP status of the answer in err's chain (0 when the
// service never answered).
func StatusCode(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
