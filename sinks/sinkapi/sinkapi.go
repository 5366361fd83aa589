// Package sinkapi is the sink contract: [Batch], [Ack] and [Sink], the
// errors a sink acknowledges with ([ErrPermanent], [RejectedError],
// [ErrClosed]), the [Options] a host gives every sink and the start-up
// check every destination may offer ([Preflighter], [PreflightError]).
// It is the leaf each destination package (sinks/s3sink, sinks/natssink,
// sinks/filesink) and package sinks, which opens them, import; package
// sinks names each of its types again (sinks.Sink, sinks.Batch), so
// callers write those.
//
// Every sink obeys one contract, checked by the conformance suite in
// package sinks's tests: a batch is acknowledged only once it is durable
// at the destination, events of one shard reach the destination in the
// order they were written, Close flushes, and failures surface as errors,
// never as silent drops.
package sinkapi

import (
	"context"

	"github.com/ttl-archiver/archiver/event"
)

// Batch is a run of events from one shard, in stream order.
type Batch struct {
	StreamARN string
	ShardID   string
	Events    []event.Event
}

// Ack is called exactly once per batch a sink took: with nil when every event
// of the batch is durable at the destination, with a non-nil error when the
// sink gave up on the batch (the caller retries it, so sinks must tolerate a
// batch written twice).
type Ack func(err error)

// Sink is one destination of events.
type Sink interface {
	// Name identifies the sink in logs and metrics; it never contains
	// secrets.
	Name() string
	// Write hands the sink a batch. It may block while the sink is at
	// capacity (backpressure) and returns ctx.Err() if ctx ends first. A nil
	// return means the sink owns the batch and will call ack exactly once;
	// a non-nil return means it did not take the batch and will not call ack.
	// Batches of one shard are written in stream order and their events
	// reach the destination in that order.
	Write(ctx context.Context, b Batch, ack Ack) error
	// Flush makes everything the sink holds durable now and returns once
	// every batch written before the call has been acknowledged (or failed).
	Flush(ctx context.Context) error
	// Close flushes, then releases the sink's resources. No Write may follow.
	Close(ctx context.Context) error
}
