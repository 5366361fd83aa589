package s3sink

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// PreflightKey is the marker object [Sink.Preflight] writes and deletes:
// PREFIX/_archiver/preflight (outside every table=... partition).
func (s *Sink) PreflightKey() string {
	if s.c.Prefix == "" {
		return "_archiver/preflight"
	}
	return s.c.Prefix + "/_archiver/preflight"
}

// Preflight proves the sink can write. [sinkapi.CheckCredentials] and
// [sinkapi.CheckBucketExists]: HeadBucket answers (the role needs s3:ListBucket on
// the bucket); when it does not, the error says whether the credentials
// were refused ([sinkapi.ErrCredentials]), the bucket is missing
// ([sinkapi.ErrNoSuchBucket]) or access was denied. [sinkapi.CheckBucketWritable]:
// a small marker object ([Sink.PreflightKey]) is put with the sink's
// server-side encryption, so with sse=aws:kms a key that is missing,
// disabled or not usable by the role fails [sinkapi.CheckKMSKeyUsable]. The marker
// is then deleted; a role that may not delete it (s3:DeleteObject) leaves
// it, which is no failure. The SDK makes no retries of its own (see
// [New]), so a missing bucket fails at the first answer.
func (s *Sink) Preflight(ctx context.Context) error {
	ctx, cancel := sinkapi.PreflightContext(ctx)
	defer cancel()
	if _, err := s.api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.c.Bucket)}); err != nil {
		check, cause := s.headBucketCause(ctx, err)
		return &sinkapi.PreflightError{Sink: s.name, Check: check, Err: cause}
	}
	key := s.PreflightKey()
	in := &s3.PutObjectInput{Bucket: aws.String(s.c.Bucket), Key: aws.String(key),
		Body: strings.NewReader(sinkapi.PreflightBody), ContentType: aws.String("text/plain")}
	s.encrypt(in)
	if err := s.putMarker(ctx, in); err != nil {
		check := sinkapi.CheckBucketWritable
		if s.c.SSE == "aws:kms" && mentionsKMS(err) {
			check = sinkapi.CheckKMSKeyUsable
		}
		return &sinkapi.PreflightError{Sink: s.name, Check: check, Err: fmt.Errorf("put s3://%s/%s: %w", s.c.Bucket, key, err)}
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
func (s *Sink) headBucketCause(ctx context.Context, err error) (check string, cause error) {
	bucket := s.c.Bucket
	status := awserr.StatusCode(err)
	if status == http.StatusBadRequest || status == http.StatusForbidden || status == http.StatusNotFound {
		out, gerr := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(s.PreflightKey())})
		switch {
		case gerr == nil:
			_ = out.Body.Close()
		case awserr.IsCredentials(gerr):
			return sinkapi.CheckCredentials, fmt.Errorf("%w (%s): S3 did not accept the AWS credentials this process uses; "+
				"check the access key ID and secret (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the task role) "+
				"and that a session token has not expired: %w", sinkapi.ErrCredentials, awserr.Code(gerr), gerr)
		case awserr.Code(gerr) == "NoSuchBucket":
			err = gerr
			status = http.StatusNotFound
		}
	}
	switch status {
	case http.StatusNotFound:
		return sinkapi.CheckBucketExists, fmt.Errorf("%w: bucket %q does not exist: create it, or correct the bucket (and region) in the sink URL: %w",
			sinkapi.ErrNoSuchBucket, bucket, err)
	case http.StatusForbidden:
		return sinkapi.CheckBucketExists, fmt.Errorf("access to bucket %q denied (HeadBucket needs s3:ListBucket on it): %w", bucket, err)
	case http.StatusMovedPermanently:
		return sinkapi.CheckBucketExists, fmt.Errorf("bucket %q is in another region: %w", bucket, err)
	}
	return sinkapi.CheckBucketExists, fmt.Errorf("bucket %q: %w", bucket, err)
}

// mentionsKMS reports whether an S3 error is about the KMS key (a KMS.*
// code, or an access denial naming a kms: action).
func mentionsKMS(err error) bool {
	if strings.HasPrefix(awserr.Code(err), "KMS.") {
		return true
	}
	return strings.Contains(err.Error(), "kms:") || strings.Contains(err.Error(), "KMS")
}

// markerAttempts is how often the preflight puts its marker when S3
// answers 409: archivers starting together put the same marker, and a
// store may refuse one of two concurrent writes of a key with a conflict
// (S3's OperationAborted; versitygw's posix store one of its own).
const markerAttempts = 4

// putMarker puts the preflight marker, again after a 409 conflict (at
// most markerAttempts times, with the one backoff), and returns the last
// error.
func (s *Sink) putMarker(ctx context.Context, in *s3.PutObjectInput) error {
	wait := backoff.Policy{Min: 100 * time.Millisecond, Max: time.Second}
	for n := 0; ; n++ {
		in.Body = strings.NewReader(sinkapi.PreflightBody)
		_, err := s.api.PutObject(ctx, in)
		if err == nil || awserr.StatusCode(err) != http.StatusConflict || n+1 == markerAttempts {
			return err
		}
		if !backoff.Sleep(ctx, wait.Delay(n)) {
			return err
		}
	}
}
