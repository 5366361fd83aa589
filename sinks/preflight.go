package sinks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/redact"
)

// Preflighter is a sink that can prove, before any event is read, that it
// will be able to write: its destination exists and takes writes from this
// process. [S3Sink], [NATSSink] and [FileSink] implement it; stdout://
// needs no check. Run it through [Preflight].
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

// Preflight runs s's checks when s is a [Preflighter] and returns nil for
// other sinks. Every failure is a *PreflightError. Each check is bounded
// by [PreflightTimeout] (or ctx, if it ends sooner). A caller runs it on
// every sink, the dead-letter sink included, after opening them and
// before reading; a role that may write but not list (HeadBucket) cannot
// pass it and must skip it.
func Preflight(ctx context.Context, s Sink) error {
	p, ok := s.(Preflighter)
	if !ok {
		return nil
	}
	err := p.Preflight(ctx)
	if err == nil {
		return nil
	}
	var pe *PreflightError
	if !errors.As(err, &pe) {
		return &PreflightError{Sink: s.Name(), Check: "preflight", Err: err}
	}
	return err
}

// preflightContext bounds a preflight by PreflightTimeout.
func preflightContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, PreflightTimeout)
}

// preflightBody is what the S3 preflight marker holds.
const preflightBody = "written by ttl-archiver's start-up check; safe to delete\n"

// PreflightKey is the marker object [S3Sink.Preflight] writes and deletes:
// PREFIX/_archiver/preflight (outside every table=... partition).
func (s *S3Sink) PreflightKey() string {
	if s.c.Prefix == "" {
		return "_archiver/preflight"
	}
	return s.c.Prefix + "/_archiver/preflight"
}

// Preflight proves the sink can write. [CheckCredentials] and
// [CheckBucketExists]: HeadBucket answers (the role needs s3:ListBucket on
// the bucket); when it does not, the error says whether the credentials
// were refused ([ErrCredentials]), the bucket is missing
// ([ErrNoSuchBucket]) or access was denied. [CheckBucketWritable]:
// a small marker object ([S3Sink.PreflightKey]) is put with the sink's
// server-side encryption, so with sse=aws:kms a key that is missing,
// disabled or not usable by the role fails [CheckKMSKeyUsable]. The marker
// is then deleted; a role that may not delete it (s3:DeleteObject) leaves
// it, which is no failure. The SDK makes no retries of its own (see
// [NewS3]), so a missing bucket fails at the first answer.
func (s *S3Sink) Preflight(ctx context.Context) error {
	ctx, cancel := preflightContext(ctx)
	defer cancel()
	if _, err := s.api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.c.Bucket)}); err != nil {
		check, cause := s.headBucketCause(ctx, err)
		return &PreflightError{Sink: s.name, Check: check, Err: cause}
	}
	key := s.PreflightKey()
	in := &s3.PutObjectInput{Bucket: aws.String(s.c.Bucket), Key: aws.String(key),
		Body: strings.NewReader(preflightBody), ContentType: aws.String("text/plain")}
	s.encrypt(in)
	if _, err := s.api.PutObject(ctx, in); err != nil {
		check := CheckBucketWritable
		if s.c.SSE == "aws:kms" && mentionsKMS(err) {
			check = CheckKMSKeyUsable
		}
		return &PreflightError{Sink: s.name, Check: check, Err: fmt.Errorf("put s3://%s/%s: %w", s.c.Bucket, key, err)}
	}
	_, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.c.Bucket), Key: aws.String(key)})
	switch {
	case err == nil:
	case awserr.StatusCode(err) == http.StatusForbidden:
		s.log.Debug("preflight marker left in place: the role may not delete it", zap.String("key", key))
	default:
		s.log.Warn("preflight marker not deleted", zap.String("key", key), zap.Error(err))
	}
	return nil
}

// headBucketCause says which check a failed HeadBucket fails and why. Its
// answer has no body, so its status alone cannot tell refused credentials
// from a missing bucket or a denied permission (S3 answers a wrong secret
// with 403, versitygw an unknown access key with 404): on a 400, 403 or
// 404 a GET of the marker key asks again, and the code in that answer
// decides when it names one.
func (s *S3Sink) headBucketCause(ctx context.Context, err error) (check string, cause error) {
	bucket := s.c.Bucket
	status := awserr.StatusCode(err)
	if status == http.StatusBadRequest || status == http.StatusForbidden || status == http.StatusNotFound {
		out, gerr := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(s.PreflightKey())})
		switch {
		case gerr == nil:
			_ = out.Body.Close()
		case awserr.IsCredentials(gerr):
			return CheckCredentials, fmt.Errorf("%w (%s): S3 did not accept the AWS credentials this process uses; "+
				"check the access key ID and secret (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the task role) "+
				"and that a session token has not expired: %w", ErrCredentials, awserr.Code(gerr), gerr)
		case awserr.Code(gerr) == "NoSuchBucket":
			err = gerr
			status = http.StatusNotFound
		}
	}
	switch status {
	case http.StatusNotFound:
		return CheckBucketExists, fmt.Errorf("%w: bucket %q does not exist: create it, or correct the bucket (and region) in the sink URL: %w",
			ErrNoSuchBucket, bucket, err)
	case http.StatusForbidden:
		return CheckBucketExists, fmt.Errorf("access to bucket %q denied (HeadBucket needs s3:ListBucket on it): %w", bucket, err)
	case http.StatusMovedPermanently:
		return CheckBucketExists, fmt.Errorf("bucket %q is in another region: %w", bucket, err)
	}
	return CheckBucketExists, fmt.Errorf("bucket %q: %w", bucket, err)
}

// mentionsKMS reports whether an S3 error is about the KMS key (a KMS.*
// code, or an access denial naming a kms: action).
func mentionsKMS(err error) bool {
	if strings.HasPrefix(awserr.Code(err), "KMS.") {
		return true
	}
	return strings.Contains(err.Error(), "kms:") || strings.Contains(err.Error(), "KMS")
}

// Preflight proves the sink can publish. [CheckConnected]: a round trip to
// the server. [CheckStreamCaptures], in JetStream mode: a stream captures
// the subject template (creating it first when create-stream says so), as
// [NewNATS] checked already; the check runs again so a stream deleted
// since shows before reading starts. [CheckMsgTTL], with msg-ttl: the
// server is 2.11 or later and that stream allows per-message TTLs.
func (s *NATSSink) Preflight(ctx context.Context) error {
	ctx, cancel := preflightContext(ctx)
	defer cancel()
	c := s.cur()
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return &PreflightError{Sink: s.name, Check: CheckConnected, Err: err}
	}
	if c.js == nil {
		return nil
	}
	if _, err := s.checkStream(ctx); err != nil {
		return &PreflightError{Sink: s.name, Check: streamCheck(err), Err: err}
	}
	return nil
}

// Preflight proves the directory takes files: [CheckDirectoryWritable]
// creates a file in it, writes, fsyncs and removes it. The error is
// classified like a failed append (see [FileSink]).
func (s *FileSink) Preflight(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &PreflightError{Sink: s.Name(), Check: CheckDirectoryWritable, Err: err}
	}
	f, err := os.CreateTemp(s.dir, ".archiver-preflight-*")
	if err == nil {
		_, err = f.WriteString(preflightBody)
		if err == nil {
			err = s.fsync(f)
		}
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	if err != nil {
		return &PreflightError{Sink: s.Name(), Check: CheckDirectoryWritable, Err: classifyFileError(err)}
	}
	return nil
}
