package conformance

import (
	"errors"
	"net/url"
	"strings"

	"github.com/aws/smithy-go"
)

// shortErr is an error with the SDK's part of its text shortened, the
// whole error still in its chain (awserr.Code reads through it).
type shortErr struct {
	msg string
	err error
}

func (s shortErr) Error() string { return s.msg }
func (s shortErr) Unwrap() error { return s.err }

// short shortens the SDK's part of an error for a check's one line: what
// the endpoint answered ("Code: message") or, when it did not answer, the
// failed request ("Post URL: dial tcp ...: connection refused"), without
// the SDK's operation, request ID and attempt count. What the checks
// wrapped around it stays.
func short(err error) error {
	var op *smithy.OperationError
	if err == nil || !errors.As(err, &op) {
		return err
	}
	var api smithy.APIError
	var ue *url.Error
	var s string
	switch {
	case errors.As(err, &api):
		s = api.ErrorCode()
		if m := api.ErrorMessage(); m != "" {
			s += ": " + m
		}
	case errors.As(err, &ue):
		s = ue.Error()
	default:
		return err
	}
	return shortErr{strings.Replace(err.Error(), op.Error(), s, 1), err}
}
