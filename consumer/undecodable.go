package consumer

import (
	"bytes"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/shard"
)

// decodeBatch decodes a batch's records. Records that cannot be decoded,
// those the SDK could not parse included (b.Undecodable), become dead
// letters (bad) when there is a dead-letter sink; without one the first of
// them fails the batch.
func (c *Consumer) decodeBatch(s *shardDelivery, b shard.Batch, ttlAttr string) (events, bad []event.Event, err error) {
	events = make([]event.Event, 0, len(b.Records))
	unread := b.Undecodable
	for i := range b.Records {
		r := &b.Records[i]
		var (
			e   event.Event
			raw []byte
			err error
		)
		if len(unread) > 0 && unread[0].Index == i {
			// The SDK could not parse it: r is the reader's placeholder.
			raw, err = unread[0].Raw, &event.RecordError{ShardID: b.ShardID, Index: i, Field: "record", Problem: "the SDK cannot decode it: " + unread[0].Err.Error()}
			unread = unread[1:]
		} else if e, err = event.DecodeWith(s.table, b.StreamARN, b.ShardID, i, *r, ttlAttr, c.cfg.ExpiredWhen); err == nil {
			events = append(events, e)
			continue
		}
		if c.dlq == nil {
			c.log.Error("malformed stream record and no dead-letter sink; the shard stops and is retried",
				zap.String("stream", b.StreamARN), zap.String("shard", b.ShardID),
				zap.String("event_id", aws.ToString(r.EventID)), zap.Duration("time_left_before_trim", c.timeLeft(r)),
				zap.Error(err))
			return nil, nil, err
		}
		c.log.Error("malformed stream record; sending it to the dead-letter sink",
			zap.String("stream", b.StreamARN), zap.String("shard", b.ShardID),
			zap.String("event_id", aws.ToString(r.EventID)), zap.String("dead_letter", c.dlq.name), zap.Error(err))
		bad = append(bad, undecodableEvent(s.table, b.StreamARN, b.ShardID, r, raw, err))
	}
	return events, bad, nil
}

// undecodableEvent is the dead letter of a record that decode refused, or
// that the SDK could not parse (raw: its bytes in the response; r is then
// the reader's placeholder): the raw record, and whatever of its position
// and images could be read.
func undecodableEvent(table, streamARN, shardID string, r *types.Record, raw []byte, err error) event.Event {
	if raw != nil {
		raw = bytes.Clone(raw) // it points into the whole response
	} else {
		raw = event.AppendStreamRecord(nil, r)
	}
	e := event.Event{
		Kind: event.Undecodable, Table: table, StreamARN: streamARN, Region: event.RegionOf(streamARN), ShardID: shardID, EventID: aws.ToString(r.EventID),
		DeadLetter: &event.DeadLetter{
			Reason: event.ReasonUndecodable, Error: err.Error(), FirstFailure: time.Now(), Record: raw,
		},
	}
	var re *event.RecordError
	if errors.As(err, &re) && re.Field != "eventName" {
		e.EventName = string(r.EventName) // checked: it is not what decode refused (a placeholder's is a valid one or none)
	}
	if d := r.Dynamodb; d != nil {
		if seq := aws.ToString(d.SequenceNumber); event.ValidSequence(seq) {
			e.SequenceNumber = seq
		}
		if d.ApproximateCreationDateTime != nil {
			e.ApproximateCreationTime = *d.ApproximateCreationDateTime
		}
		if d.SizeBytes != nil {
			e.SizeBytes = *d.SizeBytes
		}
		e.Keys, e.OldImage, e.NewImage = d.Keys, d.OldImage, d.NewImage
	}
	return e
}

// timeLeft is how long the stream keeps r from now (StreamRetention after
// its creation); the full retention when its creation time is unknown.
func (c *Consumer) timeLeft(r *types.Record) time.Duration {
	if d := r.Dynamodb; d != nil && d.ApproximateCreationDateTime != nil {
		return c.cfg.StreamRetention - time.Since(*d.ApproximateCreationDateTime)
	}
	return c.cfg.StreamRetention
}
