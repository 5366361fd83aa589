package sinks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

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
	ctx, cancel := sinkapi.PreflightContext(ctx)
	defer cancel()
	if _, err := s.api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.c.Bucket)}); err != nil {
		check, cause := s.headBucketCause(ctx, err)
		return &PreflightError{Sink: s.name, Check: check, Err: cause}
	}
	key := s.PreflightKey()
	in := &s3.PutObjectInput{Bucket: aws.String(s.c.Bucket), Key: aws.String(key),
		Body: strings.NewReader(sinkapi.PreflightBody), ContentType: aws.String("text/plain")}
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
