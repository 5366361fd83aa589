package sinks

import (
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// The sink contract is package sinkapi's, the leaf every destination
// imports; these names are its types and values, so callers write
// sinks.Sink, sinks.Batch and the rest.
type (
	// Batch is a run of events from one shard, in stream order:
	// [sinkapi.Batch].
	Batch = sinkapi.Batch
	// Ack is called exactly once per batch a sink took: [sinkapi.Ack].
	Ack = sinkapi.Ack
	// Sink is one destination of events: [sinkapi.Sink].
	Sink = sinkapi.Sink
	// Options carries what sinks need from their host process:
	// [sinkapi.Options].
	Options = sinkapi.Options
	// RejectedError names the events of a batch a sink will never take:
	// [sinkapi.RejectedError].
	RejectedError = sinkapi.RejectedError
	// Preflighter is a sink that can prove it will be able to write:
	// [sinkapi.Preflighter].
	Preflighter = sinkapi.Preflighter
	// PreflightError says which sink failed which check, and why:
	// [sinkapi.PreflightError].
	PreflightError = sinkapi.PreflightError
)

// The sentinel errors of package sinkapi (match them with errors.Is).
var (
	// ErrClosed is returned by Write after Close.
	ErrClosed = sinkapi.ErrClosed
	// ErrPermanent marks a failure that writing again will never fix.
	ErrPermanent = sinkapi.ErrPermanent
	// ErrNoSuchBucket: the S3 sink's bucket does not exist.
	ErrNoSuchBucket = sinkapi.ErrNoSuchBucket
	// ErrCredentials: S3 refused the credentials themselves.
	ErrCredentials = sinkapi.ErrCredentials
)

// The checks a preflight runs, as [PreflightError.Check] names them (see
// package sinkapi).
const (
	CheckCredentials       = sinkapi.CheckCredentials
	CheckBucketExists      = sinkapi.CheckBucketExists
	CheckBucketWritable    = sinkapi.CheckBucketWritable
	CheckKMSKeyUsable      = sinkapi.CheckKMSKeyUsable
	CheckConnected         = sinkapi.CheckConnected
	CheckStreamCaptures    = sinkapi.CheckStreamCaptures
	CheckDirectoryWritable = sinkapi.CheckDirectoryWritable
	// PreflightTimeout bounds one sink's preflight.
	PreflightTimeout = sinkapi.PreflightTimeout
)

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds:
// [sinkapi.Permanent].
func Permanent(err error) error { return sinkapi.Permanent(err) }

// IsPermanent reports whether err is marked permanent:
// [sinkapi.IsPermanent].
func IsPermanent(err error) bool { return sinkapi.IsPermanent(err) }
