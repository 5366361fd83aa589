package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// replKillRegions are the Regions of TestReplicationKill9's global table.
var replKillRegions = [2]string{"us-east-1", "eu-west-1"}

// replKillClients are SDK clients of each Region of an engine at
// endpoint, making at most attempts attempts per call.
type replKillClients struct {
	db [2]*dynamodb.Client
	st [2]*dynamodbstreams.Client
}

func newReplKillClients(endpoint string, attempts int) replKillClients {
	retryer := retry.AddWithMaxAttempts(retry.NewStandard(), attempts)
	var c replKillClients
	for i, r := range replKillRegions {
		c.db[i] = enginetest.ClientAt(endpoint, "AKIDTEST", func(o *dynamodb.Options) { o.Retryer, o.Region = retryer, r })
		c.st[i] = enginetest.StreamsClientAt(endpoint, "AKIDTEST", func(o *dynamodbstreams.Options) { o.Retryer, o.Region = retryer, r })
	}
	return c
}

// TestReplicationKill9 SIGKILLs the real binary three times while four
// clients, two in each Region of a global table, write their own items
// (PutItem, a conditional UpdateItem, a TransactWriteItems that puts,
// counts and deletes, a BatchWriteItem that puts and deletes) and both
// Regions' clients put the same few shared items (conflicts, settled by
// last writer wins). After each restart, once replication is idle: both
// replicas hold the same items; every client's items are what its
// acknowledged operations left (the one the kill interrupted applied or
// not, a transaction whole); each Region's table is its own stream
// replayed (streamMatchesTable); and every deleted item has exactly one
// REMOVE in each Region's stream, so no replicated delete was lost or
// applied twice. Rounds of 150 operations keep it quick; REPLKILL_OPS sets
// more.
func TestReplicationKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the archiver binary")
	}
	n := envCount(t, "REPLKILL_OPS", 150)
	bin, dir := buildArchiver(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd, ep := startBinary(t, bin, dir)
	c := newReplKillClients(ep, 1)
	createStreamTable(ctx, t, c.db[0], "repl")
	if _, err := c.db[0].UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("repl"),
		ReplicaUpdates: []types.ReplicationGroupUpdate{{Create: &types.CreateReplicationGroupMemberAction{RegionName: aws.String(replKillRegions[1])}}}}); err != nil {
		t.Fatal(err)
	}
	const workers = 4
	earlier := map[string]string{} // the items of earlier rounds, as checked
	for round := range 3 {
		acked := killDuring(t, cmd, workers, n, func(w, i int) error {
			return replKillOp(ctx, c.db[w%2], replKillID(round, w), i)
		})
		cmd, ep = startBinary(t, bin, dir)
		c = newReplKillClients(ep, 3)
		waitReplicationHTTP(t, ep)
		var items [2]map[string]string
		for r := range replKillRegions {
			items[r] = streamMatchesTable(ctx, t, c.db[r], c.st[r], "repl")
		}
		if d := diffItems(items[0], items[1]); d != "" {
			t.Fatalf("round %d: the replicas differ (%s | %s):\n%s", round, replKillRegions[0], replKillRegions[1], d)
		}
		for w, k := range acked {
			checkReplKillWorker(t, replKillID(round, w), k, items[0])
		}
		checkEarlierRounds(t, round, earlier, items[0])
		checkRemovesOnce(ctx, t, c, items[0])
		t.Logf("round %d: %v operations acknowledged per client before kill -9; %d items in each replica", round, acked, len(items[0]))
		c = newReplKillClients(ep, 1)
	}
}

// envCount is the positive count in the environment variable name, else def.
func envCount(t *testing.T, name string, def int64) int64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", name, s)
	}
	return n
}

// replKillID names client w of a round: its Region's index is w%2.
func replKillID(round, w int) string { return fmt.Sprintf("r%d-w%d", round, w) }

var replKillPad = S(strings.Repeat("p", 40))

// replKillOp runs client id's operation i: i%4 picks PutItem of id-i, an
// UpdateItem of that item if it exists, a TransactWriteItems putting
// id-i, counting in id-cnt and deleting id-(i-2), or a BatchWriteItem
// putting id-i and a shared item and deleting id-(i-1).
func replKillOp(ctx context.Context, db *dynamodb.Client, id string, i int) error {
	key := func(j int) item { return item{"pk": S(fmt.Sprintf("%s-%d", id, j))} }
	put := func(j int) item {
		return item{"pk": S(fmt.Sprintf("%s-%d", id, j)), "v": N(strconv.Itoa(j)), "pad": replKillPad}
	}
	const table = "repl"
	var err error
	switch i % 4 {
	case 0:
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: put(i)})
	case 1:
		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(i - 1),
			UpdateExpression: aws.String("SET v = v + :one"), ConditionExpression: aws.String("attribute_exists(pk)"),
			ExpressionAttributeValues: item{":one": N("1")}})
	case 2:
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: put(i)}},
			{Update: &types.Update{TableName: aws.String(table), Key: item{"pk": S(id + "-cnt")}, UpdateExpression: aws.String("ADD n :one"),
				ExpressionAttributeValues: item{":one": N("1")}}},
			{Delete: &types.Delete{TableName: aws.String(table), Key: key(i - 2)}},
		}})
	default:
		reqs := []types.WriteRequest{{PutRequest: &types.PutRequest{Item: put(i)}},
			{PutRequest: &types.PutRequest{Item: item{"pk": S(fmt.Sprintf("shared-%d", i/4%8)), "v": S(fmt.Sprintf("%s-%d", id, i))}}},
			{DeleteRequest: &types.DeleteRequest{Key: key(i - 1)}}}
		for len(reqs) > 0 && err == nil {
			var out *dynamodb.BatchWriteItemOutput
			if out, err = db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}}); err == nil {
				reqs = out.UnprocessedItems[table]
			}
		}
	}
	return err
}

// replKillModel is client id's items after its operations 0..n-1, by pk
// as streamMatchesTable renders them.
func replKillModel(id string, n int64) map[string]string {
	items := map[string]string{}
	pk := func(j int64) string { return fmt.Sprintf("S:%s-%d", id, j) }
	put := func(j, v int64) { items[pk(j)] = fmt.Sprintf("pad=%s;pk=%s;v=N:%d;", avString(replKillPad), pk(j), v) }
	del := func(j int64) { delete(items, pk(j)) }
	for i := int64(0); i < n; i++ {
		switch i % 4 {
		case 0:
			put(i, i)
		case 1:
			put(i-1, i)
		case 2:
			put(i, i)
			items["S:"+id+"-cnt"] = fmt.Sprintf("n=N:%d;pk=S:%s-cnt;", i/4+1, id)
			del(i - 2)
		default:
			put(i, i)
			del(i - 1)
		}
	}
	return items
}

// checkReplKillWorker checks client id's items after a restart: each is
// as its acked operations left it, or as the interrupted one (acked)
// leaves it; a transaction's items all one or all the other.
func checkReplKillWorker(t *testing.T, id string, acked int64, table map[string]string) {
	t.Helper()
	before, after := replKillModel(id, acked), replKillModel(id, acked+1)
	keys := map[string]bool{}
	for _, m := range []map[string]string{before, after} {
		for k := range m {
			keys[k] = true
		}
	}
	for k := range table {
		if strings.HasPrefix(k, "S:"+id+"-") {
			keys[k] = true
		}
	}
	applied := map[bool]int{}
	for k := range keys {
		got := table[k]
		switch {
		case got == before[k] && got == after[k]:
		case got == before[k]:
			applied[false]++
		case got == after[k]:
			applied[true]++
		default:
			t.Fatalf("client %s, %d operations acknowledged: item %s is %q, want %q (acknowledged) or %q (with the interrupted operation)", id, acked, k, got, before[k], after[k])
		}
	}
	if acked%4 == 2 && applied[false] > 0 && applied[true] > 0 {
		t.Fatalf("client %s: the interrupted transaction %d applied in part (%d items with it, %d without)", id, acked, applied[true], applied[false])
	}
}

// checkEarlierRounds checks that the items of earlier rounds are as the
// last check found them, and adds this round's to earlier.
func checkEarlierRounds(t *testing.T, round int, earlier, table map[string]string) {
	t.Helper()
	for k, v := range earlier {
		if table[k] != v {
			t.Fatalf("round %d: item %s of an earlier round is %q, was %q", round, k, table[k], v)
		}
	}
	for k, v := range table {
		if !strings.HasPrefix(k, "S:shared-") {
			if _, ok := earlier[k]; !ok && !strings.HasPrefix(k, fmt.Sprintf("S:r%d-", round)) {
				t.Fatalf("round %d: item %s of an earlier round appeared: %q", round, k, v)
			}
			earlier[k] = v
		}
	}
}

// checkRemovesOnce checks each Region's stream: a client's item has at
// most one REMOVE, and the same number in both Regions (its delete in one
// Region, replicated to the other once); an item deleted and not in the
// table has one.
func checkRemovesOnce(ctx context.Context, t *testing.T, c replKillClients, table map[string]string) {
	t.Helper()
	var removes [2]map[string]int
	seen := map[string]bool{}
	for r := range replKillRegions {
		removes[r] = map[string]int{}
		for _, rec := range streamRecords(ctx, t, c.db[r], c.st[r], "repl") {
			pk := avString(rec.Dynamodb.Keys["pk"])
			if strings.HasPrefix(pk, "S:shared-") {
				continue
			}
			seen[pk] = true
			if rec.EventName == stypes.OperationTypeRemove {
				removes[r][pk]++
			}
		}
	}
	for pk := range seen {
		a, b := removes[0][pk], removes[1][pk]
		_, there := table[pk]
		if a != b || a > 1 || there == (a == 1) {
			t.Fatalf("item %s (in the table: %v): %d REMOVEs in %s's stream, %d in %s's; want one in each for an item deleted, none otherwise",
				pk, there, a, replKillRegions[0], b, replKillRegions[1])
		}
	}
}

// waitReplicationHTTP waits, through the control API, until the engine at
// endpoint has no replicated write it can apply now.
func waitReplicationHTTP(t *testing.T, endpoint string) {
	t.Helper()
	resp, err := http.Post(endpoint+"/_engine/replication/wait", "application/json", strings.NewReader(`{"timeout": "2m"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /_engine/replication/wait: %s", resp.Status)
	}
}

// diffItems lists the items that differ between two replicas, in key
// order, the first 10 ("" when none).
func diffItems(a, b map[string]string) string {
	var keys []string
	for k := range a {
		if a[k] != b[k] {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out strings.Builder
	for i, k := range keys {
		if i == 10 {
			fmt.Fprintf(&out, "... and %d more\n", len(keys)-i)
			break
		}
		fmt.Fprintf(&out, "%s: %q | %q\n", k, a[k], b[k])
	}
	return out.String()
}
