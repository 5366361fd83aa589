package leasetable

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The lease table's items as this worker reads them: one row per item,
// decoded, and observed on this worker's clock.

// Key names an item: its partition (a stream ARN, or a prefixed one) and
// its sort key (a shard ID, a worker ID, or SweepShard).
type Key struct{ Stream, Shard string }

// SweepKey is the key of the sweeper's item of a swept table.
func SweepKey(table string) Key { return Key{SweepPrefix + table, SweepShard} }

// String names the lease of k's item in messages.
func (k Key) String() string {
	if table, ok := strings.CutPrefix(k.Stream, SweepPrefix); ok && k.Shard == SweepShard {
		return "sweeper lease of table " + table
	}
	return "lease of shard " + k.Shard
}

// Row is one item, decoded (see DecodeRow); the zero Row is an item that
// does not exist.
type Row struct {
	Shard      string
	Owner      string
	Counter    int64
	ExpiryMS   int64
	Checkpoint string
	Finished   bool
	Parents    []string
	Handoff    string
	UpdatedMS  int64
	SweepMS    int64 // sweeper items only: the cursor
	Exists     bool
	// Set by observe for rows read from the table: when this worker
	// first saw the row's current version, and when its lease expires
	// by this worker's clock.
	Observed      bool
	SeenAt        time.Time
	LocalExpiryMS int64
}

// Expired reports whether r's lease has expired at now (this worker's
// clock). A row not read from the table goes by its written expiry.
func (r Row) Expired(now time.Time) bool {
	if r.Observed {
		return r.LocalExpiryMS <= now.UnixMilli()
	}
	return r.ExpiryMS <= now.UnixMilli()
}

// seenVersion is a lease item's version (owner, counter and written
// expiry: a renewal writes a new expiry) and when this worker first saw it.
type seenVersion struct {
	owner   string
	counter int64
	expiry  int64
	at      time.Time
}

// observe sets r's local expiry. A lease this worker wrote expires when it
// says, as this worker's clock wrote it. Another worker's lease expires a
// lease duration after this worker first saw its current version: an
// owner that renews writes a new version before that, one that stopped
// renewing does not. Its written expiry, from another clock, is never
// compared with this one. Caller holds t.seenMu.
func (t *Table) observe(k Key, r *Row, now time.Time) {
	if !r.Exists {
		delete(t.seen, k)
		return
	}
	v, ok := t.seen[k]
	if !ok || v.owner != r.Owner || v.counter != r.Counter || v.expiry != r.ExpiryMS {
		v = seenVersion{owner: r.Owner, counter: r.Counter, expiry: r.ExpiryMS, at: now}
		t.seen[k] = v
	}
	r.Observed, r.SeenAt, r.LocalExpiryMS = true, v.at, r.ExpiryMS
	if r.Owner != t.Worker {
		r.LocalExpiryMS = v.at.Add(t.LeaseD).UnixMilli()
	}
}

// Live reports whether r's lease is held by someone at now.
func (r Row) Live(now time.Time) bool { return r.Owner != "" && !r.Expired(now) }

// ItemKey is the key of the item (stream, shard) in a request.
func ItemKey(stream, shard string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrStream: &types.AttributeValueMemberS{Value: stream},
		AttrShard:  &types.AttributeValueMemberS{Value: shard},
	}
}

// Num is n as a Number attribute value.
func Num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// DecodeRow decodes an item (nil: one that does not exist); an attribute
// of the wrong type is an error naming it.
func DecodeRow(it map[string]types.AttributeValue) (Row, error) {
	var r Row
	if it == nil {
		return r, nil
	}
	r.Exists = true
	str := func(name string) (string, error) {
		switch v := it[name].(type) {
		case nil:
			return "", nil
		case *types.AttributeValueMemberS:
			return v.Value, nil
		default:
			return "", fmt.Errorf("attribute %s is %T, want a string", name, v)
		}
	}
	number := func(name string) (int64, error) {
		switch v := it[name].(type) {
		case nil:
			return 0, nil
		case *types.AttributeValueMemberN:
			n, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("attribute %s: %w", name, err)
			}
			return n, nil
		default:
			return 0, fmt.Errorf("attribute %s is %T, want a number", name, v)
		}
	}
	var err error
	if r.Shard, err = str(AttrShard); err != nil {
		return r, err
	}
	if r.Owner, err = str(AttrOwner); err != nil {
		return r, err
	}
	if r.Checkpoint, err = str(AttrCheckpoint); err != nil {
		return r, err
	}
	if r.Handoff, err = str(AttrHandoff); err != nil {
		return r, err
	}
	if r.Counter, err = number(AttrCounter); err != nil {
		return r, err
	}
	if r.ExpiryMS, err = number(AttrExpiry); err != nil {
		return r, err
	}
	if r.UpdatedMS, err = number(AttrUpdated); err != nil {
		return r, err
	}
	if r.SweepMS, err = number(AttrSweepCursor); err != nil {
		return r, err
	}
	if v, ok := it[AttrFinished].(*types.AttributeValueMemberBOOL); ok {
		r.Finished = v.Value
	}
	if v, ok := it[AttrParents].(*types.AttributeValueMemberSS); ok {
		r.Parents = v.Value
	}
	return r, nil
}

// QueryRows reads every item of the partition (consistent read), by sort
// key.
func (t *Table) QueryRows(ctx context.Context, partition string) (map[string]Row, error) {
	rows := map[string]Row{}
	var start map[string]types.AttributeValue
	for {
		var out *dynamodb.QueryOutput
		err := t.Retry(ctx, func(ctx context.Context) error {
			var err error
			out, err = t.Client.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(t.Name),
				KeyConditionExpression:    aws.String(AttrStream + " = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: partition}},
				ConsistentRead:            aws.Bool(true),
				ExclusiveStartKey:         start,
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("checkpoint: query %s in table %s: %w", partition, t.Name, err)
		}
		for _, it := range out.Items {
			r, err := DecodeRow(it)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: table %s, %s: bad item: %w", t.Name, partition, err)
			}
			rows[r.Shard] = r
		}
		if len(out.LastEvaluatedKey) == 0 {
			t.observeAll(partition, rows)
			return rows, nil
		}
		start = out.LastEvaluatedKey
	}
}

// observeAll observes every row of a partition read whole, and forgets
// the items no longer in it.
func (t *Table) observeAll(partition string, rows map[string]Row) {
	t.seenMu.Lock()
	defer t.seenMu.Unlock()
	now := t.Now()
	for id, r := range rows {
		t.observe(Key{partition, id}, &r, now)
		rows[id] = r
	}
	for k := range t.seen {
		if _, ok := rows[k.Shard]; k.Stream == partition && !ok {
			delete(t.seen, k)
		}
	}
}
