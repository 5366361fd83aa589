package shard

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/backoff"
)

// started tells the Coverage processor that the reader starts and, for a
// reader that starts at LATEST, that what the shard held before was
// skipped.
func (r *reader) started() error {
	if r.co == nil {
		return nil
	}
	r.co.ShardStarted(r.table, r.streamARN, r.shard)
	if r.skipStart == 0 {
		return nil
	}
	if err := r.co.Skipped(r.ctx, r.streamARN, r.shard.ID, r.skipStart); err != nil {
		return fmt.Errorf("skipped (%s): %w", r.skipStart, err)
	}
	return nil
}

// hand gives one queued item to the Processor: a batch to Process, a
// notice to Coverage.Skipped.
func (r *reader) hand(b Batch) error {
	if b.skip != 0 {
		if err := r.co.Skipped(r.ctx, r.streamARN, r.shard.ID, b.skip); err != nil {
			return fmt.Errorf("skipped (%s): %w", b.skip, err)
		}
		return nil
	}
	return r.w.o.Processor.Process(r.ctx, b)
}

// notices queues, for the Coverage processor and in order with the
// batches, what the reader did not read before the records it is about to
// queue (records: it is about to queue some, or to end): records it went
// on past because they were trimmed, and, for a reader that started at
// TRIM_HORIZON with no stored position, whether the shard's first records
// had been trimmed. That is asked after the first GetRecords answer that
// holds records (or ends the shard), not before: an answer that was not
// trimmed when asked was not trimmed when read, whereas records could be
// trimmed between an earlier question and the read.
func (r *reader) notices(ctx context.Context, q chan<- Batch, records bool) error {
	if r.co == nil {
		return nil
	}
	if r.probe && records {
		r.probe = false
		trimmed, err := r.probeTrimmed(ctx)
		if err != nil {
			return err
		}
		r.trimSkip = r.trimSkip || trimmed
	}
	if !r.trimSkip {
		return nil
	}
	select {
	case q <- Batch{Table: r.table, StreamARN: r.streamARN, ShardID: r.shard.ID, skip: SkipTrimmed}:
		r.trimSkip = false
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probeTrimmed asks for an iterator AT the shard's StartingSequenceNumber:
// DynamoDB Streams answers TrimmedDataAccessException when records at the
// shard's start were trimmed. Throttling and transient errors are retried
// (up to maxFailures each); any other answer, and a shard without a known
// StartingSequenceNumber, counts as not trimmed (logged at WARN). An error
// is only the context's.
func (r *reader) probeTrimmed(ctx context.Context) (bool, error) {
	o, m := &r.w.o, r.w.m
	if r.shard.StartingSequence == "" {
		m.probes.WithLabelValues(r.table, "failed").Inc()
		r.log.Warn("shard has no StartingSequenceNumber: cannot tell whether its first records were trimmed; taken as not trimmed")
		return false, nil
	}
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.streamARN), ShardId: aws.String(r.shard.ID),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(r.shard.StartingSequence)}
	fails, throttles := 0, 0
	for {
		_, err := r.streams.GetShardIterator(ctx, in)
		k := classify(ctx, err)
		switch {
		case err == nil:
			m.probes.WithLabelValues(r.table, "whole").Inc()
			return false, nil
		case k == errCanceled:
			return false, ctx.Err()
		case k == errTrimmed:
			m.probes.WithLabelValues(r.table, "trimmed").Inc()
			r.log.Info("the shard's first records were trimmed from the stream before it was first read",
				zap.String("starting_sequence", r.shard.StartingSequence))
			return true, nil
		}
		m.errs.WithLabelValues(r.table, "GetShardIterator", k.String()).Inc()
		var wait int
		switch k {
		case errThrottle:
			m.throttles.WithLabelValues(r.table).Inc()
			throttles++
			wait = throttles
		case errOther:
			fails++
			wait = fails
		default:
			wait = maxFailures
		}
		if wait >= maxFailures {
			m.probes.WithLabelValues(r.table, "failed").Inc()
			r.log.Warn("cannot tell whether the shard's first records were trimmed; taken as not trimmed",
				zap.String("starting_sequence", r.shard.StartingSequence), zap.Error(err))
			return false, nil
		}
		if !backoff.Sleep(ctx, o.retry().Delay(wait-1)) {
			return false, ctx.Err()
		}
	}
}
