// Package s3test starts versitygw, a real S3 server (posix backend in a
// temporary directory), for tests of the packages that write and read S3
// archives. It imports nothing of ours, so any package's tests may use it.
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

// The credentials versitygw is started with.
const (
	AccessKey = "AKIATESTARCHIVER"
	SecretKey = "test-secret-key-for-versitygw-only"
)

// Bucket is the bucket Start creates.
const Bucket = "archive"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// moduleRoot is the directory holding go.mod and tools/go.mod.
func moduleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "tools", "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return filepath.Dir(dir)
		}
	}
}

// Binary finds versitygw on $PATH or in .tools/bin, building it from
// tools/go.mod (the pinned version) when it is in neither place; it skips
// the test when it cannot.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if p, err := exec.LookPath("versitygw"); err == nil {
			binPath = p
			return
		}
		root := moduleRoot()
		p := filepath.Join(root, ".tools", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			binPath = p
			return
		}
		cmd := exec.Command("go", "build", "-modfile=tools/go.mod", "-o", p, "github.com/versity/versitygw/cmd/versitygw")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("building versitygw from tools/go.mod: %v\n%s", err, out)
			return
		}
		binPath = p
	})
	if binErr != nil {
		t.Skipf("SKIPPING S3 TESTS: versitygw is not on $PATH or in .tools/bin and could not be built (offline?); run `make tools`. %v", binErr)
	}
	return binPath
}

// Server is a running versitygw with the bucket Bucket.
type Server struct {
	// Endpoint is its base URL (http://127.0.0.1:PORT).
	Endpoint string
	// Client is a path-style client with the SDK's retries off.
	Client *s3.Client
}

// Start runs versitygw on a free loopback port until the test ends and
// creates the bucket Bucket.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	root := t.TempDir()
	var out bytes.Buffer
	for attempt := 0; ; attempt++ {
		addr := freePort(t)
		cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "--quiet", "posix", root)
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
			s := &Server{Endpoint: "http://" + addr}
			s.Client = NewClient(s.Endpoint)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)}); err != nil {
				t.Fatalf("CreateBucket: %v", err)
			}
			return s
		}
		stop()
		if attempt == 4 {
			t.Fatalf("versitygw did not start: %s", out.String())
		}
	}
}

// AWSConfig is an aws.Config loader with the server's static credentials,
// for sinks.Options.AWSConfig and the like.
func AWSConfig(_ context.Context, region string) (aws.Config, error) {
	return aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}, nil
}

// NewClient returns a path-style client of endpoint with the server's
// credentials and the SDK's retries off, through internal/sdkhttp (without
// it, and without retries, the SDK's "use of closed network connection"
// race would fail a call now and then).
func NewClient(endpoint string) *s3.Client {
	cfg, _ := AWSConfig(context.Background(), "us-east-1")
	cfg.HTTPClient = sdkhttp.Client(nil)
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.RetryMaxAttempts = 1
	})
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

// waitListening reports whether versitygw, started on addr, answers HTTP
// there. A free port can be taken by another test's server between
// freePort closing it and versitygw binding it (CI saw nats-server on it);
// whatever holds it then does not answer HTTP, versitygw exits on its bind
// error, and the caller tries another port.
func waitListening(addr string, exited chan struct{}) bool {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hc.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			// Another test's HTTP server may hold the port while ours
			// fails to bind it: ours exits at once on that error.
			select {
			case <-exited:
				return false
			case <-time.After(200 * time.Millisecond):
				return true
			}
		}
		select {
		case <-exited:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}
