package sinks

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/s3test"
)

// The credentials the test versitygw runs with (internal/s3test).
const (
	testAccessKey = s3test.AccessKey
	testSecretKey = s3test.SecretKey
)

// versity is a versitygw process (posix backend in a temporary directory)
// on a free loopback port, with the bucket "archive".
type versity struct {
	endpoint string
	client   *s3.Client
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startVersity starts versitygw through internal/s3test, the one copy of
// that start-up shared with other packages' tests.
func startVersity(t testing.TB) *versity {
	t.Helper()
	srv := s3test.Start(t)
	return &versity{endpoint: srv.Endpoint, client: srv.Client}
}

func testAWSConfig(ctx context.Context, region string) (aws.Config, error) {
	return s3test.AWSConfig(ctx, region)
}

// objects lists every key under prefix, sorted.
func (v *versity) objects(t testing.TB, prefix string) []string {
	t.Helper()
	var keys []string
	var token *string
	for {
		out, err := v.client.ListObjectsV2(testCtx(t), &s3.ListObjectsV2Input{Bucket: aws.String("archive"), Prefix: aws.String(prefix), ContinuationToken: token})
		if err != nil {
			t.Fatalf("ListObjectsV2: %v", err)
		}
		for _, o := range out.Contents {
			keys = append(keys, *o.Key)
		}
		if out.NextContinuationToken == nil {
			break
		}
		token = out.NextContinuationToken
	}
	sort.Strings(keys)
	return keys
}

// read returns an object's decompressed archive lines, decoded.
func (v *versity) read(t testing.TB, key string) ([]event.Event, *s3.GetObjectOutput) {
	t.Helper()
	out, err := v.client.GetObject(testCtx(t), &s3.GetObjectInput{Bucket: aws.String("archive"), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	raw, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = bytes.NewReader(raw)
	switch {
	case strings.HasSuffix(key, ".gz"):
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		r = zr
	case strings.HasSuffix(key, ".zst"):
		zr, err := zstd.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	var evs []event.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		e, err := event.DecodeLine(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return evs, out
}

// allEventIDs reads every object under prefix and counts event IDs.
func (v *versity) allEventIDs(t testing.TB, prefix string) map[string]int {
	t.Helper()
	ids := map[string]int{}
	for _, k := range v.objects(t, prefix) {
		evs, _ := v.read(t, k)
		for _, e := range evs {
			ids[e.EventID]++
		}
	}
	return ids
}

// proxy is an HTTP reverse proxy in front of versitygw that records the
// requests it forwards and injects faults versitygw cannot produce.
type proxy struct {
	url string
	mu  sync.Mutex
	// requests seen (method, path, headers), in order.
	seen []*http.Request
	// fault, when set, may answer a request itself (return true).
	fault atomic.Value // func(w http.ResponseWriter, r *http.Request, forward func()) bool
}

type faultFunc func(w http.ResponseWriter, r *http.Request, forward func(w http.ResponseWriter)) bool

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &proxy{}
	p.fault.Store(faultFunc(nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Clone(context.Background()))
		p.mu.Unlock()
		forward := func(w http.ResponseWriter) { rp.ServeHTTP(w, r) }
		if f := p.fault.Load().(faultFunc); f != nil && f(w, r, forward) {
			return
		}
		forward(w)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	p.url = "http://" + l.Addr().String()
	return p
}

func (p *proxy) setFault(f faultFunc) { p.fault.Store(f) }

func (p *proxy) puts() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*http.Request
	for _, r := range p.seen {
		if r.Method == http.MethodPut {
			out = append(out, r)
		}
	}
	return out
}
