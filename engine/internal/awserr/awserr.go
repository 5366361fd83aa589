// Package awserr is the engine's wire error: an AWS error code, a message
// and the HTTP status it is sent with. Every layer of the engine returns
// these for client mistakes; anything else that reaches the HTTP layer is a
// bug and is sent as a 500 InternalServerError without internals.
package awserr

import (
	"errors"
	"fmt"
)

// Error is an error the engine sends to the client as
// {"__type": "com.amazonaws.dynamodb.v20120810#Code", "message": Message}.
type Error struct {
	Code    string // e.g. "ValidationException"
	Message string
	Status  int // HTTP status; 400 unless set
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is matches another *Error with the same Code, so callers can write
// errors.Is(err, awserr.New("ConditionalCheckFailedException", "")).
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// HTTPStatus is the status to send, 400 by default.
func (e *Error) HTTPStatus() int {
	if e.Status == 0 {
		return 400
	}
	return e.Status
}

// New returns an error with the given code and message.
func New(code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Newf formats the message.
func Newf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Validation returns a ValidationException.
func Validation(format string, args ...any) *Error {
	return Newf("ValidationException", format, args...)
}

// NotFound returns a ResourceNotFoundException.
func NotFound(format string, args ...any) *Error {
	return Newf("ResourceNotFoundException", format, args...)
}

// InUse returns a ResourceInUseException.
func InUse(format string, args ...any) *Error {
	return Newf("ResourceInUseException", format, args...)
}

// Common codes.
const (
	CodeValidation          = "ValidationException"
	CodeResourceNotFound    = "ResourceNotFoundException"
	CodeResourceInUse       = "ResourceInUseException"
	CodeConditionalCheck    = "ConditionalCheckFailedException"
	CodeLimitExceeded       = "LimitExceededException"
	CodeThroughputExceeded  = "ProvisionedThroughputExceededException"
	CodeTrimmedDataAccess   = "TrimmedDataAccessException"
	CodeExpiredIterator     = "ExpiredIteratorException"
	CodeSerialization       = "SerializationException"
	CodeUnknownOperation    = "UnknownOperationException"
	CodeInternalServerError = "InternalServerError"
	CodeServiceUnavailable  = "ServiceUnavailable"
)
