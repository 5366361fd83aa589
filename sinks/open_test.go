package sinks

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/natssink"
	"github.com/ttl-archiver/archiver/sinkurl"
)

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		url, want string
	}{
		{"s3://b/p?compression=lz4", `sink "s3://b/p?compression=lz4": bucket: "b" is not a valid bucket name`},
		{"s3://bucket/p?compression=lz4", `sink "s3://bucket/p?compression=lz4": compression: must be gzip, zstd or none`},
		{"s3://bucket/p?flush-bytes=lots", `flush-bytes: "lots" is not a size`},
		{"s3://bucket/p?flush-interval=0s", `flush-interval: 0s is out of range`},
		{"s3://bucket/p?sse=des", `sse: must be AES256 or aws:kms`},
		{"s3://bucket/p?kms-key-id=k", `kms-key-id: needs sse=aws:kms`},
		{"s3://bucket/p?storage-class=COLD", `storage-class: "COLD" is not one of`},
		{"s3://bucket/p?endpoint=localhost:9000", `endpoint: "localhost:9000" is not an http:// or https:// URL`},
		{"s3://bucket/p?region=eu-west-1.evil.example", `region: "eu-west-1.evil.example" is not a region name like eu-west-1`},
		{"s3://bucket/p?region=EU-WEST-1", `region: "EU-WEST-1" is not a region name`},
		{"s3://bucket/p?path-style=maybe", `path-style: "maybe" is not true or false`},
		{"s3://bucket/p?region=a&region=b", `region: given more than once`},
		{"s3://bucket/p?colour=red", `colour: unknown parameter for s3:// (known: `},
		{"s3://bucket/p?pathstyle=true", `pathstyle: unknown parameter for s3://; did you mean path-style? (known: `},
		{"s3://bucket/p?Path-Style=true", `Path-Style: unknown parameter for s3://; did you mean path-style?`},
		{"s3://bucket/p?path_style=true", `path_style: unknown parameter for s3://; did you mean path-style?`},
		{"s3://bucket/p?flushinterval=5s", `flushinterval: unknown parameter for s3://; did you mean flush-interval?`},
		{"s3://bucket/p?regoin=eu-west-1", `regoin: unknown parameter for s3://; did you mean region?`},
		{"s3://bucket/p?Events=all", `Events: unknown parameter for s3://; did you mean events?`},
		{"nats://127.0.0.1:4222?pathstyle=true", `pathstyle: unknown parameter for nats:// (known: `},
		{"nats://127.0.0.1:4222?createstream=X", `createstream: unknown parameter for nats://; did you mean create-stream?`},
		{"file://" + dir + "?filemode=0600", `filemode: unknown parameter for file://; did you mean file-mode?`},
		{"s3:///p", `bucket: missing`},
		{"s3://key:secret@bucket/p", `credentials do not belong`},
		{"s3://bucket/a//b", `prefix: "a//b" contains an empty path segment`},
		{"s3://bucket/p?max-attempts=0", `max-attempts: 0 is out of range`},
		{"s3://bucket/p?manifests=sometimes", `manifests: "sometimes" is not true or false`},
		{"s3://bucket/p?manifest-objects=0", `manifest-objects: 0 is out of range [1, 1000000]`},
		{"s3://bucket/p?manifest-interval=10ms", `manifest-interval: 10ms is out of range [1s, 6h0m0s]`},
		{"s3://bucket/p?manifest-interval=often", `manifest-interval: "often" is not a duration`},
		{"s3://bucket/p?manifests=false&manifest-objects=5", `manifest-objects: has no effect with manifests=false`},
		{"nats://127.0.0.1:4222?subject=a..b", `subject: `},
		{"nats://127.0.0.1:4222?subject=a.{table", `subject: `},
		{"nats://127.0.0.1:4222?subject=a.*", `subject: `},
		{"nats://127.0.0.1:4222?subject=a b", `subject: `},
		{"nats://127.0.0.1:4222?jetstream=false&create-stream=X", `create-stream: needs jetstream=true`},
		{"nats://127.0.0.1:4222?create-stream=a.b", `create-stream: "a.b" is not a valid stream name`},
		{"nats://127.0.0.1:4222?token=s3cret&nkey=/x", `creds: give one of`},
		{"nats://127.0.0.1:4222?tls-cert=/c", `tls-cert: tls-cert and tls-key go together`},
		{"nats://127.0.0.1:4222?format=xml", `format: must be cloudevents, envelope or item`},
		{"nats://127.0.0.1:4222/path", `path: a nats:// URL has no path`},
		{"nats://", `host: missing`},
		{"nats://127.0.0.1:4222?max-in-flight=-1", `max-in-flight: -1 is out of range`},
		{"nats://127.0.0.1:4222?token=s3cret&bogus=1", `bogus: unknown parameter for nats://`},
		{"file://" + dir + "?events=expired,gone", `events: "gone" is not a kind`},
		{"file://" + dir + "?events=expired,expired", `events: "expired" listed twice`},
		{"file://" + dir + "?format=item", `format: must be ndjson or parquet`},
		{"file://", `path: missing path`},
		{"stdout://somewhere", `want stdout://`},
		{"stdout://?format=csv", `format: must be envelope or item`},
		{"kafka://x", `unknown scheme "kafka"`},
		{"no-scheme", `no scheme`},
		{"s3://bucket/p#frag", `fragment: a sink URL has no #fragment`},
		{"%zz", `not a URL`},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			s, _, err := Open(testkit.Ctx(t), tc.url, Options{})
			if err == nil {
				s.Close(testkit.Ctx(t))
				t.Fatalf("Open(%q) succeeded, want error containing %q", tc.url, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) error:\n  %v\nwant it to contain\n  %s", tc.url, err, tc.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

// TestConfigErrorsNeverEchoSecrets: whatever url.Parse makes of a sink URL
// whose password holds '/', '#', '?' or a space, or whose endpoint
// parameter carries KEY:SECRET@, the *ConfigError names the field and the
// host, never the secret.
func TestConfigErrorsNeverEchoSecrets(t *testing.T) {
	tests := []struct{ url, secret, keep string }{
		{"nats://user:pa/ss99@nats.internal:4222?bogus=1", "ss99", "nats.internal"},
		{"nats://user:pa#ss99@nats.internal:4222", "ss99", "nats.internal"},
		{"nats://user:pa?ss99@nats.internal:4222", "ss99", "nats.internal"},
		{"nats://user:pa ss99@nats.internal:4222", "ss99", "nats.internal"},
		{"nats://user:1234/ss99@nats.internal:4222", "ss99", "nats.internal"},
		{"nats://tok/en99@nats.internal:4222", "en99", "nats.internal"},
		{"nats://nats.internal:4222?token=t0k3n99&bogus=1", "t0k3n99", "nats.internal"},
		{"s3://bucket/p?endpoint=http://KEY:S3CR/ET99@minio:9000&compression=lz4", "ET99", "compression"},
		{"s3://bucket/p?endpoint=ftp://KEY:S3CRET99@minio:9000", "S3CRET99", "endpoint"},
		{"s3://KEY:S3CR/ET99@bucket/p", "ET99", "bucket"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			err := Validate(tc.url)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate(%q) = %v, want a *ConfigError", tc.url, err)
			}
			if msg := err.Error(); strings.Contains(msg, tc.secret) || !strings.Contains(msg, tc.keep) {
				t.Fatalf("Validate(%q) error %q: want %q absent and %q present", tc.url, msg, tc.secret, tc.keep)
			}
		})
	}
}

func TestOpenKinds(t *testing.T) {
	dir := t.TempDir()
	for q, want := range map[string][]event.Kind{
		"":                        {event.Expired},
		"?events=deleted,expired": {event.Deleted, event.Expired},
		"?events=all":             event.Kinds,
	} {
		s, kinds, err := Open(testkit.Ctx(t), "file://"+dir+q, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !reflect.DeepEqual(kinds, want) {
			t.Errorf("%s: kinds %v, want %v", q, kinds, want)
		}
		if s.Name() != "file://"+dir {
			t.Errorf("Name() = %q", s.Name())
		}
		s.Close(testkit.Ctx(t))
	}
}

func TestParseS3Defaults(t *testing.T) {
	p, err := sinkurl.Parse("s3://my-bucket/archive/ttl/?endpoint=http://127.0.0.1:7070&path-style=true&sse=aws:kms&kms-key-id=alias/x&storage-class=STANDARD_IA&flush-bytes=1MiB&flush-interval=5s&compression=zstd")
	if err != nil {
		t.Fatal(err)
	}
	c, err := objstore.ParseS3(p)
	if err != nil {
		t.Fatal(err)
	}
	want := S3Config{Bucket: "my-bucket", Prefix: "archive/ttl", Endpoint: "http://127.0.0.1:7070", PathStyle: true,
		SSE: "aws:kms", KMSKeyID: "alias/x", StorageClass: "STANDARD_IA", FlushBytes: 1 << 20,
		FlushInterval: 5 * time.Second, Compression: "zstd", Format: sinkurl.FormatNDJSON, MaxAttempts: 8,
		Manifests: ManifestConfig{Objects: 100, Interval: 10 * time.Minute}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	for q, want := range map[string]ManifestConfig{
		"?manifest-objects=7&manifest-interval=90s": {Objects: 7, Interval: 90 * time.Second},
		"?manifests=false":                          {Off: true},
	} {
		p, _ = sinkurl.Parse("s3://bucket" + q)
		if c, err = objstore.ParseS3(p); err != nil || c.Manifests != want {
			t.Errorf("%s: manifests %+v, %v; want %+v", q, c.Manifests, err, want)
		}
	}
	p, _ = sinkurl.Parse("s3://bucket")
	c, err = objstore.ParseS3(p)
	if err != nil || c.FlushBytes != 8<<20 || c.FlushInterval != time.Minute || c.Compression != "gzip" || c.Prefix != "" {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}

// FuzzOpenURL checks that parsing any sink URL returns a sink or an error,
// never panics, and never echoes a token in its error.
func FuzzOpenURL(f *testing.F) {
	for _, s := range []string{
		"s3://bucket/prefix?region=eu-west-1&compression=zstd&flush-bytes=1MiB",
		"s3://bucket?sse=aws:kms&kms-key-id=k&storage-class=GLACIER",
		"nats://a:1,b:2?subject=x.{table}.{kind}.{pk}&jetstream=true&token=s3cret",
		"nats://u:p@h:1?subject=a.b&format=item",
		"stdout://?format=item&events=all",
		"file://./dir?events=expired,deleted",
		"s3://b/p?compression=lz4",
		"%", "s3://", "nats://h:1?subject={", "nats://h:1?subject=a.{}.b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		// A token given as a query parameter must never be echoed.
		secret := strings.Contains(raw, "token=s3cret")
		p, err := sinkurl.Parse(raw)
		if err != nil {
			if secret && strings.Contains(err.Error(), "token=s3cret") {
				t.Fatalf("error leaks token: %v", err)
			}
			return
		}
		if _, err := p.Kinds(); err != nil {
			return
		}
		switch p.URL.Scheme {
		case "s3":
			_, err = objstore.ParseS3(p)
		case "nats":
			_, err = natssink.ParseConfig(p)
		case "stdout":
			_, err = p.OneOf("format", "envelope", "envelope", "item")
		}
		if err != nil && secret && strings.Contains(err.Error(), "token=s3cret") {
			t.Fatalf("error leaks token: %v", err)
		}
	})
}

// TestOpenManifestsOff: a file or S3 sink opened with manifests=false
// has no Record and RecordDue, so the consumer waits for no manifest of
// it, and keeps its Preflight; opened by default it records.
func TestOpenManifestsOff(t *testing.T) {
	v := testkit.StartVersity(t)
	s3URL := "s3://archive/%s?endpoint=" + v.Endpoint + "&path-style=true&"
	for _, tc := range []struct{ name, off, on string }{
		{"file", "file://" + t.TempDir() + "?", "file://" + t.TempDir() + "?"},
		{"s3", fmt.Sprintf(s3URL, "off"), fmt.Sprintf(s3URL, "on")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			o := Options{AWSConfig: testkit.AWSConfig}
			sk, _, err := Open(ctx, tc.off+"manifests=false", o)
			if err != nil {
				t.Fatal(err)
			}
			defer sk.Close(ctx)
			if _, ok := sk.(manifestRecorder); ok {
				t.Fatal("a sink opened with manifests=false records")
			}
			if err := Preflight(ctx, sk); err != nil {
				t.Fatal(err)
			}
			on, _, err := Open(ctx, tc.on+"events=expired", o)
			if err != nil {
				t.Fatal(err)
			}
			defer on.Close(ctx)
			if _, ok := on.(manifestRecorder); !ok {
				t.Fatal("a sink opened by default does not record")
			}
		})
	}
}
