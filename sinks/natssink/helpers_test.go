package natssink

import (
	"context"
	"fmt"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// parse reads a nats:// URL as package sinks' Open and Validate do.
func parse(raw string) (*sinkurl.Params, Config, []event.Kind, error) {
	p, err := sinkurl.Parse(raw)
	if err != nil {
		return nil, Config{}, nil, err
	}
	kinds, err := p.Kinds()
	if err != nil {
		return nil, Config{}, nil, err
	}
	if p.URL.Scheme != "nats" {
		return nil, Config{}, nil, fmt.Errorf("%s: not a nats:// URL", p.Redacted)
	}
	c, err := ParseConfig(p)
	return p, c, kinds, err
}

// validate checks a nats:// URL as package sinks' Validate does.
func validate(raw string) error {
	_, _, _, err := parse(raw)
	return err
}

// open opens a nats:// URL as package sinks' Open does.
func open(ctx context.Context, raw string, o sinkapi.Options) (sinkapi.Sink, []event.Kind, error) {
	p, c, kinds, err := parse(raw)
	if err != nil {
		return nil, nil, err
	}
	s, err := New(ctx, c, o)
	if err != nil {
		return nil, nil, fmt.Errorf("sink %q: %w", p.Redacted, err)
	}
	return s, kinds, nil
}

// preflight runs the preflight of s, a nats sink.
func preflight(ctx context.Context, s sinkapi.Sink) error {
	return s.(sinkapi.Preflighter).Preflight(ctx)
}
