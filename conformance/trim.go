package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/internal/awserr"
)

// counts are the n of the key k's records (NEW_IMAGE), in order.
func counts(recs []stypes.Record) []int {
	var ns []int
	for _, r := range recs {
		if r.Dynamodb == nil {
			continue
		}
		if v, ok := r.Dynamodb.NewImage["n"].(*stypes.AttributeValueMemberN); ok {
			n, _ := strconv.Atoi(v.Value)
			ns = append(ns, n)
		}
	}
	return ns
}

// writeK writes the key k with n.
func (e *Env) writeK(ctx context.Context, table string, n int) error {
	return put(ctx, e.DynamoDB, table, item{"pk": str("k"), "sk": str("0"), "n": num(int64(n))})
}

// keyShard waits until the key k's first want records are in the stream
// and returns the shard holding them and its records.
func (e *Env) keyShard(ctx context.Context, arn string, want int) (string, []stypes.Record, error) {
	var shard string
	var recs []stypes.Record
	_, err := e.waitFor(ctx, e.Bound, false, func(ctx context.Context) error {
		list, err := shards(ctx, e.Streams, arn, nil)
		if err != nil {
			return err
		}
		for _, s := range list {
			rs, err := readShard(ctx, e.Streams, arn, aws.ToString(s.ShardId), stypes.ShardIteratorTypeTrimHorizon, "")
			if err != nil {
				return err
			}
			if len(counts(rs)) >= want {
				shard, recs = aws.ToString(s.ShardId), rs
				return nil
			}
		}
		return errNotYet
	})
	if errors.Is(err, errNotYet) {
		return "", nil, fmt.Errorf("the key's %d records not in one shard within the bound (%v)", want, e.Bound)
	}
	return shard, recs, err
}

// awaitFrom reads from the iterator it until a record comes or the bound
// passes.
func (e *Env) awaitFrom(ctx context.Context, st *dynamodbstreams.Client, it string) ([]stypes.Record, error) {
	var recs []stypes.Record
	_, err := e.waitFor(ctx, e.Bound, false, func(ctx context.Context) error {
		out, err := st.GetRecords(ctx, getRecords(it))
		switch {
		case err != nil:
			return fmt.Errorf("GetRecords: %w", err)
		case len(out.Records) > 0:
			recs = out.Records
			return nil
		case out.NextShardIterator == nil:
			return errors.New("the shard closed with no record to read")
		}
		it = *out.NextShardIterator
		return errNotYet
	})
	if errors.Is(err, errNotYet) {
		err = fmt.Errorf("no record within the bound (%v)", e.Bound)
	}
	return recs, err
}

func checkTrimHorizon(ctx context.Context, e *Env) Outcome {
	table, arn, err := e.table(ctx, e.DynamoDB, tableSpec{stream: types.StreamViewTypeNewImage})
	if err != nil {
		return failed("creating the table", err)
	}
	for n := 1; n <= 3; n++ {
		if err := e.writeK(ctx, table, n); err != nil {
			return failed("writing", err)
		}
	}
	shard, recs, err := e.keyShard(ctx, arn, 3)
	if err != nil {
		return failed("reading the stream", err)
	}
	if got := counts(recs); !slices.Equal(got, []int{1, 2, 3}) {
		return failf("TRIM_HORIZON reads the writes %v, want 1, 2, 3", got)
	}
	second := aws.ToString(recs[1].Dynamodb.SequenceNumber)
	for _, c := range []struct {
		typ   stypes.ShardIteratorType
		first int
	}{{stypes.ShardIteratorTypeAtSequenceNumber, 2}, {stypes.ShardIteratorTypeAfterSequenceNumber, 3}} {
		rs, err := readShard(ctx, e.Streams, arn, shard, c.typ, second)
		if err != nil {
			return failed(string(c.typ), err)
		}
		if got := counts(rs); len(got) == 0 || got[0] != c.first {
			return failf("%s of the second record reads the writes %v, want from %d", c.typ, got, c.first)
		}
	}
	if out := e.latest(ctx, table, arn, shard); out != nil {
		return *out
	}
	if e.Control == nil {
		return passf("TRIM_HORIZON, AT_ and AFTER_SEQUENCE_NUMBER and LATEST start where they should (trimming not measured: records live 24 hours; --engine-control trims)")
	}
	return e.trimmed(ctx, table, arn, shard, aws.ToString(recs[0].Dynamodb.SequenceNumber))
}

// latest takes a LATEST iterator, writes the fourth change and checks that
// the iterator reads it first; nil when it does.
func (e *Env) latest(ctx context.Context, table, arn, shard string) *Outcome {
	it, err := iterator(ctx, e.Streams, arn, shard, stypes.ShardIteratorTypeLatest, "")
	if err == nil {
		err = e.writeK(ctx, table, 4)
	}
	if err != nil {
		o := failed("LATEST", err)
		return &o
	}
	rs, err := e.awaitFrom(ctx, e.Streams, it)
	if err != nil {
		o := failed("reading from LATEST", err)
		return &o
	}
	if got := counts(rs); len(got) == 0 || got[0] != 4 {
		o := failf("LATEST taken after three writes reads the writes %v, want the fourth first", got)
		return &o
	}
	return nil
}

// trimmed trims every record so far through the control API and checks
// that the first record's position is TrimmedDataAccessException and that
// TRIM_HORIZON then starts at the next write.
func (e *Env) trimmed(ctx context.Context, table, arn, shard, first string) Outcome {
	now, err := e.Control.Now(ctx)
	if err == nil {
		err = e.Control.Trim(ctx, table, e.Region, now.Add(time.Millisecond))
	}
	if err != nil {
		return failed("trimming", err)
	}
	_, err = readShard(ctx, e.Streams, arn, shard, stypes.ShardIteratorTypeAtSequenceNumber, first)
	if code := awserr.Code(err); code != "TrimmedDataAccessException" {
		return failf("AT_SEQUENCE_NUMBER of a trimmed record: %s, want TrimmedDataAccessException", orNone(err))
	}
	if err := e.writeK(ctx, table, 5); err != nil {
		return failed("writing", err)
	}
	it, err := iterator(ctx, e.Streams, arn, shard, stypes.ShardIteratorTypeTrimHorizon, "")
	if err != nil {
		return failed("after the trim", err)
	}
	rs, err := e.awaitFrom(ctx, e.Streams, it)
	if err != nil {
		return failed("TRIM_HORIZON after the trim", err)
	}
	if got := counts(rs); len(got) == 0 || got[0] != 5 {
		return failf("TRIM_HORIZON after trimming the first four writes reads %v, want the fifth first", got)
	}
	return passf("TRIM_HORIZON, AT_ and AFTER_SEQUENCE_NUMBER and LATEST start where they should; after a trim (control API) the old position is TrimmedDataAccessException and TRIM_HORIZON starts after it")
}
