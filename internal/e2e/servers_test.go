package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/event"
)

// ---- versitygw: the real S3-compatible server (posix backend) ----

const (
	s3AccessKey = "AKIAE2EARCHIVER"
	s3SecretKey = "e2e-secret-key-for-versitygw-only"
	s3Bucket    = "archive"
)

var (
	versityOnce sync.Once
	versityBin  string
	versityErr  error
)

// versitygwBinary finds versitygw on $PATH or in .tools/bin (where `make
// tools` puts it), building it from the pinned tools/go.mod otherwise. The
// test is skipped, loudly, when none of that works (offline, no cache).
func versitygwBinary(t testing.TB) string {
	t.Helper()
	root := moduleRoot(t)
	versityOnce.Do(func() {
		if p, err := exec.LookPath("versitygw"); err == nil {
			versityBin = p
			return
		}
		p := filepath.Join(root, ".tools", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			versityBin = p
			return
		}
		cmd := exec.Command("go", "build", "-modfile=tools/go.mod", "-o", p, "github.com/versity/versitygw/cmd/versitygw")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			versityErr = fmt.Errorf("building versitygw from tools/go.mod: %v\n%s", err, out)
			return
		}
		versityBin = p
	})
	if versityErr != nil {
		t.Skipf("SKIPPING: versitygw is not on $PATH or in .tools/bin and could not be built (offline?); run `make tools`. %v", versityErr)
	}
	return versityBin
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startVersity starts versitygw on a free loopback port with a fresh
// directory as its backend and creates the bucket; it returns the endpoint
// and a client.
func startVersity(t testing.TB) (string, *s3.Client) {
	t.Helper()
	bin := versitygwBinary(t)
	root := t.TempDir()
	for attempt := 0; ; attempt++ {
		addr := freeAddr(t)
		var out bytes.Buffer
		cmd := exec.Command(bin, "--access", s3AccessKey, "--secret", s3SecretKey, "--port", addr, "--quiet", "posix", root)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() { _ = cmd.Process.Kill(); <-exited }
		if waitListening(addr, exited) {
			t.Cleanup(stop)
			endpoint := "http://" + addr
			client := s3Client(endpoint)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s3Bucket)}); err != nil {
				t.Fatalf("CreateBucket: %v", err)
			}
			return endpoint, client
		}
		stop()
		if attempt == 2 {
			t.Fatalf("versitygw did not start: %s", out.String())
		}
	}
}

func waitListening(addr string, exited chan struct{}) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

func s3Config(_ context.Context, region string) (aws.Config, error) {
	return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(s3AccessKey, s3SecretKey, "")}, nil
}

func s3Client(endpoint string) *s3.Client {
	cfg, _ := s3Config(context.Background(), "us-east-1")
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
}

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
			if r.seen[key] || strings.Contains(key, "/_archiver/") {
				continue // the sink's preflight marker holds no archive lines
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

// startNATS starts an embedded nats-server with JetStream (storing in a
// temporary directory) on a free loopback port and returns its URL.
func startNATS(t testing.TB) string {
	t.Helper()
	return startNATSMaxPayload(t, 0)
}

// startNATSMaxPayload is startNATS with the server's max_payload set to
// maxPayload bytes (0: the server's default, 1 MiB).
func startNATSMaxPayload(t testing.TB, maxPayload int32) string {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true, MaxPayload: maxPayload}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server not ready within 30s")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return fmt.Sprintf("127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
}

// natsClient connects a plain client for set-up and checks.
func natsClient(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("nats://" + url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
