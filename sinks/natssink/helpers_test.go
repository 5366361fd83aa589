package natssink

import (
	"context"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// open opens a nats:// URL as package sinks' Open does.
func open(ctx context.Context, raw string, o sinkapi.Options) (sinkapi.Sink, []event.Kind, error) {
	return testkit.Open(ctx, raw, o, func(ctx context.Context, p *sinkurl.Params, o sinkapi.Options) (sinkapi.Sink, error) {
		c, err := ParseConfig(p)
		if err != nil {
			return nil, err
		}
		return New(ctx, c, o)
	})
}

// validate checks a nats:// URL as package sinks' Validate does.
func validate(raw string) error {
	_, _, err := testkit.Open(context.Background(), raw, sinkapi.Options{}, func(_ context.Context, p *sinkurl.Params, _ sinkapi.Options) (sinkapi.Sink, error) {
		_, err := ParseConfig(p)
		return nil, err
	})
	return err
}
