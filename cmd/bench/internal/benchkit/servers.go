package benchkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	natsserver "github.com/nats-io/nats-server/v2/server"
)

// The credentials versitygw runs with, and Bucket, the bucket the
// sections archive into.
const (
	S3Key    = "AKIABENCHARCHIVER"
	S3Secret = "bench-secret-for-versitygw-only"
	Bucket   = "bench"
)

// ModuleRoot finds the directory holding go.mod, from the working
// directory up.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("go.mod not found above " + dir)
		}
	}
}

// GoBuild builds package pkg of the module (e.g. "./cmd/archiver") into
// the binary out, with env added to this process's environment and args
// before the package (e.g. "-trimpath").
func GoBuild(ctx context.Context, out, pkg string, env []string, args ...string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, args...), "-o", out, pkg)...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// BuildArchiver builds the archiver binary into dir, like `make build`,
// and returns its path.
func BuildArchiver(ctx context.Context, dir string) (string, error) {
	return buildCommand(ctx, dir, "archiver")
}

// BuildEngine builds archiver-engine, the engine's slim binary, into dir,
// like `make build`, and returns its path.
func BuildEngine(ctx context.Context, dir string) (string, error) {
	return buildCommand(ctx, dir, "archiver-engine")
}

// buildCommand builds ./cmd/NAME into dir/NAME as `make build` does:
// static (CGO_ENABLED=0), -trimpath.
func buildCommand(ctx context.Context, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	return bin, GoBuild(ctx, bin, "./cmd/"+name, []string{"CGO_ENABLED=0"}, "-trimpath")
}

// FreeAddr is a loopback address with a port free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreePort is a loopback port free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Watch waits for started cmd in the background: exited closes when it
// exits; kill kills it unless it did, and waits for it.
func Watch(cmd *exec.Cmd) (exited <-chan struct{}, kill func()) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return done, func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

// StartNATS runs a nats-server with JetStream in this process, storing in
// dir, and waits until it takes connections. The caller shuts it down.
func StartNATS(dir string) (*natsserver.Server, error) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: dir, NoLog: true, NoSigs: true, JetStreamMaxStore: 8 << 30})
	if err != nil {
		return nil, err
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("nats-server not ready")
	}
	return ns, nil
}

// Versitygw finds the versitygw binary on $PATH or in the module's
// .tools/bin (`make tools` puts it there).
func Versitygw() (string, error) {
	if bin, err := exec.LookPath("versitygw"); err == nil {
		return bin, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, ".tools", "bin", "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return "", errors.New("versitygw not found on PATH or in .tools/bin: run `make tools`")
	}
	return bin, nil
}

// StartVersitygw runs versitygw with a posix backend in dir on a free
// loopback port, with the credentials S3Key and S3Secret, and returns its
// endpoint once it listens.
func StartVersitygw(ctx context.Context, dir string) (endpoint string, stop func(), err error) {
	bin, err := Versitygw()
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--access", S3Key, "--secret", S3Secret, "--port", addr, "--quiet", "posix", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited, kill := Watch(cmd)
	if err := waitListening(ctx, addr, exited, 30*time.Second); err != nil {
		kill()
		return "", nil, fmt.Errorf("versitygw: %w: %s", err, out.String())
	}
	return "http://" + addr, kill, nil
}

// waitListening waits until addr takes TCP connections, failing when
// exited closes, ctx ends or after d.
func waitListening(ctx context.Context, addr string, exited <-chan struct{}, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("did not listen within %s", d)
		}
	}
}

// S3 is a client of versitygw at endpoint (path-style, its credentials).
func S3(endpoint string) *s3.Client {
	return s3.NewFromConfig(aws.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(S3Key, S3Secret, "")},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(endpoint); o.UsePathStyle = true })
}

// CreateBucket creates Bucket at versitygw's endpoint.
func CreateBucket(ctx context.Context, endpoint string) error {
	if _, err := S3(endpoint).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)}); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	return nil
}
