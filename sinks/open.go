package sinks

import (
	"context"
	"errors"
	"fmt"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinks/filesink"
	"github.com/ttl-archiver/archiver/sinks/natssink"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// Open parses a sink URL and opens the sink. It returns the sink and the
// event kinds the caller should route to it (the events= parameter, default
// [event.Expired]). Bad URLs give a *ConfigError naming the parameter and
// the problem; unknown parameters are rejected, with the nearest known
// name when one is near (internal/suggest).
//
// Schemes and parameters (every one optional unless noted):
//
//	file://DIR            newline-delimited archive lines, DIR/TABLE/YYYY-MM-DD/HH.jsonl;
//	                      one sink per DIR (locked), see [FileSink] and [FileConfig]
//	    file-mode=0640, dir-mode=0750   modes of the files and folders it creates
//	    manifests=true|false, manifest-objects=100, manifest-interval=10m
//	stdout://             one line per event on standard output
//	    format=envelope|item   archive line (default) or the item as plain JSON
//	s3://BUCKET/PREFIX    see [S3Config]
//	    region=, endpoint=, path-style=true|false, sse=AES256|aws:kms,
//	    kms-key-id=, storage-class=, flush-bytes=8MiB, flush-interval=60s,
//	    compression=gzip|zstd|none, max-attempts=8, max-buffer-bytes=,
//	    manifests=true|false, manifest-objects=100, manifest-interval=10m
//	nats://HOST:PORT[,HOST:PORT]   see [NATSConfig]
//	    subject=archiver.{table}.{kind}, jetstream=true|false,
//	    create-stream=NAME, with it stream-max-age=168h (0: none),
//	    stream-max-bytes=, stream-max-msgs= (default none),
//	    duplicate-window=20m, stream-replicas=1;
//	    creds=, nkey=, token=, user=, password=, or creds-env=VAR,
//	    nkey-env=VAR, token-env=VAR (the secret in environment variable VAR),
//	    tls-ca=, tls-cert=, tls-key=, format=cloudevents|envelope|item,
//	    max-in-flight=, max-pending-bytes=, max-subject=1024, name=,
//	    msg-ttl=DURATION|never (a Nats-TTL header; JetStream only)
//
// Every scheme takes events=KIND[,KIND...] with kinds expired, deleted,
// inserted, modified (or all).
func Open(ctx context.Context, rawURL string, o Options) (Sink, []event.Kind, error) {
	pr, err := prepare(rawURL)
	if err != nil {
		return nil, nil, err
	}
	sk, err := pr.open(ctx, o)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("sink %q: %w", pr.p.Redacted, err)
	}
	return sk, pr.kinds, nil
}

// Validate checks a sink URL the way Open does (scheme, every parameter and
// its value) without connecting to or creating anything, so a caller can
// report every configuration problem at once before it opens any sink.
// Problems only a live destination reveals (a JetStream subject no stream
// captures, a bucket that does not exist) surface from Open or from
// [Preflight].
func Validate(rawURL string) error {
	_, err := prepare(rawURL)
	return err
}

// prepared is a parsed, checked sink URL and how to open its sink.
type prepared struct {
	p     *sinkurl.Params
	kinds []event.Kind
	open  func(ctx context.Context, o Options) (Sink, error)
}

func prepare(rawURL string) (*prepared, error) {
	p, err := sinkurl.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	kinds, err := p.Kinds()
	if err != nil {
		return nil, err
	}
	pr := &prepared{p: p, kinds: kinds}
	switch p.URL.Scheme {
	case "file":
		c, err := sinkurl.ParseFile(p)
		if err != nil {
			return nil, err
		}
		pr.open = func(_ context.Context, o Options) (Sink, error) {
			sk, err := NewFileSinkWith(c, o)
			if err != nil {
				return nil, err
			}
			return recording(sk, c.Manifests, o), nil
		}
	case "stdout":
		item, err := filesink.ParseStdout(p)
		if err != nil {
			return nil, err
		}
		pr.open = func(_ context.Context, o Options) (Sink, error) {
			return NewWriterSink("stdout://", o.Stdout, item, o), nil
		}
	case "s3":
		c, err := objstore.ParseS3(p)
		if err != nil {
			return nil, err
		}
		pr.open = func(ctx context.Context, o Options) (Sink, error) {
			sk, err := NewS3(ctx, c, o)
			if err != nil {
				return nil, err
			}
			return recording(sk, c.Manifests, o), nil
		}
	case "nats":
		c, err := natssink.ParseConfig(p)
		if err != nil {
			return nil, err
		}
		pr.open = func(ctx context.Context, o Options) (Sink, error) { return NewNATS(ctx, c, o) }
	default:
		return nil, p.Fail("", fmt.Sprintf("unknown scheme %q (want s3, nats, file or stdout)", p.URL.Scheme))
	}
	return pr, nil
}
