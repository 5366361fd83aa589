package testkit

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
	"github.com/ttl-archiver/archiver/parquetline"
)

// The credentials the test versitygw runs with (internal/s3test).
const (
	AccessKey = s3test.AccessKey
	SecretKey = s3test.SecretKey
)

// Versity is a versitygw process (posix backend in a temporary directory)
// on a free loopback port, with the bucket "archive".
type Versity struct {
	// Endpoint is the server's http:// URL; Client an S3 client of it.
	Endpoint string
	Client   *s3.Client
}

// FreePort returns a loopback address no one listens on now.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// StartVersity starts versitygw through internal/s3test, the one copy of
// that start-up shared with other packages' tests.
func StartVersity(t testing.TB) *Versity {
	t.Helper()
	srv := s3test.Start(t)
	return &Versity{Endpoint: srv.Endpoint, Client: srv.Client}
}

// AWSConfig is the SDK configuration of the test versitygw's credentials
// (internal/s3test).
func AWSConfig(ctx context.Context, region string) (aws.Config, error) {
	return s3test.AWSConfig(ctx, region)
}

// Objects lists every key under prefix, sorted.
func (v *Versity) Objects(t testing.TB, prefix string) []string {
	t.Helper()
	var keys []string
	var token *string
	for {
		out, err := v.Client.ListObjectsV2(Ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("archive"), Prefix: aws.String(prefix), ContinuationToken: token})
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

// Read returns an object's decompressed archive lines (a Parquet
// object's rows as their lines), decoded.
func (v *Versity) Read(t testing.TB, key string) ([]event.Event, *s3.GetObjectOutput) {
	t.Helper()
	out, err := v.Client.GetObject(Ctx(t), &s3.GetObjectInput{Bucket: aws.String("archive"), Key: aws.String(key)})
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
	case strings.HasSuffix(key, parquetline.Ext):
		var lines []byte
		if err := parquetline.Lines(raw, func(_ int, l []byte) error {
			lines = append(append(lines, l...), '\n')
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		r = bytes.NewReader(lines)
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

// AllEventIDs reads every object under prefix and counts event IDs.
func (v *Versity) AllEventIDs(t testing.TB, prefix string) map[string]int {
	t.Helper()
	ids := map[string]int{}
	for _, k := range v.Objects(t, prefix) {
		evs, _ := v.Read(t, k)
		for _, e := range evs {
			ids[e.EventID]++
		}
	}
	return ids
}

// Proxy is an HTTP reverse proxy in front of versitygw that records the
// requests it forwards and injects faults versitygw cannot produce.
type Proxy struct {
	URL string
	mu  sync.Mutex
	// requests seen (method, path, headers), in order.
	seen []*http.Request
	// fault, when set, may answer a request itself (return true).
	fault atomic.Value // func(w http.ResponseWriter, r *http.Request, forward func()) bool
}

// FaultFunc may answer a request itself (and returns true), or forward
// it and look at the answer.
type FaultFunc func(w http.ResponseWriter, r *http.Request, forward func(w http.ResponseWriter)) bool

// StartProxy starts a proxy in front of target, closed with the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &Proxy{}
	p.fault.Store(FaultFunc(nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Clone(context.Background()))
		p.mu.Unlock()
		forward := func(w http.ResponseWriter) { rp.ServeHTTP(w, r) }
		if f := p.fault.Load().(FaultFunc); f != nil && f(w, r, forward) {
			return
		}
		forward(w)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	p.URL = "http://" + l.Addr().String()
	return p
}

// SetFault makes f the proxy's fault (nil: none).
func (p *Proxy) SetFault(f FaultFunc) { p.fault.Store(f) }

// Puts returns the PUT requests forwarded, in order.
func (p *Proxy) Puts() []*http.Request {
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
