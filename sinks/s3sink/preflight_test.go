package s3sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
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

// TestS3Preflight runs the S3 checks against versitygw, with the proxy
// standing in for what versitygw cannot answer (KMS, a role's refusals).
func TestS3Preflight(t *testing.T) {
	v := testkit.StartVersity(t)
	px := testkit.StartProxy(t, v.Endpoint)
	refuse := func(method string, status int, code, msg string) testkit.FaultFunc {
		return func(w http.ResponseWriter, r *http.Request, _ func(http.ResponseWriter)) bool {
			if r.Method != method {
				return false
			}
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
			return true
		}
	}
	// either answers HEAD as head and GET as get (S3's answers to one
	// refusal: a HEAD's has no body).
	either := func(head, get testkit.FaultFunc) testkit.FaultFunc {
		return func(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter)) bool {
			return head(w, r, next) || get(w, r, next)
		}
	}
	bare := func(status int) testkit.FaultFunc { return refuse(http.MethodHead, status, "", "") }
	for _, tc := range []struct {
		name     string
		bucket   string
		query    string
		access   string
		secret   string
		fault    testkit.FaultFunc
		check    string // "" for success
		mentions []string
		is       error // the cause errors.Is matches (nil: neither sinkapi.ErrCredentials nor sinkapi.ErrNoSuchBucket)
	}{
		{name: "writable bucket"},
		{name: "writable bucket, delete refused", fault: refuse(http.MethodDelete, 403, "AccessDenied", "Access Denied")},
		{name: "missing bucket", bucket: "nosuchbucket", check: sinkapi.CheckBucketExists, mentions: []string{`bucket "nosuchbucket" does not exist`, "create it", "NoSuchBucket"}, is: sinkapi.ErrNoSuchBucket},
		{name: "wrong secret key", secret: "wrong", check: sinkapi.CheckCredentials, mentions: []string{"did not accept the AWS credentials", "SignatureDoesNotMatch", "AWS_SECRET_ACCESS_KEY"}, is: sinkapi.ErrCredentials},
		{name: "unknown access key", access: "AKIANOSUCHKEY", check: sinkapi.CheckCredentials, mentions: []string{"did not accept the AWS credentials", "XAdminUserNotFound"}, is: sinkapi.ErrCredentials},
		{name: "unknown access key, missing bucket", bucket: "nosuchbucket", access: "AKIANOSUCHKEY", check: sinkapi.CheckCredentials, mentions: []string{"XAdminUserNotFound"}, is: sinkapi.ErrCredentials},
		{name: "expired session token", fault: either(bare(400), refuse(http.MethodGet, 400, "ExpiredToken", "The provided token has expired.")), check: sinkapi.CheckCredentials, mentions: []string{"ExpiredToken"}, is: sinkapi.ErrCredentials},
		{name: "listing denied", fault: either(bare(403), refuse(http.MethodGet, 403, "AccessDenied", "Access Denied")), check: sinkapi.CheckBucketExists, mentions: []string{"access to bucket", "s3:ListBucket", "403"}},
		{name: "listing and reading denied, bare", fault: either(bare(403), refuse(http.MethodGet, 403, "", "")), check: sinkapi.CheckBucketExists, mentions: []string{"access to bucket", "s3:ListBucket", "403"}},
		{name: "put refused", fault: refuse(http.MethodPut, 403, "AccessDenied", "Access Denied"), check: sinkapi.CheckBucketWritable, mentions: []string{"_archiver/preflight", "AccessDenied"}},
		{name: "kms key missing", query: "sse=aws:kms&kms-key-id=alias/gone", fault: refuse(http.MethodPut, 400, "KMS.NotFoundException", "Key 'alias/gone' does not exist"), check: sinkapi.CheckKMSKeyUsable, mentions: []string{"KMS.NotFoundException"}},
		{name: "kms key denied", query: "sse=aws:kms", fault: refuse(http.MethodPut, 403, "AccessDenied", "not authorized to perform: kms:GenerateDataKey"), check: sinkapi.CheckKMSKeyUsable, mentions: []string{"kms:GenerateDataKey"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			px.SetFault(tc.fault)
			defer px.SetFault(nil)
			bucket := "archive"
			if tc.bucket != "" {
				bucket = tc.bucket
			}
			o := sinkapi.Options{AWSConfig: testkit.AWSConfig}
			if tc.secret != "" || tc.access != "" {
				access, secret := cmp.Or(tc.access, testkit.AccessKey), cmp.Or(tc.secret, testkit.SecretKey)
				o.AWSConfig = func(_ context.Context, region string) (aws.Config, error) {
					return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(access, secret, "")}, nil
				}
			}
			u := "s3://" + bucket + "/pre?endpoint=" + px.URL + "&path-style=true&" + tc.query
			s, _, err := open(ctx, u, o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			err = testkit.Preflight(ctx, s)
			if tc.check == "" {
				if err != nil {
					t.Fatalf("Preflight: %v", err)
				}
				want := "" // deleted, unless the role may not delete it
				if tc.fault != nil {
					want = "pre/_archiver/preflight"
				}
				if keys := strings.Join(v.Objects(t, "pre/"), ","); keys != want {
					t.Fatalf("objects after the preflight: %q, want %q", keys, want)
				}
				return
			}
			testkit.WantPreflightError(t, err, "s3://"+bucket+"/pre", tc.check, tc.mentions...)
			for _, sentinel := range []error{sinkapi.ErrCredentials, sinkapi.ErrNoSuchBucket} {
				if got := errors.Is(err, sentinel); got != (sentinel == tc.is) {
					t.Errorf("errors.Is(err, %q) = %v, want %v", sentinel, got, !got)
				}
			}
		})
	}
}

// TestS3PreflightIsBounded: an endpoint that accepts connections and never
// answers fails the check when the context ends, not later.
func TestS3PreflightIsBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	s, err := New(testkit.Ctx(t), objstore.S3Config{Bucket: "archive", Endpoint: "http://" + l.Addr().String(), PathStyle: true}, sinkapi.Options{AWSConfig: testkit.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), 200*time.Millisecond)
	defer cancel()
	err = testkit.Preflight(ctx, s)
	testkit.WantPreflightError(t, err, "s3://archive", sinkapi.CheckBucketExists)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want the context's deadline", err)
	}
}

// TestS3PreflightMarkerConflict: archivers starting together put the same
// marker, and a store may refuse one of two concurrent writes of a key with
// 409 (S3's OperationAborted). The preflight puts it again, up to
// markerAttempts times in all, and fails the writable check only when
// every attempt was refused; any other refusal is not retried.
func TestS3PreflightMarkerConflict(t *testing.T) {
	v := testkit.StartVersity(t)
	px := testkit.StartProxy(t, v.Endpoint)
	for _, tc := range []struct {
		name      string
		refuse    int // PUTs answered with the status before the store answers
		status    int
		code      string
		wantPuts  int
		wantCheck string // "" for success
	}{
		{name: "one conflict", refuse: 1, status: 409, code: "OperationAborted", wantPuts: 2},
		{name: "conflicts until the last attempt", refuse: markerAttempts - 1, status: 409, code: "OperationAborted", wantPuts: markerAttempts},
		{name: "every attempt in conflict", refuse: 1000, status: 409, code: "OperationAborted", wantPuts: markerAttempts, wantCheck: sinkapi.CheckBucketWritable},
		{name: "denied is not retried", refuse: 1000, status: 403, code: "AccessDenied", wantPuts: 1, wantCheck: sinkapi.CheckBucketWritable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			var puts atomic.Int32
			px.SetFault(func(w http.ResponseWriter, r *http.Request, _ func(http.ResponseWriter)) bool {
				if r.Method != http.MethodPut {
					return false
				}
				if n := puts.Add(1); int(n) > tc.refuse {
					return false
				}
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>refused by the test</Message></Error>`, tc.code)
				return true
			})
			defer px.SetFault(nil)
			s, _, err := open(ctx, "s3://archive/race?endpoint="+px.URL+"&path-style=true", sinkapi.Options{AWSConfig: testkit.AWSConfig})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			err = testkit.Preflight(ctx, s)
			if got := int(puts.Load()); got != tc.wantPuts {
				t.Errorf("%d PUTs of the marker, want %d", got, tc.wantPuts)
			}
			if tc.wantCheck != "" {
				testkit.WantPreflightError(t, err, "s3://archive/race", tc.wantCheck, tc.code)
				return
			}
			if err != nil {
				t.Fatalf("Preflight: %v", err)
			}
			if keys := v.Objects(t, "race/"); len(keys) != 0 {
				t.Fatalf("objects after the preflight: %q, want none (the marker deleted)", keys)
			}
		})
	}
}
