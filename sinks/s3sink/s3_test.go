package s3sink

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

func openS3(t testing.TB, endpoint, query string) *Sink {
	t.Helper()
	u := "s3://archive/ttl?endpoint=" + endpoint + "&path-style=true&" + query
	s, _, err := open(testkit.Ctx(t), u, sinkapi.Options{AWSConfig: testkit.AWSConfig})
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s.(*Sink)
}

func TestS3KeysAndContent(t *testing.T) {
	v := testkit.StartVersity(t)
	for _, comp := range []string{"gzip", "zstd", "none"} {
		t.Run(comp, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			s := openS3(t, v.Endpoint, "compression="+comp+"&flush-interval=1h")
			s.c.Prefix = "ttl/" + comp
			a := testkit.NewAcks()
			sh1 := testkit.Events("sessions", "shardId-0001", 100, 6)
			sh1[5].ApproximateCreationTime = testkit.Start.Add(time.Hour) // next hour
			sh2 := testkit.Events("sessions", "shardId-0002", 7, 3)
			del := testkit.Events("carts", "shardId-0001", 50, 2)
			for i := range del {
				del[i].Kind = event.Deleted
			}
			for id, b := range map[string]sinkapi.Batch{
				"sh1": {ShardID: "shardId-0001", Events: sh1},
				"sh2": {ShardID: "shardId-0002", Events: sh2},
				"del": {ShardID: "shardId-0001", Events: del},
			} {
				if err := s.Write(ctx, b, a.Ack(id)); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(a.All()); n != 0 {
				t.Fatalf("%d batches acknowledged before anything was uploaded", n)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"sh1", "sh2", "del"} {
				if n, err := a.Get(id); n != 1 || err != nil {
					t.Fatalf("batch %s: %d acks, err %v", id, n, err)
				}
			}
			ext := map[string]string{"gzip": ".jsonl.gz", "zstd": ".jsonl.zst", "none": ".jsonl"}[comp]
			p := "ttl/" + comp + "/"
			want := []string{
				p + "table=carts/kind=deleted/dt=2026-03-04/hr=05/us-east-1.shardId-0001-000000000000000000050-000000000000000000051" + ext,
				p + "table=sessions/kind=expired/dt=2026-03-04/hr=05/us-east-1.shardId-0001-000000000000000000100-000000000000000000104" + ext,
				p + "table=sessions/kind=expired/dt=2026-03-04/hr=05/us-east-1.shardId-0002-000000000000000000007-000000000000000000009" + ext,
				p + "table=sessions/kind=expired/dt=2026-03-04/hr=06/us-east-1.shardId-0001-000000000000000000105-000000000000000000105" + ext,
			}
			got := v.Objects(t, p)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("keys:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			evs, out := v.Read(t, want[1])
			if len(evs) != 5 {
				t.Fatalf("%d lines, want 5", len(evs))
			}
			for i := range evs {
				if !testkit.SameEvent(evs[i], sh1[i]) {
					t.Fatalf("line %d does not decode to the original event", i)
				}
			}
			if aws.ToString(out.ContentType) != "application/x-ndjson" {
				t.Errorf("Content-Type %q", aws.ToString(out.ContentType))
			}
			wantEnc := map[string]string{"gzip": "gzip", "zstd": "zstd", "none": ""}[comp]
			if aws.ToString(out.ContentEncoding) != wantEnc {
				t.Errorf("Content-Encoding %q, want %q", aws.ToString(out.ContentEncoding), wantEnc)
			}
			if out.Metadata["records"] != "5" || out.Metadata["first-sequence"] != "000000000000000000100" {
				t.Errorf("metadata %v", out.Metadata)
			}
		})
	}
}

// TestS3RetryAfterLostResponse: the object is stored but the response is
// lost (the proxy answers 500); the sink uploads again with the same key and
// bytes, gets 412 from If-None-Match, finds the same content and succeeds.
func TestS3RetryAfterLostResponse(t *testing.T) {
	v := testkit.StartVersity(t)
	px := testkit.StartProxy(t, v.Endpoint)
	var lost atomic.Int32
	px.SetFault(func(w http.ResponseWriter, r *http.Request, forward func(http.ResponseWriter)) bool {
		if r.Method == http.MethodPut && lost.Add(1) == 1 {
			forward(discard{})
			http.Error(w, "lost", http.StatusInternalServerError)
			return true
		}
		return false
	})
	reg := prometheus.NewRegistry()
	s, err := New(testkit.Ctx(t), objstore.S3Config{Bucket: "archive", Prefix: "lost", Endpoint: px.URL, PathStyle: true, RetryBase: 10 * time.Millisecond}, sinkapi.Options{AWSConfig: testkit.AWSConfig, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Ctx(t)
	a := testkit.NewAcks()
	evs := testkit.Events("t", "s", 1, 10)
	if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Get("b"); n != 1 || err != nil {
		t.Fatalf("%d acks, err %v", n, err)
	}
	puts := px.Puts()
	if len(puts) != 2 || puts[1].Header.Get("If-None-Match") != "*" || puts[0].URL.Path != puts[1].URL.Path {
		t.Fatalf("want two PUTs of one key with If-None-Match: *, got %d", len(puts))
	}
	if ids := v.AllEventIDs(t, "lost/"); len(ids) != 10 {
		t.Fatalf("%d events stored, want 10", len(ids))
	}
	if got := testkit.Counter(t, reg, "archiver_sink_retries_total"); got != 1 {
		t.Fatalf("retries metric %v, want 1", got)
	}
}

type discard struct{ h http.Header }

func (d discard) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// TestS3IfNoneMatchNeverOverwrites: an object with other content under the
// key is left alone (the upload goes under a distinct key, see
// TestS3KeyConflicts), and the same records written twice make one object.
func TestS3IfNoneMatchNeverOverwrites(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	s := openS3(t, v.Endpoint, "compression=none")
	evs := testkit.Events("t", "s", 1, 2)
	key := s.Key("t", event.Expired, "us-east-1", "s", testkit.Start.Truncate(time.Hour), evs[0].SequenceNumber, evs[1].SequenceNumber)
	if _, err := v.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("archive"), Key: aws.String(key), Body: strings.NewReader("other\n")}); err != nil {
		t.Fatal(err)
	}
	// versitygw itself refuses a conditional overwrite.
	_, err := v.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("archive"), Key: aws.String(key), Body: strings.NewReader("x"), IfNoneMatch: aws.String("*")})
	if !isPreconditionFailed(err) {
		t.Fatalf("conditional overwrite: %v, want 412 PreconditionFailed", err)
	}
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	s.Flush(ctx)
	if n, err := a.Get("b"); n != 1 || err != nil {
		t.Fatalf("%d acks, err %v; want the upload under a distinct key", n, err)
	}
	out, _ := v.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("archive"), Key: aws.String(key)})
	body := make([]byte, 16)
	n, _ := out.Body.Read(body)
	if string(body[:n]) != "other\n" {
		t.Fatalf("existing object was overwritten: %q", body[:n])
	}
	// The same records written again (a re-delivery after a crash) with the
	// same content under a key of their own: success, one object.
	evs2 := testkit.Events("t", "s", 10, 3)
	for i := 0; i < 2; i++ {
		if err := s.Write(ctx, sinkapi.Batch{Events: evs2}, a.Ack(fmt.Sprint("again", i))); err != nil {
			t.Fatal(err)
		}
		s.Flush(ctx)
		if n, err := a.Get(fmt.Sprint("again", i)); n != 1 || err != nil {
			t.Fatalf("round %d: %d acks, %v", i, n, err)
		}
	}
	if keys := v.Objects(t, "ttl/table=t/"); len(keys) != 3 {
		t.Fatalf("keys %v, want the other object, the distinct key and one more", keys)
	}
}

func TestS3SendsSSEAndStorageClass(t *testing.T) {
	v := testkit.StartVersity(t)
	px := testkit.StartProxy(t, v.Endpoint)
	// versitygw does not implement KMS; the proxy records the headers and
	// answers the PUT as S3 would, so the sink's requests can be checked.
	px.SetFault(func(w http.ResponseWriter, r *http.Request, forward func(http.ResponseWriter)) bool {
		if r.Method == http.MethodPut && r.Header.Get("X-Amz-Server-Side-Encryption") == "aws:kms" {
			w.Header().Set("ETag", `"0"`)
			w.WriteHeader(http.StatusOK)
			return true
		}
		return false
	})
	for _, tc := range []struct {
		query string
		want  map[string]string
	}{
		{"sse=AES256&storage-class=STANDARD_IA", map[string]string{"X-Amz-Server-Side-Encryption": "AES256", "X-Amz-Storage-Class": "STANDARD_IA"}},
		{"sse=aws:kms&kms-key-id=alias/archive", map[string]string{"X-Amz-Server-Side-Encryption": "aws:kms", "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id": "alias/archive"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			before := len(px.Puts())
			s := openS3(t, px.URL, tc.query)
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 1)}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			s.Flush(ctx)
			if n, err := a.Get("b"); n != 1 || err != nil {
				t.Fatalf("%d acks, %v", n, err)
			}
			puts := px.Puts()[before:]
			if len(puts) != 1 {
				t.Fatalf("%d PUTs", len(puts))
			}
			h := puts[0].Header
			tc.want["Content-Type"] = "application/x-ndjson"
			tc.want["Content-Encoding"] = "gzip"
			tc.want["If-None-Match"] = "*"
			for k, want := range tc.want {
				if got := h.Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if h.Get("X-Amz-Checksum-Sha256") == "" && !strings.Contains(h.Get("X-Amz-Trailer"), "sha256") {
				t.Errorf("no SHA-256 checksum sent: %v", h)
			}
		})
	}
}

func TestS3FlushOnSizeIntervalAndClose(t *testing.T) {
	v := testkit.StartVersity(t)
	t.Run("size", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		s := openS3(t, v.Endpoint, "flush-bytes=4KiB&flush-interval=1h")
		s.c.Prefix = "size"
		a := testkit.NewAcks()
		evs := testkit.Events("t", "s", 1, 40) // about 40 × 700 bytes
		for i := 0; i < 40; i += 4 {
			if err := s.Write(ctx, sinkapi.Batch{Events: evs[i : i+4]}, a.Ack(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		// Without Flush: buffers past 4 KiB are uploaded on their own.
		eventually.True(t, 30*time.Second, "size-triggered uploads", func() bool { return len(v.Objects(t, "size/")) >= 5 })
		eventually.True(t, 30*time.Second, "acks", func() bool { return len(a.All()) >= 5 })
		for id, n := range a.All() {
			if _, err := a.Get(id); n != 1 || err != nil {
				t.Fatalf("batch %s: %d acks, %v", id, n, err)
			}
		}
	})
	t.Run("interval", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		s := openS3(t, v.Endpoint, "flush-interval=200ms")
		s.c.Prefix = "interval"
		a := testkit.NewAcks()
		if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 3)}, a.Ack("b")); err != nil {
			t.Fatal(err)
		}
		if err := a.WaitAck(t, "b"); err != nil {
			t.Fatal(err)
		}
		if keys := v.Objects(t, "interval/"); len(keys) != 1 {
			t.Fatalf("keys %v", keys)
		}
	})
	t.Run("close", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		s := openS3(t, v.Endpoint, "flush-interval=1h")
		s.c.Prefix = "close"
		a := testkit.NewAcks()
		if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 3)}, a.Ack("b")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := a.Get("b"); n != 1 || err != nil {
			t.Fatalf("%d acks, %v", n, err)
		}
		if keys := v.Objects(t, "close/"); len(keys) != 1 {
			t.Fatalf("keys %v", keys)
		}
		if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 9, 1)}, a.Ack("late")); !errors.Is(err, sinkapi.ErrClosed) {
			t.Fatalf("Write after Close: %v", err)
		}
	})
}

// TestS3RetriesServerErrorsAndSlowResponses puts a fault proxy in front of
// versitygw: 503s, throttling and a slow response, then success.
func TestS3RetriesServerErrorsAndSlowResponses(t *testing.T) {
	v := testkit.StartVersity(t)
	px := testkit.StartProxy(t, v.Endpoint)
	var n atomic.Int32
	px.SetFault(func(w http.ResponseWriter, r *http.Request, forward func(http.ResponseWriter)) bool {
		if r.Method != http.MethodPut {
			return false
		}
		switch n.Add(1) {
		case 1:
			http.Error(w, "<Error><Code>ServiceUnavailable</Code></Error>", http.StatusServiceUnavailable)
			return true
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>`)
			return true
		case 3:
			time.Sleep(300 * time.Millisecond) // slow, then fine
		}
		return false
	})
	ctx := testkit.Ctx(t)
	s, err := New(ctx, objstore.S3Config{Bucket: "archive", Prefix: "faults", Endpoint: px.URL, PathStyle: true, RetryBase: 10 * time.Millisecond}, sinkapi.Options{AWSConfig: testkit.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 5)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	s.Flush(ctx)
	if c, err := a.Get("b"); c != 1 || err != nil {
		t.Fatalf("%d acks, %v", c, err)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("%d PUT attempts, want 3", got)
	}
	if ids := v.AllEventIDs(t, "faults/"); len(ids) != 5 {
		t.Fatalf("%d events stored", len(ids))
	}
}

func TestS3GivesUpWithAnError(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	for name, endpoint := range map[string]string{
		"always 500":  startFailingProxy(t, v.Endpoint),
		"unreachable": "http://" + testkit.FreePort(t),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := New(ctx, objstore.S3Config{Bucket: "archive", Endpoint: endpoint, PathStyle: true, MaxAttempts: 3, RetryBase: 5 * time.Millisecond}, sinkapi.Options{AWSConfig: testkit.AWSConfig})
			if err != nil {
				t.Fatal(err)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 1)}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			s.Close(ctx)
			if c, err := a.Get("b"); c != 1 || err == nil || !strings.Contains(err.Error(), "attempt 3") || sinkapi.IsPermanent(err) {
				t.Fatalf("%d acks, err %v; want one ack with a non-permanent error after 3 attempts", c, err)
			}
		})
	}
	t.Run("no such bucket is not retried", func(t *testing.T) {
		s, err := New(ctx, objstore.S3Config{Bucket: "missing", Endpoint: v.Endpoint, PathStyle: true, MaxAttempts: 5, RetryBase: time.Second}, sinkapi.Options{AWSConfig: testkit.AWSConfig})
		if err != nil {
			t.Fatal(err)
		}
		a := testkit.NewAcks()
		s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 1)}, a.Ack("b"))
		s.Close(ctx)
		if c, err := a.Get("b"); c != 1 || err == nil || !strings.Contains(err.Error(), "attempt 1") || !sinkapi.IsPermanent(err) {
			t.Fatalf("%d acks, err %v; want one ack with a permanent error after 1 attempt", c, err)
		}
	})
}

func startFailingProxy(t testing.TB, target string) string {
	px := testkit.StartProxy(t, target)
	px.SetFault(func(w http.ResponseWriter, r *http.Request, _ func(http.ResponseWriter)) bool {
		http.Error(w, "boom", http.StatusInternalServerError)
		return true
	})
	return px.URL
}

// TestS3BackpressureAndNoEarlyAck holds every PUT at a proxy: the sink must
// not acknowledge anything, Write must block once max-buffer-bytes are
// held (returning the context's error), and once PUTs go through every batch
// Write took is acknowledged, its events stored.
func TestS3BackpressureAndNoEarlyAck(t *testing.T) {
	v := testkit.StartVersity(t)
	px := testkit.StartProxy(t, v.Endpoint)
	release := make(chan struct{})
	px.SetFault(func(w http.ResponseWriter, r *http.Request, forward func(http.ResponseWriter)) bool {
		if r.Method == http.MethodPut {
			<-release
		}
		return false
	})
	ctx := testkit.Ctx(t)
	s := openS3(t, px.URL, "flush-bytes=2KiB&max-buffer-bytes=8KiB&flush-interval=1h")
	s.c.Prefix = "bp"
	a := testkit.NewAcks()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	taken := 0
	var werr error
	for i := 0; i < 100; i++ {
		if werr = s.Write(wctx, sinkapi.Batch{Events: testkit.Events("t", "s", i*2, 2)}, a.Ack(fmt.Sprint(i))); werr != nil {
			break
		}
		taken++
	}
	if !errors.Is(werr, context.DeadlineExceeded) {
		t.Fatalf("Write never blocked: %v after %d batches", werr, taken)
	}
	if n := len(a.All()); n != 0 {
		t.Fatalf("%d batches acknowledged while no PUT had completed", n)
	}
	close(release)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < taken; i++ {
		if n, err := a.Get(fmt.Sprint(i)); n != 1 || err != nil {
			t.Fatalf("batch %d: %d acks, %v", i, n, err)
		}
	}
	if got := len(v.AllEventIDs(t, "bp/")); got != taken*2 {
		t.Fatalf("%d events stored, want %d", got, taken*2)
	}
}

// TestS3ForgetsIdleShards: the state of a shard the sink holds nothing for
// is dropped after a long idle time (shards close every few hours; an
// archiver running for months must not keep one per shard it ever saw),
// also while other writes run, and a later Write to it starts afresh
// without losing anything.
func TestS3ForgetsIdleShards(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	s := openS3(t, v.Endpoint, "flush-interval=1h")
	s.c.Prefix = "idle"
	var clock atomic.Int64
	clock.Store(testkit.Start.UnixNano())
	s.now = func() time.Time { return time.Unix(0, clock.Load()) }
	a := testkit.NewAcks()
	write := func(id, shard string, first int) {
		t.Helper()
		if err := s.Write(ctx, sinkapi.Batch{ShardID: shard, Events: testkit.Events("sessions", shard, first, 3)}, a.Ack(id)); err != nil {
			t.Fatal(err)
		}
	}
	write("a1", "shardId-a", 0)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.forgetIdleShards(s.now())
	if n := len(s.shards); n != 1 {
		t.Fatalf("%d shard states right after a write, want 1", n)
	}
	clock.Add(int64(s.shardIdleAfter()))
	s.forgetIdleShards(s.now())
	if n := len(s.shards); n != 0 {
		t.Fatalf("%d shard states after %v idle, want 0", n, s.shardIdleAfter())
	}

	// Writes to many shards while their states are being forgotten: every
	// event still lands once acknowledged.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				s.forgetIdleShards(s.now().Add(24 * time.Hour))
			}
		}
	}()
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			shard := fmt.Sprintf("shardId-%d", g)
			for i := 0; i < 5; i++ {
				write(fmt.Sprintf("%d-%d", g, i), shard, 100+i*3)
				if i%2 == 1 {
					if err := s.Flush(ctx); err != nil {
						t.Error(err)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for id, n := range a.All() {
		if n != 1 {
			t.Errorf("batch %s acknowledged %d times", id, n)
		}
		if _, err := a.Get(id); err != nil {
			t.Errorf("batch %s: %v", id, err)
		}
	}
	if n := len(a.All()); n != 41 {
		t.Fatalf("%d batches acknowledged, want 41", n)
	}
	ids := v.AllEventIDs(t, "idle/")
	if len(ids) != 3+8*15 {
		t.Fatalf("%d distinct events in S3, want %d", len(ids), 3+8*15)
	}
}

// TestS3ClientSendsThroughSDKHTTP: the S3 client, whichever AWS
// configuration it was made from, sends through sdkhttp (see that
// package for the race it closes).
func TestS3ClientSendsThroughSDKHTTP(t *testing.T) {
	c, err := NewClient(testkit.Ctx(t), objstore.S3Config{Bucket: "b", Endpoint: "http://127.0.0.1:1"}, sinkapi.Options{AWSConfig: testkit.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	if hc := c.Options().HTTPClient; sdkhttp.Client(hc) != hc {
		t.Fatalf("HTTP client %T is not sdkhttp's", hc)
	}
}
