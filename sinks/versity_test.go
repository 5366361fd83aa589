package sinks

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/ttl-archiver/archiver/event"
)

const (
	testAccessKey = "AKIATESTARCHIVER"
	testSecretKey = "test-secret-key-for-versitygw-only"
)

var (
	versityOnce sync.Once
	versityBin  string
	versityErr  error
)

// moduleRoot is the directory holding go.mod (tests run in sinks/).
func moduleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "tools", "go.mod")); err == nil {
				return d
			}
		}
		if filepath.Dir(d) == d {
			return filepath.Dir(dir)
		}
	}
}

// versitygwBinary finds versitygw on $PATH or in .tools/bin, building it
// from tools/go.mod (the pinned version) when it is in neither place.
func versitygwBinary(t testing.TB) string {
	t.Helper()
	versityOnce.Do(func() {
		if p, err := exec.LookPath("versitygw"); err == nil {
			versityBin = p
			return
		}
		root := moduleRoot()
		p := filepath.Join(root, ".tools", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			versityBin = p
			return
		}
		cmd := exec.Command("go", "build", "-modfile=tools/go.mod", "-o", p, "github.com/versity/versitygw/cmd/versitygw")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			versityErr = fmt.Errorf("building versitygw from tools/go.mod: %v\n%s", err, out)
			return
		}
		versityBin = p
	})
	if versityErr != nil {
		t.Skipf("SKIPPING S3 TESTS: versitygw is not on $PATH or in .tools/bin and could not be built (offline?); run `make tools`. %v", versityErr)
	}
	return versityBin
}

// versity is a versitygw process (posix backend in a temporary directory)
// on a free loopback port.
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

func startVersity(t testing.TB) *versity {
	t.Helper()
	bin := versitygwBinary(t)
	root := t.TempDir()
	var addr string
	var out bytes.Buffer
	for attempt := 0; ; attempt++ {
		addr = freePort(t)
		cmd := exec.Command(bin, "--access", testAccessKey, "--secret", testSecretKey, "--port", addr, "--quiet", "posix", root)
		out.Reset()
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
		}()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		if waitListening(addr, exited) {
			t.Cleanup(stop)
			break
		}
		stop()
		if attempt == 2 {
			t.Fatalf("versitygw did not start: %s", out.String())
		}
	}
	v := &versity{endpoint: "http://" + addr}
	v.client = v.newClient(v.endpoint)
	if _, err := v.client.CreateBucket(testCtx(t), &s3.CreateBucketInput{Bucket: aws.String("archive")}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	return v
}

func waitListening(addr string, exited chan struct{}) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
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

func testAWSConfig(ctx context.Context, region string) (aws.Config, error) {
	return aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, ""),
	}, nil
}

func (v *versity) newClient(endpoint string) *s3.Client {
	cfg, _ := testAWSConfig(context.Background(), "us-east-1")
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.RetryMaxAttempts = 1
	})
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
