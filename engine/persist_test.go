package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

// newDurableEnv starts an engine on dir with the given clock (the sweeper
// off, as newEnv).
func newDurableEnv(t *testing.T, dir string, clock *engine.ManualClock) *env {
	t.Helper()
	e := newEnv(t, engine.Options{DataDir: dir, Clock: clock})
	e.clock = clock
	return e
}

// crashCopy copies the data directory of a running engine, as a crash at
// this moment would leave it: everything acknowledged is in its files.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range ents {
		if de.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, de.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// populate builds a state that exercises everything persistence keeps: two
// tables (one with a GSI, an LSI, a stream, TTL, tags and a table class),
// a deleted table, puts, updates, deletes, batch and transactional writes,
// a TTL sweep, a rollover and a split.
func populate(e *env) {
	t := e.t
	t.Helper()
	e.createTable("persisted", "N", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String("color"), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String("rank"), AttributeType: types.ScalarAttributeTypeN})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("byColor"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("color"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"note"}},
		}}
		in.LocalSecondaryIndexes = []types.LocalSecondaryIndex{{
			IndexName:  aws.String("byRank"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("rank"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}}
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
		in.Tags = []types.Tag{{Key: aws.String("team"), Value: aws.String("archive")}}
		in.TableClass = types.TableClassStandardInfrequentAccess
	})
	e.createTable("plain", "", nil)
	e.createTable("gone", "", nil)
	e.enableTTL("persisted", "exp")
	ctx := e.ctx
	if _, err := e.db.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String("arn:aws:dynamodb:us-east-1:000000000000:table/persisted"),
		Tags: []types.Tag{{Key: aws.String("env"), Value: aws.String("test")}}}); err != nil {
		t.Fatal(err)
	}
	exp := fmt.Sprint(t0.Add(time.Minute).Unix())
	for i := 0; i < 40; i++ {
		it := item{"pk": S(fmt.Sprintf("p%d", i%5)), "sk": N(fmt.Sprint(i)), "color": S([]string{"red", "blue"}[i%2]), "rank": N(fmt.Sprint(100 - i)), "note": S(strings.Repeat("n", i))}
		if i%7 == 0 {
			it["exp"] = N(exp)
		}
		e.put("persisted", it)
		e.put("plain", item{"pk": S(fmt.Sprintf("k%d", i)), "v": N(fmt.Sprint(i))})
		e.put("gone", item{"pk": S(fmt.Sprintf("k%d", i))})
		if i == 20 {
			if err := e.eng.ForceRollover("persisted"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("persisted"), Key: item{"pk": S("p1"), "sk": N("1")},
		UpdateExpression: aws.String("SET color = :c ADD hits :one"), ExpressionAttributeValues: item{":c": S("green"), ":one": N("1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("persisted"), Key: item{"pk": S("p2"), "sk": N("2")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"plain": {{DeleteRequest: &types.DeleteRequest{Key: item{"pk": S("k3")}}}, {PutRequest: &types.PutRequest{Item: item{"pk": S("batch"), "b": B([]byte{0, 1, 2})}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("persisted"), Item: item{"pk": S("tx"), "sk": N("1"), "set": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}}}},
		{Delete: &types.Delete{TableName: aws.String("plain"), Key: item{"pk": S("k4")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	// UpdateTable: a GSI created over existing items, a stream turned on,
	// written to and turned off again, provisioned billing.
	for _, in := range []*dynamodb.UpdateTableInput{
		{AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("v"), AttributeType: types.ScalarAttributeTypeN}},
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName: aws.String("byV"), KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("v"), KeyType: types.KeyTypeHash}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}}}},
		{StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}},
		{StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}},
		{BillingMode: types.BillingModeProvisioned, ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(7), WriteCapacityUnits: aws.Int64(3)}},
	} {
		in.TableName = aws.String("plain")
		if _, err := e.db.UpdateTable(ctx, in); err != nil {
			t.Fatal(err)
		}
		e.put("plain", item{"pk": S("updated"), "v": N("-1")})
	}
	e.clock.Advance(2 * time.Minute)
	if n := e.sweep(); n != 6 {
		t.Fatalf("swept %d items, want 6", n)
	}
	shards := e.shardIDs("persisted")
	if err := e.eng.SplitShard("persisted", shards[len(shards)-1]); err != nil {
		t.Fatal(err)
	}
	e.put("persisted", item{"pk": S("late"), "sk": N("0"), "color": S("red")})
}

// shardIDs lists the IDs of the table's stream's shards.
func (e *env) shardIDs(table string) []string {
	e.t.Helper()
	arn, err := e.eng.StreamARN(table)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, sh := range e.shards(aws.String(arn)) {
		ids = append(ids, aws.ToString(sh.ShardId))
	}
	return ids
}

// state renders everything a client can observe of the populated tables,
// read through the SDK: descriptions, items, a GSI and an LSI query, TTL,
// tags, the stream's shards and every record (from TRIM_HORIZON, and
// after the middle record of each shard).
func (e *env) state() map[string]string {
	t := e.t
	t.Helper()
	ctx := e.ctx
	out := map[string]string{}
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	lt, err := e.db.ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	out["tables"] = js(lt.TableNames)
	ls, err := e.st.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{})
	if err != nil {
		t.Fatal(err)
	}
	out["streams"] = js(ls.Streams)
	for _, name := range lt.TableNames {
		d, err := e.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		out[name+" describe"] = js(d.Table)
		items := e.scanAll(&dynamodb.ScanInput{TableName: aws.String(name)})
		out[name+" items"] = js(items)
		ttl, err := e.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		out[name+" ttl"] = js(ttl.TimeToLiveDescription)
		tags, err := e.db.ListTagsOfResource(ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: d.Table.TableArn})
		if err != nil {
			t.Fatal(err)
		}
		out[name+" tags"] = js(tags.Tags)
	}
	for _, q := range []struct {
		table, index, cond string
		key                types.AttributeValue
	}{{"persisted", "byColor", "color = :v", S("red")}, {"persisted", "byRank", "pk = :v", S("p3")}, {"plain", "byV", "v = :v", N("7")}} {
		qo, err := e.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(q.table), IndexName: aws.String(q.index),
			KeyConditionExpression: aws.String(q.cond), ExpressionAttributeValues: item{":v": q.key}})
		if err != nil {
			t.Fatal(err)
		}
		out["query "+q.index] = js(qo.Items)
	}
	arn, err := e.eng.StreamARN("persisted")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := e.st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	out["stream"] = js(ds.StreamDescription)
	for _, sh := range ds.StreamDescription.Shards {
		recs := e.readShard(arn, aws.ToString(sh.ShardId), stypes.ShardIteratorTypeTrimHorizon, "")
		out["records "+aws.ToString(sh.ShardId)] = js(recs)
		if len(recs) > 1 {
			mid := aws.ToString(recs[len(recs)/2].Dynamodb.SequenceNumber)
			out["after "+mid] = js(e.readShard(arn, aws.ToString(sh.ShardId), stypes.ShardIteratorTypeAfterSequenceNumber, mid))
		}
	}
	return out
}

// readShard reads a shard from the given position to its end.
func (e *env) readShard(arn, shard string, typ stypes.ShardIteratorType, seq string) []stypes.Record {
	e.t.Helper()
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: typ}
	if seq != "" {
		in.SequenceNumber = aws.String(seq)
	}
	it, err := e.st.GetShardIterator(e.ctx, in)
	if err != nil {
		e.t.Fatal(err)
	}
	var all []stypes.Record
	iter := it.ShardIterator
	for iter != nil {
		out, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, out.Records...)
		if len(out.Records) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return all
}

// sameState fails the test with every part of the state that differs.
func sameState(t *testing.T, want, got map[string]string) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if want[k] != got[k] {
			t.Errorf("%s after the restart:\n got  %s\n want %s", k, got[k], want[k])
		}
	}
}

func TestPersistRestartKeepsEverything(t *testing.T) {
	for _, c := range []struct {
		name    string
		restart func(t *testing.T, e *env, dir string) string // returns the directory to start from
	}{
		{"clean close (snapshot)", func(t *testing.T, e *env, dir string) string {
			if err := e.srv.Close(); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		{"crash, log only", func(t *testing.T, e *env, dir string) string {
			return crashCopy(t, dir)
		}},
		{"crash, snapshot and log", func(t *testing.T, e *env, dir string) string {
			return crashCopy(t, dir)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := engine.NewManualClock(t0)
			e := newDurableEnv(t, dir, clock)
			if strings.Contains(c.name, "snapshot and log") {
				e.createTable("early", "", nil)
				e.put("early", item{"pk": S("before the snapshot")})
				if err := e.eng.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			populate(e)
			want := e.state()
			from := c.restart(t, e, dir)
			e2 := newDurableEnv(t, from, clock)
			sameState(t, want, e2.state())
			// The restarted engine logs its own writes: they survive the
			// next restart too.
			e2.put("persisted", item{"pk": S("restarted"), "sk": N("1"), "color": S("red")})
			want = e2.state()
			if err := e2.srv.Close(); err != nil {
				t.Fatal(err)
			}
			sameState(t, want, newDurableEnv(t, from, clock).state())
		})
	}
}

func TestPersistSecondEngineRefused(t *testing.T) {
	dir := t.TempDir()
	e := newDurableEnv(t, dir, engine.NewManualClock(t0))
	_, err := engine.New(engine.Options{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "another engine holds") {
		t.Fatalf("second engine on %s: %v, want an error naming the directory and the other engine", dir, err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := engine.New(engine.Options{DataDir: dir, TTLInterval: -1})
	if err != nil {
		t.Fatalf("after the first engine closed: %v", err)
	}
	e2.Close()
}

// newestSegment returns the path of the data directory's newest log
// segment.
func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segment in %s (%v)", dir, err)
	}
	sort.Strings(segs)
	return segs[len(segs)-1]
}

func TestPersistTornTail(t *testing.T) {
	for _, c := range []struct {
		name string
		tail []byte
	}{
		{"half a header", []byte{0x20, 0}},
		{"length past the end", []byte{0xff, 0, 0, 0, 1, 2, 3, 4, 9, 9}},
		{"bad checksum", []byte{3, 0, 0, 0, 1, 2, 3, 4, 3, 'a', 'b'}},
		{"zeros", make([]byte, 4096)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := engine.NewManualClock(t0)
			e := newDurableEnv(t, dir, clock)
			e.createTable("torn", "", nil)
			e.put("torn", item{"pk": S("kept")})
			crashed := crashCopy(t, dir)
			f, err := os.OpenFile(newestSegment(t, crashed), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(c.tail)
			f.Close()
			e2 := newDurableEnv(t, crashed, clock)
			if got := e2.get("torn", item{"pk": S("kept")}); got == nil {
				t.Fatal("the acknowledged item is gone after a torn tail")
			}
			e2.put("torn", item{"pk": S("after")})
			e2.srv.Close()
			if got := newDurableEnv(t, crashed, clock).get("torn", item{"pk": S("after")}); got == nil {
				t.Fatal("a write after recovering from a torn tail is gone")
			}
		})
	}
}

func TestPersistCorruptionIsAnError(t *testing.T) {
	for _, c := range []struct {
		name   string
		file   func(t *testing.T, dir string) string // the file to damage
		damage func(b []byte) []byte
		want   string
	}{
		{"log entry followed by others", newestSegment, func(b []byte) []byte { b[20] ^= 0xff; return b }, "corrupt entry at offset 0"},
		{"snapshot entry", snapshotOf, func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }, "entry at offset"},
		{"snapshot cut short", snapshotOf, func(b []byte) []byte { return b[:len(b)-9] }, "cut short"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			e := newDurableEnv(t, dir, engine.NewManualClock(t0))
			e.createTable("corrupt", "", nil)
			for i := 0; i < 5; i++ {
				e.put("corrupt", item{"pk": S(fmt.Sprint(i)), "pad": S(strings.Repeat("x", 100))})
			}
			if err := e.eng.Snapshot(); err != nil {
				t.Fatal(err)
			}
			e.put("corrupt", item{"pk": S("after the snapshot")})
			e.put("corrupt", item{"pk": S("and another")})
			crashed := crashCopy(t, dir)
			path := c.file(t, crashed)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, c.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = engine.New(engine.Options{DataDir: crashed, TTLInterval: -1})
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New on a damaged %s: %v, want an error naming %s and containing %q", c.name, err, path, c.want)
			}
		})
	}
}

// snapshotOf returns the path of the data directory's snapshot.
func snapshotOf(t *testing.T, dir string) string { return filepath.Join(dir, "snapshot") }

func TestPersistTTLExpiredWhileDown(t *testing.T) {
	dir := t.TempDir()
	clock := engine.NewManualClock(t0)
	e := newDurableEnv(t, dir, clock)
	e.createTable("ttl", "", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeOldImage}
	})
	e.enableTTL("ttl", "exp")
	e.put("ttl", item{"pk": S("expires"), "exp": N(fmt.Sprint(t0.Add(time.Minute).Unix()))})
	e.put("ttl", item{"pk": S("stays"), "exp": N(fmt.Sprint(t0.Add(time.Hour).Unix()))})
	e.srv.Close()

	clock.Advance(2 * time.Minute) // the engine is down meanwhile
	e2 := newDurableEnv(t, dir, clock)
	if n := e2.sweep(); n != 1 {
		t.Fatalf("the first sweep after the restart deleted %d items, want 1", n)
	}
	if e2.get("ttl", item{"pk": S("expires")}) != nil || e2.get("ttl", item{"pk": S("stays")}) == nil {
		t.Fatal("wrong items left after the sweep")
	}
	arn, _ := e2.eng.StreamARN("ttl")
	recs := e2.readShard(arn, e2.shardIDs("ttl")[0], stypes.ShardIteratorTypeTrimHorizon, "")
	last := recs[len(recs)-1]
	if len(recs) != 3 || last.EventName != stypes.OperationTypeRemove || last.UserIdentity == nil || aws.ToString(last.UserIdentity.PrincipalId) != "dynamodb.amazonaws.com" {
		t.Fatalf("stream after the restart and sweep: %d records, last %+v; want 2 INSERTs and a service REMOVE", len(recs), last)
	}
	e2.srv.Close()
	if e3 := newDurableEnv(t, dir, clock); e3.get("ttl", item{"pk": S("expires")}) != nil {
		t.Fatal("the sweep's delete did not survive the next restart")
	}
}

// TestPersistStartupTime measures start-up on a table with a GSI and a
// stream holding ENGINE_PERSIST_ITEMS items (default 20000; set 1000000
// for the full measurement): from the snapshot a clean Close writes, and
// from a crash copy (the snapshots taken as the log grew, plus the log).
func TestPersistStartupTime(t *testing.T) {
	n := 20000
	if s := os.Getenv("ENGINE_PERSIST_ITEMS"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			t.Fatalf("ENGINE_PERSIST_ITEMS=%q: want a positive count", s)
		}
	}
	dir := t.TempDir()
	clock := engine.NewManualClock(t0)
	e := newDurableEnv(t, dir, clock)
	e.createTable("big", "", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("byG"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}}
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}
	})
	// Writing a million items through HTTP outlasts env's context.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	const workers, batch = 8, 25
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * batch; i < n; i += workers * batch {
				var reqs []types.WriteRequest
				for j := i; j < min(i+batch, n); j++ {
					reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item{
						"pk": S(fmt.Sprintf("item-%08d", j)), "g": S(fmt.Sprint(j % 1000)), "v": N(fmt.Sprint(j)), "pad": S("0123456789abcdef0123456789abcdef")}}})
				}
				if _, err := e.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"big": reqs}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d items written in %v", n, time.Since(start))
	crashed := crashCopy(t, dir)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, dir string }{{"snapshot", dir}, {"crash copy", crashed}} {
		start := time.Now()
		eng, err := engine.New(engine.Options{DataDir: c.dir, Clock: clock, TTLInterval: -1})
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("start-up from the %s with %d items (GSI, stream): %v", c.name, n, took)
		if took > 30*time.Second {
			t.Errorf("start-up took %v, want well under a minute", took)
		}
		eng.Close()
	}
}

func TestPersistIteratorSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clock := engine.NewManualClock(t0)
	e := newDurableEnv(t, dir, clock)
	d := e.createTable("iter", "", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}
	})
	e.put("iter", item{"pk": S("a")})
	e.put("iter", item{"pk": S("b")})
	it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: d.LatestStreamArn,
		ShardId: aws.String(e.shardIDs("iter")[0]), ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	e2 := newDurableEnv(t, dir, clock)
	out, err := e2.st.GetRecords(e2.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil || len(out.Records) != 2 {
		t.Fatalf("GetRecords after a restart with an iterator from before it: %v, %d records; want the 2 records", err, len(out.Records))
	}
}

// BenchmarkPersistPutItem compares concurrent PutItem over HTTP in memory
// and with a data directory (every answer waits for a group-commit fsync).
func BenchmarkPersistPutItem(b *testing.B) {
	for _, durable := range []bool{false, true} {
		b.Run(fmt.Sprintf("durable=%v", durable), func(b *testing.B) {
			o := engine.Options{}
			if durable {
				o.DataDir = b.TempDir()
			}
			e := newEnv(b, o)
			e.createTable("bench", "", func(in *dynamodb.CreateTableInput) {
				in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
			})
			var n atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := n.Add(1)
					if _, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("bench"),
						Item: item{"pk": S(fmt.Sprint(k)), "v": N(fmt.Sprint(k)), "pad": S("0123456789abcdef0123456789abcdef")}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// A table created after a restart at the same (manual) time as one created
// before it gets its own TableId, and the two tables' items stay apart.
func TestPersistNewTableAfterRestart(t *testing.T) {
	dir := t.TempDir()
	clock := engine.NewManualClock(t0)
	e := newDurableEnv(t, dir, clock)
	first := e.createTable("first", "", nil)
	e.put("first", item{"pk": S("one")})
	e.srv.Close()
	e2 := newDurableEnv(t, dir, clock)
	second := e2.createTable("second", "", nil)
	e2.put("second", item{"pk": S("two")})
	if aws.ToString(first.TableId) == aws.ToString(second.TableId) {
		t.Fatalf("both tables have TableId %s", aws.ToString(first.TableId))
	}
	e2.srv.Close()
	e3 := newDurableEnv(t, dir, clock)
	if e3.get("first", item{"pk": S("two")}) != nil || e3.get("second", item{"pk": S("one")}) != nil ||
		e3.get("first", item{"pk": S("one")}) == nil || e3.get("second", item{"pk": S("two")}) == nil {
		t.Fatal("the tables' items are mixed up after a restart")
	}
}

// Snapshots taken while writers run (fuzzy: the log written meanwhile is
// replayed over them) lose and resurrect nothing: a crash copy taken after
// the writers stop reads the same as the engine.
func TestPersistSnapshotUnderWrites(t *testing.T) {
	dir := t.TempDir()
	clock := engine.NewManualClock(t0)
	e := newDurableEnv(t, dir, clock)
	e.createTable("busy", "N", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	})
	stop := make(chan struct{})
	snaps := make(chan int)
	go func() {
		n := 0
		defer func() { snaps <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := e.eng.Snapshot(); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				key := item{"pk": S(fmt.Sprint(i % 10)), "sk": N(fmt.Sprint(w))}
				var err error
				switch i % 3 {
				case 0, 1:
					_, err = e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("busy"), Item: item{"pk": key["pk"], "sk": key["sk"], "i": N(fmt.Sprint(i))}})
				case 2:
					_, err = e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("busy"), Key: key})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	t.Logf("%d snapshots taken during the writes", <-snaps)
	read := func(e *env) map[string]string {
		arn, _ := e.eng.StreamARN("busy")
		out := map[string]string{}
		b, _ := json.Marshal(e.scanAll(&dynamodb.ScanInput{TableName: aws.String("busy")}))
		out["items"] = string(b)
		for _, id := range e.shardIDs("busy") {
			b, _ := json.Marshal(e.readShard(arn, id, stypes.ShardIteratorTypeTrimHorizon, ""))
			out[id] = string(b)
		}
		return out
	}
	want := read(e)
	sameState(t, want, read(newDurableEnv(t, crashCopy(t, dir), clock)))
}

// TestPersistClosedEngineRefusesRequests: with a data directory, requests
// after Close are refused with a 503 ServiceUnavailable (retryable) before
// they change anything, so a refused write is not in the next engine on
// the directory either.
func TestPersistClosedEngineRefusesRequests(t *testing.T) {
	dir := t.TempDir()
	e := newDurableEnv(t, dir, engine.NewManualClock(t0))
	e.createTable("Late", "", nil)
	if err := e.eng.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("Late"),
		Item: map[string]types.AttributeValue{"pk": S("late")}})
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != 503 || errCode(err) != "ServiceUnavailable" {
		t.Fatalf("PutItem after Close: %v, want a 503 ServiceUnavailable", err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e.closed = true
	e2 := newDurableEnv(t, dir, engine.NewManualClock(t0))
	out, err := e2.db.GetItem(e2.ctx, &dynamodb.GetItemInput{TableName: aws.String("Late"),
		Key: map[string]types.AttributeValue{"pk": S("late")}})
	if err != nil || out.Item != nil {
		t.Fatalf("the refused write is in the next engine: %v, %v", out.Item, err)
	}
}
