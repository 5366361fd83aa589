package testkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// OpenFunc reads the parameters of a parsed sink URL and opens its sink.
type OpenFunc func(ctx context.Context, p *sinkurl.Params, o sinkapi.Options) (sinkapi.Sink, error)

// Open opens the sink URL raw as package sinks' Open does (the
// manifests=false wrapper aside), with open doing the destination's part,
// so a destination's tests open their sink by URL without package sinks.
func Open(ctx context.Context, raw string, o sinkapi.Options, open OpenFunc) (sinkapi.Sink, []event.Kind, error) {
	p, err := sinkurl.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	kinds, err := p.Kinds()
	if err != nil {
		return nil, nil, err
	}
	s, err := open(ctx, p, o)
	var ce *sinkurl.ConfigError
	switch {
	case errors.As(err, &ce):
		return nil, nil, err
	case err != nil:
		return nil, nil, fmt.Errorf("sink %q: %w", p.Redacted, err)
	}
	return s, kinds, nil
}

// Preflight runs the preflight of s, a sink with one.
func Preflight(ctx context.Context, s sinkapi.Sink) error {
	return s.(sinkapi.Preflighter).Preflight(ctx)
}
