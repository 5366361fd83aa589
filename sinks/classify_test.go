package sinks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
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
			c := S3Config{Bucket: "archive", Endpoint: px.URL, PathStyle: true, MaxAttempts: maxAttempts, RetryBase: time.Millisecond}
			if tc.bucket != "" {
				c.Bucket = tc.bucket
			}
			o := Options{AWSConfig: testkit.AWSConfig}
			if tc.awsConfig != nil {
				o.AWSConfig = tc.awsConfig
			}
			s, err := NewS3(ctx, c, o)
			if err != nil {
				t.Fatal(err)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			n, err := a.Get("b")
			if n != 1 || err == nil {
				t.Fatalf("%d acks, err %v; want one ack with an error", n, err)
			}
			if IsPermanent(err) != tc.permanent {
				t.Errorf("IsPermanent = %v, want %v: %v", IsPermanent(err), tc.permanent, err)
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
	if err := s.Write(ctx, Batch{Events: evs}, a.Ack("mixed")); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, Batch{Events: evs[1:2]}, a.Ack("all bad")); err != nil {
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

// padded returns events whose items carry a "pad" attribute of n[i] bytes
// (none for 0).
func padded(table string, n ...int) []event.Event {
	evs := testkit.Events(table, "shard-1", 1, len(n))
	for i, size := range n {
		if size > 0 {
			evs[i].OldImage["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", size)}
		}
	}
	return evs
}

// payloadSize is what NATS counts against max_payload for e's message.
func payloadSize(s *NATSSink, e *event.Event) int {
	m := s.message(e)
	return m.Size() - len(m.Subject)
}

// TestNATSRejectsOversizeMessages runs a server with a small max_payload:
// a message over it is rejected alone, every other event of its batch is
// published and the batch is acknowledged with a RejectedError listing
// it. A message of exactly max_payload goes through, and the connection
// stays usable.
func TestNATSRejectsOversizeMessages(t *testing.T) {
	const maxPayload = 4096
	for _, mode := range []string{"jetstream", "core"} {
		t.Run(mode, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			ns := testkit.StartNATS(t, func(o *server.Options) { o.MaxPayload = maxPayload })
			nc, js := ns.Client(t)
			query := "?subject=big.{table}"
			var st jetstream.Stream
			var sub *nats.Subscription
			if mode == "jetstream" {
				st = testkit.CreateStream(t, js, "BIG", "big.>")
			} else {
				query += "&jetstream=false"
				var err error
				if sub, err = nc.SubscribeSync("big.>"); err != nil {
					t.Fatal(err)
				}
				nc.Flush()
			}
			sk, _, err := Open(ctx, "nats://"+ns.URL+query, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sk.Close(ctx)
			s := sk.(*NATSSink)
			evs := padded("t", 0, 2*maxPayload, 0, 0, 0)
			// Event 3 at exactly max_payload, event 4 one byte over.
			base := payloadSize(s, &padded("t", 1)[0]) - 1
			evs[3] = padded("t", 0, 0, 0, maxPayload-base)[3]
			evs[4] = padded("t", 0, 0, 0, 0, maxPayload-base+1)[4]
			if got := payloadSize(s, &evs[3]); got != maxPayload {
				t.Fatalf("test set-up: event 3 is %d bytes, want %d", got, maxPayload)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, Batch{Events: evs}, a.Ack("mixed")); err != nil {
				t.Fatal(err)
			}
			err = a.WaitAck(t, "mixed")
			testkit.AssertRejected(t, err, []int{1, 4}, "max_payload")
			if !errors.Is(err, nats.ErrMaxPayload) {
				t.Fatalf("%v does not match nats.ErrMaxPayload", err)
			}
			if err := s.Write(ctx, Batch{Events: testkit.Events("t", "shard-1", 100, 2)}, a.Ack("after")); err != nil {
				t.Fatal(err)
			}
			if err := a.WaitAck(t, "after"); err != nil {
				t.Fatalf("a batch after the rejection: %v", err)
			}
			var want []string
			for _, e := range append([]event.Event{evs[0], evs[2], evs[3]}, testkit.Events("t", "shard-1", 100, 2)...) {
				want = append(want, event.MessageID(&e))
			}
			var got []string
			if st != nil {
				for _, m := range testkit.StreamMsgs(t, st) {
					got = append(got, m.Headers().Get("Nats-Msg-Id"))
				}
			} else {
				for range want {
					m, err := sub.NextMsg(30 * time.Second)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, m.Header.Get("Nats-Msg-Id"))
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("published %v, want %v", got, want)
			}
		})
	}
}

// TestNATSRejectsOverStreamMaxMsgSize: a message within max_payload that
// the stream refuses as larger than its max_msg_size is rejected alone.
func TestNATSRejectsOverStreamMaxMsgSize(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}, MaxMsgSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := Open(ctx, "nats://"+ns.URL+"?subject=small.{table}", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	evs := padded("t", 0, 8192, 0)
	a := testkit.NewAcks()
	if err := s.Write(ctx, Batch{Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	testkit.AssertRejected(t, a.WaitAck(t, "b"), []int{1}, "maximum")
	if n := testkit.StreamCount(t, st); n != 2 {
		t.Fatalf("stream holds %d messages, want 2", n)
	}
}

// TestNATSRejectsBadSubjects: a subject the client refuses is rejected.
// Templates are checked and placeholder values cleaned, so a bad subject
// cannot be rendered; the test sets one directly.
func TestNATSRejectsBadSubjects(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "TTL", "archiver.>")
	sk, _, err := Open(ctx, "nats://"+ns.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close(ctx)
	s := sk.(*NATSSink)
	s.tmpl = subjectTemplate{{{lit: "archiver"}}, {{lit: "bad subject"}}}
	a := testkit.NewAcks()
	if err := s.Write(ctx, Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	err = a.WaitAck(t, "b")
	testkit.AssertRejected(t, err, []int{0, 1}, "invalid subject")
	if !errors.Is(err, nats.ErrBadSubject) {
		t.Fatalf("%v does not match nats.ErrBadSubject", err)
	}
}

// TestNATSUncapturedSubjectIsPermanent: once no stream captures the
// subjects (the stream was deleted under the running sink), batches fail
// with a permanent error rather than after two minutes of retries.
func TestNATSUncapturedSubjectIsPermanent(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, _ := openNATSWithoutStream(t, ctx)
	a := testkit.NewAcks()
	if err := s.Write(ctx, Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	err := a.WaitAck(t, "b")
	var rej *RejectedError
	if !IsPermanent(err) || errors.As(err, &rej) || !strings.Contains(err.Error(), "no JetStream stream captures") {
		t.Fatalf("ack error %v, want a permanent no-stream error for the whole batch", err)
	}
}

// openNATSWithoutStream opens a JetStream sink whose stream is then deleted
// under it: no stream captures its subjects any more. It returns the sink
// (closed when the test ends) and its URL.
func openNATSWithoutStream(t *testing.T, ctx context.Context) (Sink, string) {
	t.Helper()
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "TTL", "archiver.>")
	url := "nats://" + ns.URL
	s, _, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.WithoutCancel(ctx)) })
	if err := js.DeleteStream(ctx, "TTL"); err != nil {
		t.Fatal(err)
	}
	return s, url
}
