package sinkapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/internal/redact"
)

// Preflighter is a sink that can prove, before any event is read, that it
// will be able to write: its destination exists and takes writes from this
// process. The S3, NATS and file sinks implement it; stdout://
// needs no check. Run it through sinks.Preflight.
type Preflighter interface {
	// Preflight runs the sink's checks and returns a *PreflightError
	// naming the first that failed, or nil.
	Preflight(ctx context.Context) error
}

// The checks a preflight runs, as [PreflightError.Check] names them.
const (
	CheckCredentials       = "credentials accepted"     // S3: HeadBucket (and a GET to learn why it failed)
	CheckBucketExists      = "bucket exists"            // S3: HeadBucket
	CheckBucketWritable    = "bucket writable"          // S3: PutObject of a marker under the prefix
	CheckKMSKeyUsable      = "kms key usable"           // S3 with sse=aws:kms: that PutObject, refused over the key
	CheckConnected         = "connected"                // NATS: a round trip to the server
	CheckStreamCaptures    = "stream captures subjects" // NATS JetStream: a stream captures the subject template
	CheckDirectoryWritable = "directory writable"       // file: a file created, synced and removed
)

// What an S3 preflight finds wrong, matched with errors.Is through a
// *PreflightError. Skipping the checks cures neither: every upload would
// fail the same way.
var (
	// ErrNoSuchBucket: the sink's bucket does not exist.
	ErrNoSuchBucket = errors.New("no such bucket")
	// ErrCredentials: S3 refused the credentials themselves (an unknown
	// access key, a wrong secret, an expired session token).
	ErrCredentials = errors.New("credentials refused")
)

// PreflightTimeout bounds one sink's preflight: a destination that does
// not answer fails the check rather than hold the start-up.
const PreflightTimeout = 5 * time.Second

// PreflightError says which sink failed which check, and why.
type PreflightError struct {
	Sink  string // the sink's Name (never holds secrets)
	Check string // one of the Check* constants
	Err   error  // the cause
}

// Error is one line: the sink, the check and the cause, with anything that
// looks like a secret masked.
func (e *PreflightError) Error() string {
	msg := fmt.Sprintf("sink %s: preflight check %q failed: %v", e.Sink, e.Check, e.Err)
	msg = strings.Join(strings.Fields(msg), " ")
	return redact.Text(msg)
}

func (e *PreflightError) Unwrap() error { return e.Err }

// PreflightContext bounds a preflight by [PreflightTimeout].
func PreflightContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, PreflightTimeout)
}

// PreflightBody is what a preflight's marker (an S3 object, a file)
// holds.
const PreflightBody = "written by ttl-archiver's start-up check; safe to delete\n"
