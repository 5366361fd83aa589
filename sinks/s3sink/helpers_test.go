package s3sink

import (
	"context"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// open opens an s3:// URL as package sinks' Open does, but for its
// manifests=false wrapper (package sinks' tests hold that one).
func open(ctx context.Context, raw string, o sinkapi.Options) (sinkapi.Sink, []event.Kind, error) {
	return testkit.Open(ctx, raw, o, func(ctx context.Context, p *sinkurl.Params, o sinkapi.Options) (sinkapi.Sink, error) {
		c, err := objstore.ParseS3(p)
		if err != nil {
			return nil, err
		}
		return New(ctx, c, o)
	})
}
