package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/natstest"
	"github.com/ttl-archiver/archiver/internal/s3test"
	"github.com/ttl-archiver/archiver/manifest"
)

// ---- versitygw: the real S3-compatible server (posix backend) ----
//
// internal/s3test starts it, as for every other package's tests.

const (
	s3AccessKey = s3test.AccessKey
	s3SecretKey = s3test.SecretKey
	s3Bucket    = s3test.Bucket
)

// startVersity starts versitygw with the bucket s3Bucket and returns its
// endpoint and a client.
func startVersity(t testing.TB) (string, *s3.Client) {
	t.Helper()
	srv := s3test.Start(t)
	return srv.Endpoint, srv.Client
}

// s3Config is an aws.Config loader with the server's credentials.
func s3Config(ctx context.Context, region string) (aws.Config, error) {
	return s3test.AWSConfig(ctx, region)
}

func s3Client(endpoint string) *s3.Client { return s3test.NewClient(endpoint) }

// s3Reader reads the S3 sink's objects into a tally, each object once.
type s3Reader struct {
	client  *s3.Client
	prefix  string
	seen    map[string]bool
	tally   *tally
	keys    []string
	objects int
}

func newS3Reader(c *s3.Client, prefix string) *s3Reader {
	return &s3Reader{client: c, prefix: prefix, seen: map[string]bool{}, tally: newTally()}
}

// poll lists the bucket and decodes the objects not read before (gzip
// JSONL archive lines).
func (r *s3Reader) poll(t testing.TB, ctx context.Context) error {
	var token *string
	for {
		out, err := r.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s3Bucket), Prefix: aws.String(r.prefix), ContinuationToken: token})
		if err != nil {
			return fmt.Errorf("ListObjectsV2: %w", err)
		}
		for _, o := range out.Contents {
			key := aws.ToString(o.Key)
			if r.seen[key] || strings.Contains(key, "/_archiver/") || strings.Contains(key, "/"+manifest.Dir) {
				continue // the preflight marker and the coverage manifests hold no archive lines
			}
			if err := r.read(t, ctx, key); err != nil {
				return err
			}
			r.seen[key] = true
			r.keys = append(r.keys, key)
			r.objects++
		}
		if out.NextContinuationToken == nil {
			return nil
		}
		token = out.NextContinuationToken
	}
}

func (r *s3Reader) read(t testing.TB, ctx context.Context, key string) error {
	out, err := r.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("GetObject %s: %w", key, err)
	}
	defer out.Body.Close()
	if filepath.Ext(key) != ".gz" {
		t.Errorf("object %s: want a .jsonl.gz key", key)
	}
	if ce := aws.ToString(out.ContentEncoding); ce != "gzip" {
		t.Errorf("object %s: Content-Encoding %q, want gzip", key, ce)
	}
	zr, err := gzip.NewReader(out.Body)
	if err != nil {
		return fmt.Errorf("object %s: gzip: %w", key, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("object %s: gunzip: %w", key, err)
	}
	before := r.tally.torn
	decodeLines(t, data, r.tally)
	if r.tally.torn != before {
		t.Errorf("object %s holds lines that do not decode", key)
	}
	return nil
}

// ---- NATS: an embedded server with JetStream ----

// startNATS starts a nats-server with JetStream (internal/natstest) and
// returns its host:port.
func startNATS(t testing.TB) string {
	t.Helper()
	return natstest.Start(t).Addr()
}

// startNATSMaxPayload is startNATS with the server's max_payload set to
// maxPayload bytes.
func startNATSMaxPayload(t testing.TB, maxPayload int32) string {
	t.Helper()
	return natstest.Start(t, func(o *server.Options) { o.MaxPayload = maxPayload }).Addr()
}

// natsClient connects a plain client for set-up and checks.
func natsClient(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	_, js := natstest.Connect(t, url)
	return js
}

// jsMessages is what a JetStream stream holds: deliveries per key and per
// Nats-Msg-Id, and kinds by header.
type jsMessages struct {
	tally    *tally
	msgIDs   map[string]int
	kinds    map[string]int // Archiver-Kind header → messages
	subjects map[string]int
}

// readStream reads every message of st and decodes its envelope payload.
func readStream(t testing.TB, ctx context.Context, st jetstream.Stream) *jsMessages {
	t.Helper()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := int(info.State.Msgs)
	res := &jsMessages{tally: newTally(), msgIDs: map[string]int{}, kinds: map[string]int{}, subjects: map[string]int{}}
	if want == 0 {
		return res
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	deadline := time.Now().Add(60 * time.Second)
	for n < want && time.Now().Before(deadline) {
		batch, err := cons.Fetch(min(want-n, 2000), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			n++
			res.msgIDs[m.Headers().Get("Nats-Msg-Id")]++
			res.kinds[m.Headers().Get("Archiver-Kind")]++
			res.subjects[m.Subject()]++
			ev, err := event.DecodeLine(m.Data())
			if err != nil {
				t.Errorf("JetStream message on %s does not decode: %v", m.Subject(), err)
				continue
			}
			res.tally.add(&ev)
		}
	}
	if n < want {
		t.Fatalf("read %d of %d JetStream messages", n, want)
	}
	return res
}
