package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

func TestTTLRules(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("ttl1", "", nil)
	e.enableTTL("ttl1", "exp")
	now := t0.Unix()
	fiveY := int64(5 * 365 * 24 * 3600)
	cases := []struct {
		name    string
		v       types.AttributeValue
		expires bool
	}{
		{"past", N(fmt.Sprint(now - 10)), true},
		{"one second ago", N(fmt.Sprint(now - 1)), true},
		{"now", N(fmt.Sprint(now)), false},
		{"future", N(fmt.Sprint(now + 10)), false},
		{"decimal past", N(fmt.Sprintf("%d.75", now-1)), true},
		{"decimal future", N(fmt.Sprintf("%d.25", now)), false},
		{"exponent past", N(fmt.Sprintf("%d.%dE9", (now-100)/1e9, (now-100)%1e9)), true},
		{"exponent now", N(fmt.Sprintf("%d.%dE9", now/1e9, now%1e9)), false},
		{"four years ago", N(fmt.Sprint(now - fiveY + 100*86400)), true},
		{"more than five years ago", N(fmt.Sprint(now - fiveY - 100)), false},
		{"zero", N("0"), false},
		{"negative", N("-5"), false},
		{"milliseconds", N(fmt.Sprint((now - 10) * 1000)), false},
		{"string", S(fmt.Sprint(now - 10)), false},
		{"bool", BOOL(true), false},
		{"number set", &types.AttributeValueMemberNS{Value: []string{fmt.Sprint(now - 10)}}, false},
		{"missing", nil, false},
	}
	for _, c := range cases {
		it := item{"pk": S(c.name)}
		if c.v != nil {
			it["exp"] = c.v
		}
		e.put("ttl1", it)
	}
	// Expired but unswept items stay readable.
	if got := e.get("ttl1", item{"pk": S("past")}); got == nil {
		t.Fatal("expired item not readable before the sweep")
	}
	want := 0
	for _, c := range cases {
		if c.expires {
			want++
		}
	}
	if n := e.sweep(); n != want {
		t.Errorf("swept %d, want %d", n, want)
	}
	for _, c := range cases {
		got := e.get("ttl1", item{"pk": S(c.name)})
		if (got == nil) != c.expires {
			t.Errorf("%s: deleted=%v, want %v", c.name, got == nil, c.expires)
		}
	}
	if n := e.sweep(); n != 0 {
		t.Errorf("second sweep deleted %d", n)
	}
	// Disabling TTL stops deletions; enabling another attribute applies it.
	e.put("ttl1", item{"pk": S("later"), "exp": N(fmt.Sprint(now - 10)), "other": N(fmt.Sprint(now - 10))})
	_, err := e.db.UpdateTimeToLive(e.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("ttl1"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(false)}})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.sweep(); n != 0 {
		t.Fatalf("sweep with TTL disabled deleted %d", n)
	}
	e.enableTTL("ttl1", "other")
	if n := e.sweep(); n != 1 {
		t.Fatalf("sweep on the new attribute deleted %d", n)
	}
}

func TestTTLIndexesAndUpdateBeforeSweep(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("ttl2", "S", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String("l"), AttributeType: types.ScalarAttributeTypeN})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{IndexName: aws.String("gsi"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}
		in.LocalSecondaryIndexes = []types.LocalSecondaryIndex{{IndexName: aws.String("lsi"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("l"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}}
	})
	e.enableTTL("ttl2", "exp")
	past := N(fmt.Sprint(t0.Unix() - 60))
	for i := 0; i < 5; i++ {
		e.put("ttl2", item{"pk": S("p"), "sk": S(fmt.Sprint(i)), "g": S("G"), "l": N(fmt.Sprint(i)), "exp": past})
	}
	// Item 0 moves its TTL into the future, item 1 removes it: both survive.
	for i, upd := range []string{"SET exp = :f", "REMOVE exp"} {
		in := &dynamodb.UpdateItemInput{TableName: aws.String("ttl2"), Key: item{"pk": S("p"), "sk": S(fmt.Sprint(i))}, UpdateExpression: aws.String(upd)}
		if i == 0 {
			in.ExpressionAttributeValues = item{":f": N(fmt.Sprint(t0.Unix() + 3600))}
		}
		if _, err := e.db.UpdateItem(e.ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.sweep(); n != 3 {
		t.Fatalf("swept %d, want 3", n)
	}
	count := func(index, cond string, vals item) int32 {
		out, err := e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("ttl2"), IndexName: aws.String(index), KeyConditionExpression: aws.String(cond), ExpressionAttributeValues: vals})
		if err != nil {
			t.Fatal(err)
		}
		return out.Count
	}
	if c := count("gsi", "g = :g", item{":g": S("G")}); c != 2 {
		t.Fatalf("gsi holds %d items after the sweep, want 2", c)
	}
	if c := count("lsi", "pk = :p AND l >= :z", item{":p": S("p"), ":z": N("0")}); c != 2 {
		t.Fatalf("lsi holds %d items after the sweep, want 2", c)
	}
	d, _ := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("ttl2")})
	if aws.ToInt64(d.Table.ItemCount) != 2 || aws.ToInt64(d.Table.GlobalSecondaryIndexes[0].ItemCount) != 2 || aws.ToInt64(d.Table.LocalSecondaryIndexes[0].ItemCount) != 2 {
		t.Fatalf("counts after sweep: %+v", d.Table)
	}
	// Time passes: the future TTL expires too.
	e.clock.Advance(2 * time.Hour)
	if n := e.sweep(); n != 1 {
		t.Fatalf("later sweep deleted %d, want 1", n)
	}
}

// readAll drains every shard of the table's latest stream from TRIM_HORIZON.
func (e *env) readAll(table string) []stypes.Record {
	e.t.Helper()
	d, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		e.t.Fatal(err)
	}
	arn := d.Table.LatestStreamArn
	var shards []stypes.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: arn}
	for {
		out, err := e.st.DescribeStream(e.ctx, in)
		if err != nil {
			e.t.Fatal(err)
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
	var recs []stypes.Record
	for _, sh := range shards {
		it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			e.t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				e.t.Fatal(err)
			}
			recs = append(recs, out.Records...)
			if len(out.Records) == 0 && sh.SequenceNumberRange.EndingSequenceNumber == nil {
				break // open shard drained
			}
			iter = out.NextShardIterator
		}
	}
	return recs
}

func TestTTLServiceDeletesInStream(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("ttl3", "", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	})
	e.enableTTL("ttl3", "exp")
	e.put("ttl3", item{"pk": S("expired"), "exp": N(fmt.Sprint(t0.Unix() - 5)), "data": S("keep me")})
	e.put("ttl3", item{"pk": S("user"), "exp": N(fmt.Sprint(t0.Unix() - 5))})
	if _, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("ttl3"), Key: item{"pk": S("user")}}); err != nil {
		t.Fatal(err)
	}
	if n := e.sweep(); n != 1 {
		t.Fatalf("swept %d", n)
	}
	recs := e.readAll("ttl3")
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	var removes int
	for _, r := range recs {
		if r.EventName != stypes.OperationTypeRemove {
			if r.UserIdentity != nil {
				t.Errorf("%s record has userIdentity", r.EventName)
			}
			continue
		}
		removes++
		pk := r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS).Value
		switch pk {
		case "expired":
			if r.UserIdentity == nil || aws.ToString(r.UserIdentity.Type) != "Service" || aws.ToString(r.UserIdentity.PrincipalId) != "dynamodb.amazonaws.com" {
				t.Errorf("TTL delete userIdentity %+v", r.UserIdentity)
			}
			if v, ok := r.Dynamodb.OldImage["data"].(*stypes.AttributeValueMemberS); !ok || v.Value != "keep me" {
				t.Errorf("TTL delete OldImage %+v", r.Dynamodb.OldImage)
			}
		case "user":
			if r.UserIdentity != nil {
				t.Errorf("user delete has userIdentity %+v", r.UserIdentity)
			}
		}
	}
	if removes != 2 {
		t.Fatalf("%d REMOVE records", removes)
	}
}

func TestTTLLag(t *testing.T) {
	e := newEnv(t, engine.Options{TTLLag: time.Hour})
	e.createTable("ttl4", "", nil)
	e.enableTTL("ttl4", "exp")
	for i := 0; i < 50; i++ {
		e.put("ttl4", item{"pk": S(fmt.Sprint(i)), "exp": N(fmt.Sprint(t0.Unix()))})
	}
	e.clock.Advance(time.Second)
	first := e.sweep()
	e.clock.Advance(30 * time.Minute)
	mid := e.sweep()
	e.clock.Advance(31 * time.Minute)
	last := e.sweep()
	if first+mid+last != 50 || mid == 0 || last == 0 {
		t.Fatalf("lagged deletions %d, %d, %d", first, mid, last)
	}
}

func TestBackgroundSweeper(t *testing.T) {
	e := newEnv(t, engine.Options{TTLInterval: 20 * time.Millisecond})
	e.createTable("ttl5", "", nil)
	e.enableTTL("ttl5", "exp")
	e.put("ttl5", item{"pk": S("a"), "exp": N(fmt.Sprint(t0.Unix() + 30))})
	e.clock.Advance(time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for e.get("ttl5", item{"pk": S("a")}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("background sweeper never deleted the item")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSweepConcurrentWithTraffic sweeps a table while clients write and
// read it (meaningful under -race), then checks every expired item went and
// every refreshed one stayed.
func TestSweepConcurrentWithTraffic(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("ttl6", "N", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}
	})
	e.enableTTL("ttl6", "exp")
	const n = 6000
	var batch []types.WriteRequest
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"ttl6": batch}}); err != nil {
			t.Fatal(err)
		}
		batch = nil
	}
	for i := 0; i < n; i++ {
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(fmt.Sprint(i % 7)), "sk": N(fmt.Sprint(i)), "exp": N(fmt.Sprint(t0.Unix() - 1))}}})
		if len(batch) == 25 {
			flush()
		}
	}
	flush()
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	swept := make(chan int, 1)
	go func() {
		n, err := e.eng.SweepTTL(e.ctx)
		if err != nil {
			t.Error(err)
		}
		swept <- n
	}()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 200; i++ {
				_, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("ttl6"), Item: item{"pk": S("fresh"), "sk": N(fmt.Sprint(w*1000 + i)), "exp": N(fmt.Sprint(t0.Unix() + 100))}})
				if err != nil && ctx.Err() == nil {
					t.Error(err)
				}
				_, err = e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("ttl6"), Key: item{"pk": S("3"), "sk": N(fmt.Sprint(i))}})
				if err != nil && ctx.Err() == nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	total := <-swept
	total += e.sweep()
	if total != n {
		t.Fatalf("swept %d, want %d", total, n)
	}
	out, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("ttl6"), Select: types.SelectCount})
	if err != nil || out.Count != 800 {
		t.Fatalf("left %d items (err %v), want 800", out.Count, err)
	}
}

// TestTTLRemoveSameShardAndSize: on a stream with several shards each TTL
// REMOVE lands in the shard of the item's INSERT, and its SizeBytes and
// OldImage equal those of a user delete of an identical item.
func TestTTLRemoveSameShardAndSize(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 4})
	e.createTable("ttl7", "N", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	})
	e.enableTTL("ttl7", "exp")
	for i := 0; i < 40; i++ {
		e.put("ttl7", item{"pk": S(fmt.Sprint("k", i)), "sk": N("1"), "exp": N(fmt.Sprint(t0.Unix() - 1)), "m": &types.AttributeValueMemberM{Value: item{"a": S("x")}}})
	}
	// User-delete twins of k0 and k1 under other keys with equal-size values.
	e.put("ttl7", item{"pk": S("u0"), "sk": N("1"), "exp": N(fmt.Sprint(t0.Unix() + 999)), "m": &types.AttributeValueMemberM{Value: item{"a": S("x")}}})
	if _, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("ttl7"), Key: item{"pk": S("u0"), "sk": N("1")}}); err != nil {
		t.Fatal(err)
	}
	if n := e.sweep(); n != 40 {
		t.Fatalf("swept %d", n)
	}
	d, _ := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("ttl7")})
	shardOf := map[string]string{}
	var ttlSize, userSize int64
	for _, sh := range e.shards(d.Table.LatestStreamArn) {
		it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: d.Table.LatestStreamArn, ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Records {
			pk := r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS).Value
			if r.EventName == stypes.OperationTypeInsert {
				shardOf[pk] = aws.ToString(sh.ShardId)
				continue
			}
			if shardOf[pk] != aws.ToString(sh.ShardId) {
				t.Fatalf("%s: REMOVE in shard %s, INSERT in %s", pk, aws.ToString(sh.ShardId), shardOf[pk])
			}
			if r.Dynamodb.OldImage["m"] == nil || len(r.Dynamodb.Keys) != 2 {
				t.Fatalf("%s: REMOVE record %+v", pk, r.Dynamodb)
			}
			switch pk {
			case "k0":
				ttlSize = aws.ToInt64(r.Dynamodb.SizeBytes)
			case "u0":
				userSize = aws.ToInt64(r.Dynamodb.SizeBytes)
			}
		}
	}
	if ttlSize == 0 || ttlSize != userSize {
		t.Fatalf("SizeBytes: TTL delete %d, user delete %d", ttlSize, userSize)
	}
}
