package s3sink

import (
	"context"
	"fmt"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// open opens an s3:// URL as package sinks' Open does, but for its
// manifests=false wrapper (package sinks' tests hold that one).
func open(ctx context.Context, raw string, o sinkapi.Options) (sinkapi.Sink, []event.Kind, error) {
	p, err := sinkurl.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	kinds, err := p.Kinds()
	if err != nil {
		return nil, nil, err
	}
	if p.URL.Scheme != "s3" {
		return nil, nil, fmt.Errorf("%s: not an s3:// URL", p.Redacted)
	}
	c, err := objstore.ParseS3(p)
	if err != nil {
		return nil, nil, err
	}
	s, err := New(ctx, c, o)
	if err != nil {
		return nil, nil, fmt.Errorf("sink %q: %w", p.Redacted, err)
	}
	return s, kinds, nil
}

// preflight runs the preflight of s, an S3 sink.
func preflight(ctx context.Context, s sinkapi.Sink) error {
	return s.(sinkapi.Preflighter).Preflight(ctx)
}
