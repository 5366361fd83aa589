package s3sink

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// s3ErrorAnswer answers every PUT with an S3 error document.
func s3ErrorAnswer(status int, code, msg string, puts *atomic.Int32) testkit.FaultFunc {
	return func(w http.ResponseWriter, r *http.Request, _ func(http.ResponseWriter)) bool {
		if r.Method != http.MethodPut {
			return false
		}
		puts.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
		return true
	}
}

// TestS3ErrorClassification: answers that a retry never fixes fail the
// upload's batches at once with a permanent error; retryable answers are
// retried up to MaxAttempts and then fail with an error that is not
// permanent. versitygw answers where it can; the proxy stands in for what
// it cannot produce (KMS, throttling, expired tokens).
func TestS3ErrorClassification(t *testing.T) {
	v := testkit.StartVersity(t)
	px := testkit.StartProxy(t, v.Endpoint)
	wrongSecret := func(ctx context.Context, region string) (aws.Config, error) {
		return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(testkit.AccessKey, "not-the-secret", "")}, nil
	}
	const maxAttempts = 3
	for _, tc := range []struct {
		name      string
		bucket    string
		awsConfig func(context.Context, string) (aws.Config, error)
		status    int // 0: versitygw answers
		code, msg string
		attempts  int32
		permanent bool
		mentions  string
	}{
		{name: "NoSuchBucket from versitygw", bucket: "missing", attempts: 1, permanent: true, mentions: "NoSuchBucket"},
		{name: "bad signature from versitygw", awsConfig: wrongSecret, attempts: 1, permanent: true, mentions: "403"},
		{name: "AccessDenied", status: 403, code: "AccessDenied", msg: "Access Denied", attempts: 1, permanent: true, mentions: "AccessDenied"},
		{name: "InvalidBucketName", status: 400, code: "InvalidBucketName", msg: "The specified bucket is not valid.", attempts: 1, permanent: true, mentions: "InvalidBucketName"},
		{name: "KMS key missing", status: 400, code: "KMS.NotFoundException", msg: "Invalid arn", attempts: 1, permanent: true, mentions: "KMS.NotFoundException"},
		{name: "KMS key denied", status: 403, code: "AccessDenied", msg: "not authorized to perform: kms:GenerateDataKey", attempts: 1, permanent: true, mentions: "kms:GenerateDataKey"},
		{name: "KMS key disabled", status: 400, code: "KMS.DisabledException", msg: "key is disabled", attempts: 1, permanent: true, mentions: "KMS.DisabledException"},
		{name: "other bad request", status: 400, code: "InvalidArgument", msg: "bad header", attempts: 1, permanent: true, mentions: "InvalidArgument"},
		{name: "SlowDown", status: 503, code: "SlowDown", msg: "Reduce your request rate.", attempts: maxAttempts},
		{name: "InternalError", status: 500, code: "InternalError", msg: "oops", attempts: maxAttempts},
		{name: "ExpiredToken", status: 400, code: "ExpiredToken", msg: "The provided token has expired.", attempts: maxAttempts},
		{name: "RequestTimeout", status: 400, code: "RequestTimeout", msg: "idle", attempts: maxAttempts},
		{name: "BadDigest", status: 400, code: "BadDigest", msg: "checksum mismatch", attempts: maxAttempts},
		{name: "KMS throttled", status: 400, code: "KMS.ThrottlingException", msg: "rate exceeded", attempts: maxAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			var puts atomic.Int32
			if tc.status != 0 {
				px.SetFault(s3ErrorAnswer(tc.status, tc.code, tc.msg, &puts))
			} else {
				px.SetFault(func(_ http.ResponseWriter, r *http.Request, _ func(http.ResponseWriter)) bool {
					if r.Method == http.MethodPut {
						puts.Add(1)
					}
					return false
				})
			}
			c := objstore.S3Config{Bucket: "archive", Endpoint: px.URL, PathStyle: true, MaxAttempts: maxAttempts, RetryBase: time.Millisecond}
			if tc.bucket != "" {
				c.Bucket = tc.bucket
			}
			o := sinkapi.Options{AWSConfig: testkit.AWSConfig}
			if tc.awsConfig != nil {
				o.AWSConfig = tc.awsConfig
			}
			s, err := New(ctx, c, o)
			if err != nil {
				t.Fatal(err)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			n, err := a.Get("b")
			if n != 1 || err == nil {
				t.Fatalf("%d acks, err %v; want one ack with an error", n, err)
			}
			if sinkapi.IsPermanent(err) != tc.permanent {
				t.Errorf("IsPermanent = %v, want %v: %v", sinkapi.IsPermanent(err), tc.permanent, err)
			}
			if got := puts.Load(); got != tc.attempts {
				t.Errorf("%d PUTs, want %d", got, tc.attempts)
			}
			if want := fmt.Sprintf("attempt %d", tc.attempts); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			if tc.mentions != "" && !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("error %q does not mention %q", err, tc.mentions)
			}
		})
	}
}

// TestS3RejectsBadTableNames: an event whose table name cannot be part of a
// key is rejected alone; the others of its batch are stored.
func TestS3RejectsBadTableNames(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	s := openS3(t, v.Endpoint, "flush-interval=1h")
	s.c.Prefix = "badtable"
	evs := testkit.Events("t", "s", 1, 4)
	evs[1].Table = "../escape"
	evs[3].Table = ""
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("mixed")); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, sinkapi.Batch{Events: evs[1:2]}, a.Ack("all bad")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.AssertRejected(t, a.WaitAck(t, "mixed"), []int{1, 3}, "table name")
	testkit.AssertRejected(t, a.WaitAck(t, "all bad"), []int{0}, "table name")
	ids := v.AllEventIDs(t, "badtable/")
	if len(ids) != 2 || ids[evs[0].EventID] != 1 || ids[evs[2].EventID] != 1 {
		t.Fatalf("stored %v, want the two good events once each", ids)
	}
}
