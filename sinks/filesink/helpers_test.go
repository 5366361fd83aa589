package filesink

import (
	"context"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// open opens a file:// or stdout:// URL as package sinks' Open does, but
// for its manifests=false wrapper (package sinks' tests hold that one).
func open(ctx context.Context, raw string, o sinkapi.Options) (sinkapi.Sink, []event.Kind, error) {
	return testkit.Open(ctx, raw, o, func(_ context.Context, p *sinkurl.Params, o sinkapi.Options) (sinkapi.Sink, error) {
		if p.URL.Scheme == "stdout" {
			item, err := ParseStdout(p)
			if err != nil {
				return nil, err
			}
			return NewWriter("stdout://", o.Stdout, item, o), nil
		}
		c, err := sinkurl.ParseFile(p)
		if err != nil {
			return nil, err
		}
		return NewWith(c, o)
	})
}
