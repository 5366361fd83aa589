package sinkapi

import (
	"errors"
	"fmt"
)

// ErrPermanent marks a failure that writing the same events again will
// never fix: the bucket does not exist, the role may not write, a message is
// larger than the server accepts. Match it with errors.Is. A caller with a
// dead-letter destination sends such events there at once instead of
// retrying them; a caller without one keeps retrying (the condition may
// still be fixed by an operator) but can say that it will not pass by
// itself.
var ErrPermanent = errors.New("permanent failure")

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds, keeping
// err in the chain for errors.Is and errors.As. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }

// IsPermanent reports whether err is marked permanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// RejectedError is what a sink acknowledges a batch with when it will never
// take some of its events but made every other event of the batch durable
// (one message over NATS's max_payload among small ones). It is permanent
// (errors.Is(err, ErrPermanent)) for the rejected events only: the caller
// must treat the events not listed as acknowledged.
type RejectedError struct {
	// Indexes are the rejected events' positions in Batch.Events,
	// ascending, without repeats.
	Indexes []int
	// Err says why (the first rejection's cause).
	Err error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%d events rejected: %v", len(e.Indexes), e.Err)
}

func (e *RejectedError) Unwrap() error        { return e.Err }
func (e *RejectedError) Is(target error) bool { return target == ErrPermanent }

// AddRejected adds event i of a batch to the rejection held in err (nil or a
// *RejectedError), creating it with cause when there is none yet.
func AddRejected(err error, i int, cause error) error {
	rej, _ := err.(*RejectedError)
	if rej == nil {
		rej = &RejectedError{Err: cause}
	}
	rej.Indexes = append(rej.Indexes, i)
	return rej
}
