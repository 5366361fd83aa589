package checkpoint

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The lease table's items as this worker reads them: one row per item,
// decoded, and observed on this worker's clock.

type leaseKey struct{ stream, shard string }

type row struct {
	shard      string
	owner      string
	counter    int64
	expiryMS   int64
	checkpoint string
	finished   bool
	parents    []string
	handoff    string
	updatedMS  int64
	sweepMS    int64 // sweeper items only: the cursor
	exists     bool
	// Set by observe for rows read from the table: when this worker
	// first saw the row's current version, and when its lease expires
	// by this worker's clock.
	observed      bool
	seenAt        time.Time
	localExpiryMS int64
}

// expired reports whether r's lease has expired at now (this worker's
// clock). A row not read from the table goes by its written expiry.
func (r row) expired(now time.Time) bool {
	if r.observed {
		return r.localExpiryMS <= now.UnixMilli()
	}
	return r.expiryMS <= now.UnixMilli()
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
func (t *leaseTable) observe(k leaseKey, r *row, now time.Time) {
	if !r.exists {
		delete(t.seen, k)
		return
	}
	v, ok := t.seen[k]
	if !ok || v.owner != r.owner || v.counter != r.counter || v.expiry != r.expiryMS {
		v = seenVersion{owner: r.owner, counter: r.counter, expiry: r.expiryMS, at: now}
		t.seen[k] = v
	}
	r.observed, r.seenAt, r.localExpiryMS = true, v.at, r.expiryMS
	if r.owner != t.worker {
		r.localExpiryMS = v.at.Add(t.leaseD).UnixMilli()
	}
}

// live reports whether r's lease is held by someone at now.
func (r row) live(now time.Time) bool { return r.owner != "" && !r.expired(now) }

func itemKey(stream, shard string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrStream: &types.AttributeValueMemberS{Value: stream},
		attrShard:  &types.AttributeValueMemberS{Value: shard},
	}
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func decodeRow(it map[string]types.AttributeValue) (row, error) {
	var r row
	if it == nil {
		return r, nil
	}
	r.exists = true
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
	if r.shard, err = str(attrShard); err != nil {
		return r, err
	}
	if r.owner, err = str(attrOwner); err != nil {
		return r, err
	}
	if r.checkpoint, err = str(attrCheckpt); err != nil {
		return r, err
	}
	if r.handoff, err = str(attrHandoff); err != nil {
		return r, err
	}
	if r.counter, err = number(attrCounter); err != nil {
		return r, err
	}
	if r.expiryMS, err = number(attrExpiry); err != nil {
		return r, err
	}
	if r.updatedMS, err = number(attrUpdated); err != nil {
		return r, err
	}
	if r.sweepMS, err = number(attrSweepCursor); err != nil {
		return r, err
	}
	if v, ok := it[attrFinished].(*types.AttributeValueMemberBOOL); ok {
		r.finished = v.Value
	}
	if v, ok := it[attrParents].(*types.AttributeValueMemberSS); ok {
		r.parents = v.Value
	}
	return r, nil
}

// queryRows reads every shard item of the stream (consistent read).
func (t *leaseTable) queryRows(ctx context.Context, partition string) (map[string]row, error) {
	rows := map[string]row{}
	var start map[string]types.AttributeValue
	for {
		var out *dynamodb.QueryOutput
		err := t.retry(ctx, func(ctx context.Context) error {
			var err error
			out, err = t.client.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(t.table),
				KeyConditionExpression:    aws.String(attrStream + " = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: partition}},
				ConsistentRead:            aws.Bool(true),
				ExclusiveStartKey:         start,
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("checkpoint: query %s in table %s: %w", partition, t.table, err)
		}
		for _, it := range out.Items {
			r, err := decodeRow(it)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: table %s, %s: bad item: %w", t.table, partition, err)
			}
			rows[r.shard] = r
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
func (t *leaseTable) observeAll(partition string, rows map[string]row) {
	t.seenMu.Lock()
	defer t.seenMu.Unlock()
	now := t.now()
	for id, r := range rows {
		t.observe(leaseKey{partition, id}, &r, now)
		rows[id] = r
	}
	for k := range t.seen {
		if _, ok := rows[k.shard]; k.stream == partition && !ok {
			delete(t.seen, k)
		}
	}
}
