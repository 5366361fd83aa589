package conformance

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// rolloverWrites is how many writes a check makes, looking every
// rolloverLook writes, before it concludes that no shard will close soon
// (DynamoDB closes shards about every four hours; the engine after
// --shard-rollover records).
const (
	rolloverWrites = 400
	rolloverLook   = 20
)

// lineage is a stream whose first shard was closed, and the writes of one
// key ("k", n counting from 1) before and after.
type lineage struct {
	table, arn string
	shards     []stypes.Shard
	writes     int
	how        string // how the shard closed
}

// closeShard writes the key k into a new table with a stream until a
// shard closes: at once through Control's rollover, else by writing (up
// to rolloverWrites). Then it writes a few more, for the child. It returns
// nil and a reason when no shard closed.
func (e *Env) closeShard(ctx context.Context) (*lineage, string, error) {
	table, arn, err := e.table(ctx, e.DynamoDB, tableSpec{stream: types.StreamViewTypeNewImage})
	if err != nil {
		return nil, "", fmt.Errorf("creating the table: %w", err)
	}
	l := &lineage{table: table, arn: arn}
	write := func() error {
		l.writes++
		return put(ctx, e.DynamoDB, table, item{"pk": str("k"), "sk": str("0"), "n": num(int64(l.writes))})
	}
	for l.writes < rolloverWrites {
		if err := write(); err != nil {
			return nil, "", err
		}
		if e.Control != nil && l.writes == 3 {
			if err := e.Control.Rollover(ctx, table, e.Region); err != nil {
				return nil, "", err
			}
			l.how = "closed through the control API"
		}
		if l.writes%rolloverLook != 0 && l.how == "" {
			continue
		}
		if l.shards, err = shards(ctx, e.Streams, arn, nil); err != nil {
			return nil, "", err
		}
		if slices.ContainsFunc(l.shards, closed) {
			break
		}
	}
	if !slices.ContainsFunc(l.shards, closed) {
		return nil, fmt.Sprintf("no shard closed after %d writes (DynamoDB closes shards about every four hours: measure lineage with --engine-control, or an engine started with --shard-rollover 20)", l.writes), nil
	}
	if l.how == "" {
		l.how = fmt.Sprintf("closed after %d writes", l.writes)
	}
	for range 3 {
		if err := write(); err != nil {
			return nil, "", err
		}
	}
	l.shards, err = shards(ctx, e.Streams, arn, nil)
	return l, "", err
}

func closed(s stypes.Shard) bool {
	return s.SequenceNumberRange != nil && aws.ToString(s.SequenceNumberRange.EndingSequenceNumber) != ""
}

func checkLineage(ctx context.Context, e *Env) Outcome {
	l, none, err := e.closeShard(ctx)
	switch {
	case err != nil:
		return failed("closing a shard", err)
	case l == nil:
		return skipf("%s", none)
	}
	ids := map[string]stypes.Shard{}
	for _, s := range l.shards {
		ids[aws.ToString(s.ShardId)] = s
	}
	for _, s := range l.shards {
		if bad := shardProblem(s, ids, l.shards); bad != "" {
			return failf("%s", bad)
		}
	}
	return l.keyInOrder(ctx, e)
}

// shardProblem is what is wrong with one shard's place in the lineage, or
// "": its range, its parent's existence and end, and, closed, a child.
func shardProblem(s stypes.Shard, ids map[string]stypes.Shard, all []stypes.Shard) string {
	id, r := aws.ToString(s.ShardId), s.SequenceNumberRange
	if r == nil || !event.ValidSequence(aws.ToString(r.StartingSequenceNumber)) {
		return fmt.Sprintf("shard %s has no StartingSequenceNumber", id)
	}
	if closed(s) && event.CompareSequence(*r.EndingSequenceNumber, *r.StartingSequenceNumber) < 0 {
		return fmt.Sprintf("shard %s ends (%s) before it starts (%s)", id, *r.EndingSequenceNumber, *r.StartingSequenceNumber)
	}
	if p := aws.ToString(s.ParentShardId); p != "" {
		parent, ok := ids[p]
		if !ok {
			return fmt.Sprintf("shard %s names parent %s, which DescribeStream does not list (nothing was trimmed yet)", id, p)
		}
		if !closed(parent) {
			return fmt.Sprintf("shard %s names parent %s, which is still open", id, p)
		}
		if event.CompareSequence(*r.StartingSequenceNumber, *parent.SequenceNumberRange.EndingSequenceNumber) <= 0 {
			return fmt.Sprintf("shard %s starts at %s, not above its parent's end %s", id, *r.StartingSequenceNumber, *parent.SequenceNumberRange.EndingSequenceNumber)
		}
	}
	if closed(s) && !slices.ContainsFunc(all, func(c stypes.Shard) bool { return aws.ToString(c.ParentShardId) == id }) {
		return fmt.Sprintf("shard %s has an EndingSequenceNumber (%s), so it is closed, yet no shard names it as its parent (an open shard has none)", id, *r.EndingSequenceNumber)
	}
	return ""
}

// keyInOrder reads the shards parents first and checks that the key's
// records are every write, in order, the later ones in a child.
func (l *lineage) keyInOrder(ctx context.Context, e *Env) Outcome {
	var ns []int
	inChild := false
	for _, s := range parentsFirst(l.shards) {
		recs, err := readShard(ctx, e.Streams, l.arn, aws.ToString(s.ShardId), stypes.ShardIteratorTypeTrimHorizon, "")
		if err != nil {
			return failed("reading the stream", err)
		}
		got := counts(recs)
		ns = append(ns, got...)
		inChild = inChild || (len(got) > 0 && aws.ToString(s.ParentShardId) != "")
	}
	want := make([]int, l.writes)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(ns, want) {
		return failf("the key's records read parents first give the writes %v, want 1 to %d in order", ns, l.writes)
	}
	if !inChild {
		return failf("every record of the key is in a shard without a parent: the writes after the shard closed did not go to its child")
	}
	return passf("%d shards; the key's %d records in order across parent and child (%s)", len(l.shards), l.writes, l.how)
}

// parentsFirst orders shards so that each comes after its parent (a shard
// whose parent is not listed counts as a root).
func parentsFirst(all []stypes.Shard) []stypes.Shard {
	var out []stypes.Shard
	done := map[string]bool{}
	listed := map[string]bool{}
	for _, s := range all {
		listed[aws.ToString(s.ShardId)] = true
	}
	for len(out) < len(all) {
		n := len(out)
		for _, s := range all {
			id, p := aws.ToString(s.ShardId), aws.ToString(s.ParentShardId)
			if !done[id] && (p == "" || !listed[p] || done[p]) {
				done[id] = true
				out = append(out, s)
			}
		}
		if len(out) == n { // a cycle: keep the rest as listed
			for _, s := range all {
				if !done[aws.ToString(s.ShardId)] {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func checkShardFilter(ctx context.Context, e *Env) Outcome {
	l, none, err := e.closeShard(ctx)
	if err != nil {
		return failed("closing a shard", err)
	}
	if l == nil { // nothing closed: ask about the open shards alone
		_, arn, err := e.table(ctx, e.DynamoDB, tableSpec{stream: types.StreamViewTypeKeysOnly})
		if err != nil {
			return failed("creating the table", err)
		}
		list, err := shards(ctx, e.Streams, arn, nil)
		if err != nil {
			return failed("listing the shards", err)
		}
		l = &lineage{arn: arn, shards: list}
	}
	for _, s := range l.shards {
		id := aws.ToString(s.ShardId)
		got, err := shards(ctx, e.Streams, l.arn, &stypes.ShardFilter{Type: stypes.ShardFilterTypeChildShards, ShardId: &id})
		if err != nil {
			return failed("DescribeStream with a ShardFilter", err)
		}
		var want []string
		for _, c := range l.shards {
			if aws.ToString(c.ParentShardId) == id {
				want = append(want, aws.ToString(c.ShardId))
			}
		}
		slices.Sort(want)
		if ids := shardIDs(got); !slices.Equal(ids, want) {
			return failf("ShardFilter CHILD_SHARDS of %s lists %v, want its children %v", id, ids, want)
		}
	}
	if none != "" {
		return passf("an open shard's CHILD_SHARDS are none; no shard closed after %d writes, so no parent's were asked", rolloverWrites)
	}
	return passf("CHILD_SHARDS of each of %d shards lists exactly its children (%s)", len(l.shards), l.how)
}

// shardIDs are the shards' IDs, sorted.
func shardIDs(list []stypes.Shard) []string {
	var ids []string
	for _, s := range list {
		ids = append(ids, aws.ToString(s.ShardId))
	}
	slices.Sort(ids)
	return ids
}
