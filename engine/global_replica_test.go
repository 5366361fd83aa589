package engine_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sttypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// global is a bed with a manual clock, the sweeper off, and a table
// "Sessions" (TTL on "exp") in us-east-1 replicated to the other regions.
type global struct {
	b       *enginetest.Bed
	clock   *engine.ManualClock
	regions map[string]enginetest.Regional
	streams map[string]string // stream ARN by Region
}

func newGlobal(t *testing.T, dir string, regions ...string) *global {
	t.Helper()
	clock := engine.NewManualClock(t0)
	g := &global{clock: clock, regions: map[string]enginetest.Regional{}, streams: map[string]string{}}
	g.b = enginetest.Start(t, engine.Options{TTLInterval: -1, Clock: clock, DataDir: dir})
	for _, r := range append([]string{"us-east-1"}, regions...) {
		g.regions[r] = g.b.In(r)
	}
	if dir != "" {
		return g
	}
	enginetest.CreateTable(t, g.regions["us-east-1"].DynamoDB, enginetest.Table{Name: "Sessions", TTL: "exp"})
	for _, r := range regions {
		g.addReplica(t, r)
	}
	g.refresh(t)
	return g
}

func (g *global) addReplica(t *testing.T, region string) {
	t.Helper()
	out, err := g.regions["us-east-1"].DynamoDB.UpdateTable(t.Context(), &dynamodb.UpdateTableInput{TableName: aws.String("Sessions"),
		ReplicaUpdates: []types.ReplicationGroupUpdate{{Create: &types.CreateReplicationGroupMemberAction{RegionName: aws.String(region)}}}})
	if err != nil {
		t.Fatalf("UpdateTable add replica %s: %v", region, err)
	}
	if out.TableDescription.TableStatus != types.TableStatusUpdating {
		t.Errorf("UpdateTable answered TableStatus %s, want UPDATING", out.TableDescription.TableStatus)
	}
}

// refresh reads every Region's stream ARN.
func (g *global) refresh(t *testing.T) {
	t.Helper()
	for r, c := range g.regions {
		d, err := c.DynamoDB.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String("Sessions")})
		if err != nil {
			t.Fatalf("DescribeTable in %s: %v", r, err)
		}
		g.streams[r] = aws.ToString(d.Table.LatestStreamArn)
	}
}

func (g *global) put(t *testing.T, region string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := g.regions[region].DynamoDB.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("Sessions"), Item: item}); err != nil {
		t.Fatalf("PutItem in %s: %v", region, err)
	}
}

func (g *global) get(t *testing.T, region, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := g.regions[region].DynamoDB.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("Sessions"),
		Key: map[string]types.AttributeValue{"pk": S(pk)}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem in %s: %v", region, err)
	}
	return out.Item
}

func (g *global) wait(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := g.b.Engine.WaitReplication(ctx); err != nil {
		t.Fatal(err)
	}
}

// records reads a Region's stream.
func (g *global) records(t *testing.T, region string) []sttypes.Record {
	t.Helper()
	return readStream(t, g.regions[region].Streams, g.streams[region])
}

// summary renders records as "EVENT pk [svc]" lines.
func summary(recs []sttypes.Record) string {
	var out []string
	for _, r := range recs {
		line := string(r.EventName) + " " + r.Dynamodb.Keys["pk"].(*sttypes.AttributeValueMemberS).Value
		if r.UserIdentity != nil {
			line += " svc"
		}
		if r.EventName == sttypes.OperationTypeRemove && r.Dynamodb.OldImage == nil {
			line += " no-old-image"
		}
		out = append(out, line)
	}
	return strings.Join(out, ",")
}

func TestReplicaDescribe(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1", "ap-south-1")
	for r, c := range g.regions {
		d, err := c.DynamoDB.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String("Sessions")})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, rep := range d.Table.Replicas {
			names = append(names, aws.ToString(rep.RegionName)+"="+string(rep.ReplicaStatus))
		}
		if aws.ToString(d.Table.GlobalTableVersion) != "2019.11.21" || len(names) != 2 || strings.Contains(strings.Join(names, ","), r) {
			t.Errorf("%s: version %s replicas %v: want 2019.11.21 and the two other Regions", r, aws.ToString(d.Table.GlobalTableVersion), names)
		}
		if d.Table.StreamSpecification == nil || d.Table.StreamSpecification.StreamViewType != types.StreamViewTypeNewAndOldImages {
			t.Errorf("%s: stream %+v, want NEW_AND_OLD_IMAGES", r, d.Table.StreamSpecification)
		}
		ttl, err := c.DynamoDB.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("Sessions")})
		if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "exp" {
			t.Errorf("%s: TTL %+v, %v; want exp", r, ttl, err)
		}
	}
}

// Writes in every Region reach every other; a user delete is a plain
// REMOVE everywhere; replicated writes carry no userIdentity.
func TestReplicationWrites(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("a"), "v": N("1")})
	g.put(t, "eu-west-1", map[string]types.AttributeValue{"pk": S("b"), "v": N("2")})
	g.wait(t)
	for _, r := range []string{"us-east-1", "eu-west-1"} {
		if g.get(t, r, "a") == nil || g.get(t, r, "b") == nil {
			t.Fatalf("%s lacks a replicated item", r)
		}
	}
	if _, err := g.regions["eu-west-1"].DynamoDB.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String("Sessions"),
		Key: map[string]types.AttributeValue{"pk": S("a")}}); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	if g.get(t, "us-east-1", "a") != nil {
		t.Fatal("a user delete in eu-west-1 did not reach us-east-1")
	}
	for r, want := range map[string]string{"us-east-1": "INSERT a,INSERT b,REMOVE a", "eu-west-1": "INSERT a,INSERT b,REMOVE a"} {
		if got := summary(g.records(t, r)); got != want {
			t.Errorf("%s stream: %s, want %s", r, got, want)
		}
	}
}

// An expired item is deleted by one Region's TTL, the Region that wrote it
// last: a service REMOVE in that Region's stream, a plain REMOVE with the
// old image in every other Region's.
func TestReplicaTTLOwner(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1", "ap-south-1")
	exp := N(itoa(t0.Add(time.Hour).Unix()))
	g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("e1"), "exp": exp})
	g.put(t, "eu-west-1", map[string]types.AttributeValue{"pk": S("w1"), "exp": exp})
	g.put(t, "ap-south-1", map[string]types.AttributeValue{"pk": S("s1"), "exp": exp})
	g.wait(t)
	g.clock.Advance(2 * time.Hour)
	if _, err := g.b.Engine.SweepTTL(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	for r := range g.regions {
		for _, pk := range []string{"e1", "w1", "s1"} {
			if g.get(t, r, pk) != nil {
				t.Errorf("%s still holds %s", r, pk)
			}
		}
	}
	owner := map[string]string{"e1": "us-east-1", "w1": "eu-west-1", "s1": "ap-south-1"}
	for r := range g.regions {
		recs := g.records(t, r)
		for _, rec := range recs {
			if rec.EventName != sttypes.OperationTypeRemove {
				continue
			}
			pk := rec.Dynamodb.Keys["pk"].(*sttypes.AttributeValueMemberS).Value
			svc := rec.UserIdentity != nil
			if svc != (owner[pk] == r) {
				t.Errorf("%s: REMOVE %s service=%v; its owner is %s", r, pk, svc, owner[pk])
			}
			if rec.Dynamodb.OldImage == nil {
				t.Errorf("%s: REMOVE %s without its old image", r, pk)
			}
		}
		if n := strings.Count(summary(recs), "REMOVE"); n != 3 {
			t.Errorf("%s: %d REMOVEs (%s), want 3", r, n, summary(recs))
		}
	}
}

// Paused, a Region gets nothing; resumed, everything in order, the TTL
// delete as a plain REMOVE.
func TestReplicationPauseResume(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	g.b.Engine.PauseReplication("eu-west-1")
	g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("p"), "exp": N(itoa(t0.Add(time.Minute).Unix()))})
	g.wait(t)
	if g.get(t, "eu-west-1", "p") != nil {
		t.Fatal("a paused Region got a write")
	}
	if q := g.b.Engine.Replication().Queued["eu-west-1"]; q != 1 {
		t.Errorf("queued for eu-west-1: %d, want 1", q)
	}
	g.clock.Advance(time.Hour)
	if _, err := g.b.Engine.SweepTTL(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.b.Engine.ResumeReplication("eu-west-1")
	g.wait(t)
	if got := summary(g.records(t, "eu-west-1")); got != "INSERT p,REMOVE p" {
		t.Errorf("eu-west-1 stream after resume: %s", got)
	}
	if got := summary(g.records(t, "us-east-1")); got != "INSERT p,REMOVE p svc" {
		t.Errorf("us-east-1 stream: %s", got)
	}
}

// Concurrent writes of one item in two Regions converge on the later
// stamp; a delete beats an older put that arrives after it.
func TestReplicationLastWriterWins(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	g.b.Engine.PauseReplication("eu-west-1")
	g.b.Engine.PauseReplication("us-east-1")
	g.put(t, "eu-west-1", map[string]types.AttributeValue{"pk": S("k"), "v": S("west")})
	g.clock.Advance(time.Millisecond)
	g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("k"), "v": S("east")})
	g.b.Engine.ResumeReplication("eu-west-1")
	g.b.Engine.ResumeReplication("us-east-1")
	g.wait(t)
	for r := range g.regions {
		if v := sOf(g.get(t, r, "k"), "v"); v != "east" {
			t.Errorf("%s holds v=%s, want east (the later write)", r, v)
		}
	}
	// A delete in us-east-1 after a put in eu-west-1 that reaches it late.
	g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("d"), "v": S("first")})
	g.wait(t)
	g.b.Engine.PauseReplication("us-east-1")
	g.b.Engine.PauseReplication("eu-west-1")
	g.put(t, "eu-west-1", map[string]types.AttributeValue{"pk": S("d"), "v": S("old")})
	g.clock.Advance(time.Millisecond)
	if _, err := g.regions["us-east-1"].DynamoDB.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String("Sessions"),
		Key: map[string]types.AttributeValue{"pk": S("d")}}); err != nil {
		t.Fatal(err)
	}
	g.b.Engine.ResumeReplication("eu-west-1")
	g.wait(t)
	g.b.Engine.ResumeReplication("us-east-1")
	g.wait(t)
	for r := range g.regions {
		if it := g.get(t, r, "d"); it != nil {
			t.Errorf("%s holds d %v: the later delete must win", r, it)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Pending replication survives a restart on the data directory, through
// the log and through a snapshot: the paused Region gets every write once
// resumed, each REMOVE once in its stream.
func TestReplicationPersists(t *testing.T) {
	for _, snap := range []bool{false, true} {
		dir := t.TempDir()
		g := newGlobal(t, dir, "eu-west-1")
		enginetest.CreateTable(t, g.regions["us-east-1"].DynamoDB, enginetest.Table{Name: "Sessions", TTL: "exp"})
		g.addReplica(t, "eu-west-1")
		g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("x"), "exp": N(itoa(t0.Add(time.Minute).Unix()))})
		g.wait(t)
		g.b.Engine.PauseReplication("eu-west-1")
		g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("y")})
		g.clock.Advance(time.Hour)
		if n, err := g.b.Engine.SweepTTL(t.Context()); err != nil || n != 1 {
			t.Fatalf("SweepTTL = %d, %v; want 1", n, err)
		}
		if snap {
			if err := g.b.Engine.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.b.Server.Close(); err != nil {
			t.Fatal(err)
		}
		g2 := newGlobal(t, dir, "eu-west-1")
		rs := g2.b.Engine.Replication()
		if rs.Queued["eu-west-1"] != 2 || strings.Join(rs.Paused, ",") != "eu-west-1" {
			t.Errorf("snapshot=%v: after the restart %+v, want 2 writes queued for eu-west-1, paused (kept at Close)", snap, rs)
		}
		g2.clock.Set(g.clock.Now())
		g2.b.Engine.ResumeReplication("eu-west-1")
		g2.wait(t)
		g2.refresh(t)
		if g2.get(t, "eu-west-1", "y") == nil || g2.get(t, "eu-west-1", "x") != nil {
			t.Errorf("snapshot=%v: eu-west-1 did not converge", snap)
		}
		if got := summary(g2.records(t, "eu-west-1")); got != "INSERT x,INSERT y,REMOVE x" {
			t.Errorf("snapshot=%v: eu-west-1 stream %s", snap, got)
		}
		if got := summary(g2.records(t, "us-east-1")); got != "INSERT x,INSERT y,REMOVE x svc" {
			t.Errorf("snapshot=%v: us-east-1 stream %s", snap, got)
		}
	}
}

// ReplicaUpdates' rules, with DynamoDB's messages where known.
func TestReplicaUpdateRules(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	east := g.regions["us-east-1"].DynamoDB
	ctx := t.Context()
	update := func(db *dynamodb.Client, table string, u types.ReplicationGroupUpdate, mrc types.MultiRegionConsistency) error {
		_, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(table), ReplicaUpdates: []types.ReplicationGroupUpdate{u}, MultiRegionConsistency: mrc})
		return err
	}
	create := func(r string) types.ReplicationGroupUpdate {
		return types.ReplicationGroupUpdate{Create: &types.CreateReplicationGroupMemberAction{RegionName: aws.String(r)}}
	}
	del := func(r string) types.ReplicationGroupUpdate {
		return types.ReplicationGroupUpdate{Delete: &types.DeleteReplicationGroupMemberAction{RegionName: aws.String(r)}}
	}
	enginetest.CreateTable(t, east, enginetest.Table{Name: "KeysOnly", Stream: types.StreamViewTypeKeysOnly})
	if _, err := east.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("Prov"),
		AttributeDefinitions:  []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: "S"}},
		KeySchema:             []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: "HASH"}},
		ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(1), WriteCapacityUnits: aws.Int64(1)}}); err != nil {
		t.Fatal(err)
	}
	enginetest.CreateTable(t, east, enginetest.Table{Name: "NoStream", NoStream: true, TTL: "exp"})
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"local Region", update(east, "Sessions", create("us-east-1"), ""), "Cannot add, delete, or update the local region through ReplicaUpdates"},
		{"existing replica", update(east, "Sessions", create("eu-west-1"), ""), "already has a replica in Region eu-west-1"},
		{"no such replica", update(east, "Sessions", del("sa-east-1"), ""), "has no replica in Region sa-east-1"},
		{"provisioned", update(east, "Prov", create("eu-west-1"), ""), "Table write capacity should either be Pay-Per-Request or AutoScaled"},
		{"view type", update(east, "KeysOnly", create("eu-west-1"), ""), "must be NEW_AND_OLD_IMAGES"},
		{"bad Region", update(east, "Sessions", create("EU"), ""), `"EU" is not a Region name`},
		{"update", update(east, "Sessions", types.ReplicationGroupUpdate{Update: &types.UpdateReplicationGroupMemberAction{RegionName: aws.String("eu-west-1")}}, ""), "Update is not supported"},
		{"MRSC with TTL", update(east, "NoStream", create("eu-west-1"), types.MultiRegionConsistencyStrong), "Time to Live is not supported"},
	} {
		if errCode(c.err) != "ValidationException" || !strings.Contains(errMsg(c.err), c.want) {
			t.Errorf("%s: %v; want ValidationException %q", c.name, c.err, c.want)
		}
	}
	// Disabling a replica's stream is refused, as DynamoDB refuses it.
	_, err := east.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("Sessions"), StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}})
	if !strings.Contains(errMsg(err), "Disabling Stream is not allowed for a Global Table replica") {
		t.Errorf("disabling a replica's stream: %v", err)
	}
	// A table without a stream gets NEW_AND_OLD_IMAGES; MRSC refuses TTL.
	if _, err := east.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("NoStream"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{Enabled: aws.Bool(false), AttributeName: aws.String("exp")}}); err != nil {
		t.Fatal(err)
	}
	if err := update(east, "NoStream", create("eu-west-1"), types.MultiRegionConsistencyStrong); err != nil {
		t.Fatalf("MRSC replica: %v", err)
	}
	d, err := east.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("NoStream")})
	if err != nil || d.Table.StreamSpecification == nil || d.Table.StreamSpecification.StreamViewType != types.StreamViewTypeNewAndOldImages ||
		d.Table.MultiRegionConsistency != types.MultiRegionConsistencyStrong {
		t.Errorf("NoStream after its replica: %+v, %v; want a NEW_AND_OLD_IMAGES stream and STRONG", d.Table.StreamSpecification, err)
	}
	_, err = east.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("NoStream"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{Enabled: aws.Bool(true), AttributeName: aws.String("exp")}})
	if !strings.Contains(errMsg(err), "Time to Live is not supported on global tables with multi-Region strong consistency") {
		t.Errorf("UpdateTimeToLive on an MRSC table: %v", err)
	}
	// Deleting a replica: the table is gone in that Region; the last one
	// left is a table of its own again.
	if err := update(east, "Sessions", del("eu-west-1"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := g.regions["eu-west-1"].DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("Sessions")}); errCode(err) != "ResourceNotFoundException" {
		t.Errorf("eu-west-1 after its replica's delete: %v", err)
	}
	d, err = east.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("Sessions")})
	if err != nil || d.Table.GlobalTableVersion != nil || len(d.Table.Replicas) != 0 {
		t.Errorf("us-east-1 after the last replica's delete: %+v, %v; want no global table", d.Table.Replicas, err)
	}
	// DeleteTable of a replica takes it out of its global table.
	if _, err := g.regions["eu-west-1"].DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("NoStream")}); err != nil {
		t.Fatal(err)
	}
	if d, _ := east.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("NoStream")}); len(d.Table.Replicas) != 0 {
		t.Errorf("NoStream after DeleteTable of its replica: replicas %+v", d.Table.Replicas)
	}
}

// A table with items gets them copied to a new replica, not in its stream;
// a GSI created on one replica is created on all.
func TestReplicaCopyAndIndexes(t *testing.T) {
	g := newGlobal(t, "")
	g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("old"), "g": S("x")})
	g.regions["eu-west-1"] = g.b.In("eu-west-1")
	g.addReplica(t, "eu-west-1")
	g.refresh(t)
	if g.get(t, "eu-west-1", "old") == nil {
		t.Fatal("the new replica lacks the table's item")
	}
	if got := summary(g.records(t, "eu-west-1")); got != "" {
		t.Errorf("the new replica's stream shows the copy: %s", got)
	}
	_, err := g.regions["eu-west-1"].DynamoDB.UpdateTable(t.Context(), &dynamodb.UpdateTableInput{TableName: aws.String("Sessions"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("g"), AttributeType: "S"}},
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{IndexName: aws.String("byG"),
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: "HASH"}}, Projection: &types.Projection{ProjectionType: "ALL"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.regions["us-east-1"].DynamoDB.Query(t.Context(), &dynamodb.QueryInput{TableName: aws.String("Sessions"), IndexName: aws.String("byG"),
		KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: map[string]types.AttributeValue{":g": S("x")}})
	if err != nil || len(out.Items) != 1 {
		t.Errorf("us-east-1 Query of the index created in eu-west-1: %v, %v", out, err)
	}
	// UpdateTimeToLive on one replica applies to all.
	if _, err := g.regions["eu-west-1"].DynamoDB.UpdateTimeToLive(t.Context(), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("Sessions"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{Enabled: aws.Bool(false), AttributeName: aws.String("exp")}}); err != nil {
		t.Fatal(err)
	}
	ttl, err := g.regions["us-east-1"].DynamoDB.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("Sessions")})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusDisabled {
		t.Errorf("us-east-1 TTL after eu-west-1 disabled it: %+v, %v", ttl.TimeToLiveDescription, err)
	}
}

// With TTL independent, each Region deletes the expired item itself: a
// service REMOVE in both streams (replication paused so neither Region's
// delete arrives first), and the replicated deletes change nothing.
func TestReplicaTTLIndependent(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	g.put(t, "us-east-1", map[string]types.AttributeValue{"pk": S("i"), "exp": N(itoa(t0.Add(time.Minute).Unix()))})
	g.wait(t)
	g.b.Engine.SetTTLIndependent(true)
	g.b.Engine.PauseReplication("eu-west-1")
	g.b.Engine.PauseReplication("us-east-1")
	g.clock.Advance(time.Hour)
	if n, err := g.b.Engine.SweepTTL(t.Context()); err != nil || n != 2 {
		t.Fatalf("SweepTTL = %d, %v; want 2 (one per Region)", n, err)
	}
	g.b.Engine.ResumeReplication("eu-west-1")
	g.b.Engine.ResumeReplication("us-east-1")
	g.wait(t)
	for r := range g.regions {
		if got := summary(g.records(t, r)); got != "INSERT i,REMOVE i svc" {
			t.Errorf("%s stream: %s, want one service REMOVE", r, got)
		}
	}
}

// A delete of an item a Region does not hold is still a write of a global
// table: stamped, so an older put of another Region that arrives after it
// loses, and replicated, so the Region that made the put deletes it; where
// it deletes nothing it makes no stream record. Replication is paused so
// that the put arrives late.
func TestReplicationDeleteMissing(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	g.b.Engine.PauseReplication("us-east-1")
	g.b.Engine.PauseReplication("eu-west-1")
	g.put(t, "eu-west-1", item{"pk": S("m"), "v": S("older")})
	g.put(t, "eu-west-1", item{"pk": S("n"), "v": S("older")})
	g.clock.Advance(time.Millisecond)
	east := g.regions["us-east-1"].DynamoDB
	if _, err := east.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String("Sessions"), Key: item{"pk": S("m")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := east.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: aws.String("Sessions"), Key: item{"pk": S("n")}}}}}); err != nil {
		t.Fatal(err)
	}
	if q := g.b.Engine.Replication().Queued; q["us-east-1"] != 2 || q["eu-west-1"] != 2 {
		t.Errorf("queued %v, want the puts for us-east-1 and the deletes for eu-west-1", q)
	}
	g.b.Engine.ResumeReplication("us-east-1")
	g.wait(t)
	g.b.Engine.ResumeReplication("eu-west-1")
	g.wait(t)
	for r := range g.regions {
		for _, pk := range []string{"m", "n"} {
			if it := g.get(t, r, pk); it != nil {
				t.Errorf("%s holds %s: the later delete must win", r, canonItem(it))
			}
		}
	}
	if got := summary(g.records(t, "us-east-1")); got != "" {
		t.Errorf("us-east-1 stream: %s, want none (the deletes found nothing, the puts lost)", got)
	}
	if got := summary(g.records(t, "eu-west-1")); got != "INSERT m,INSERT n,REMOVE m,REMOVE n" {
		t.Errorf("eu-west-1 stream: %s, want its INSERTs and the replicated REMOVEs", got)
	}
}

// The tombstone of a delete that found nothing is kept across a restart
// with the delete's queued replication: the older put still loses.
func TestReplicationDeleteMissingPersists(t *testing.T) {
	dir := t.TempDir()
	g := newGlobal(t, dir, "eu-west-1")
	enginetest.CreateTable(t, g.regions["us-east-1"].DynamoDB, enginetest.Table{Name: "Sessions", TTL: "exp"})
	g.addReplica(t, "eu-west-1")
	g.b.Engine.PauseReplication("us-east-1")
	g.b.Engine.PauseReplication("eu-west-1")
	g.put(t, "eu-west-1", item{"pk": S("m"), "v": S("older")})
	g.clock.Advance(time.Millisecond)
	if _, err := g.regions["us-east-1"].DynamoDB.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String("Sessions"),
		Key: item{"pk": S("m")}}); err != nil {
		t.Fatal(err)
	}
	if err := g.b.Server.Close(); err != nil {
		t.Fatal(err)
	}
	g2 := newGlobal(t, dir, "eu-west-1")
	g2.clock.Set(g.clock.Now())
	g2.refresh(t)
	if q := g2.b.Engine.Replication().Queued; q["us-east-1"] != 1 || q["eu-west-1"] != 1 {
		t.Errorf("queued after the restart: %v, want the put for us-east-1 and the delete for eu-west-1", q)
	}
	g2.b.Engine.ResumeReplication("us-east-1")
	g2.wait(t)
	g2.b.Engine.ResumeReplication("eu-west-1")
	g2.wait(t)
	for r := range g2.regions {
		if it := g2.get(t, r, "m"); it != nil {
			t.Errorf("%s holds %s after the restart: the later delete must win", r, canonItem(it))
		}
	}
	if got := summary(g2.records(t, "us-east-1")) + "|" + summary(g2.records(t, "eu-west-1")); got != "|INSERT m,REMOVE m" {
		t.Errorf("streams us-east-1|eu-west-1: %s, want |INSERT m,REMOVE m", got)
	}
}

// Tags belong to each replica, as in DynamoDB, where a replica's tags are
// never synchronized: a new replica starts with none, and tagging or
// untagging one replica leaves the others' as they are.
func TestReplicaTags(t *testing.T) {
	g := newGlobal(t, "")
	ctx := t.Context()
	arn := func(r string) *string {
		d, err := g.regions[r].DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("Sessions")})
		if err != nil {
			t.Fatal(err)
		}
		return d.Table.TableArn
	}
	tags := func(r string) string {
		out, err := g.regions[r].DynamoDB.ListTagsOfResource(ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: arn(r)})
		if err != nil {
			t.Fatal(err)
		}
		var kv []string
		for _, tg := range out.Tags {
			kv = append(kv, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
		}
		return strings.Join(kv, ",")
	}
	tag := func(r, k, v string) {
		if _, err := g.regions[r].DynamoDB.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: arn(r),
			Tags: []types.Tag{{Key: aws.String(k), Value: aws.String(v)}}}); err != nil {
			t.Fatal(err)
		}
	}
	tag("us-east-1", "team", "a")
	g.regions["eu-west-1"] = g.b.In("eu-west-1")
	g.addReplica(t, "eu-west-1")
	if got := tags("eu-west-1"); got != "" {
		t.Errorf("the new replica's tags: %s, want none", got)
	}
	tag("eu-west-1", "env", "eu")
	if _, err := g.regions["us-east-1"].DynamoDB.UntagResource(ctx, &dynamodb.UntagResourceInput{ResourceArn: arn("us-east-1"), TagKeys: []string{"env"}}); err != nil {
		t.Fatal(err)
	}
	if got := tags("us-east-1") + "|" + tags("eu-west-1"); got != "team=a|env=eu" {
		t.Errorf("tags us-east-1|eu-west-1: %s, want team=a|env=eu", got)
	}
}
