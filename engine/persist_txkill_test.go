package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

// createStreamTable makes a PAY_PER_REQUEST table with hash key pk (S)
// and a NEW_AND_OLD_IMAGES stream, the view streamMatchesTable reads.
func createStreamTable(ctx context.Context, t *testing.T, db *dynamodb.Client, name string) {
	t.Helper()
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	}); err != nil {
		t.Fatalf("CreateTable %s: %v", name, err)
	}
}

// streamMatchesTable reads every record of the table's stream (a
// NEW_AND_OLD_IMAGES stream since the table's creation) in sequence
// order and checks them against the table: each record's OldImage is the
// item as the key's previous record left it, so a change without its
// record breaks the chain; and replaying the records gives exactly the
// table's items, so a record without its change, or a last change
// without its record, differs. It returns the table's items by pk, each
// rendered by canonItem.
func streamMatchesTable(ctx context.Context, t *testing.T, db *dynamodb.Client, st *dynamodbstreams.Client, table string) map[string]string {
	t.Helper()
	recs := streamRecords(ctx, t, db, st, table)
	sort.Slice(recs, func(i, j int) bool {
		a, b := aws.ToString(recs[i].Dynamodb.SequenceNumber), aws.ToString(recs[j].Dynamodb.SequenceNumber)
		return len(a) < len(b) || len(a) == len(b) && a < b
	})
	replayed := map[string]string{}
	for _, r := range recs {
		pk := avString(r.Dynamodb.Keys["pk"])
		seq := aws.ToString(r.Dynamodb.SequenceNumber)
		if prev, old := replayed[pk], canonItem(r.Dynamodb.OldImage); prev != old {
			t.Fatalf("%s: record %s (%s) of %s has OldImage %q, but the key's previous record left %q: a change without its record", table, seq, r.EventName, pk, old, prev)
		}
		if r.EventName == stypes.OperationTypeRemove {
			delete(replayed, pk)
		} else {
			replayed[pk] = canonItem(r.Dynamodb.NewImage)
		}
	}
	items := map[string]string{}
	for _, it := range scanItems(ctx, t, db, table) {
		items[avString(it["pk"])] = canonItem(it)
	}
	for pk, it := range items {
		if replayed[pk] != it {
			t.Errorf("%s: item %s is %q, its stream records leave %q", table, pk, it, replayed[pk])
		}
	}
	for pk, it := range replayed {
		if _, ok := items[pk]; !ok {
			t.Errorf("%s: the stream records leave item %s as %q, the table has no such item", table, pk, it)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return items
}

// avString renders a string or number attribute value of either SDK
// package (the tests that use it write nothing else).
func avString(v any) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *stypes.AttributeValueMemberS:
		return "S:" + v.Value
	case *stypes.AttributeValueMemberN:
		return "N:" + v.Value
	}
	return fmt.Sprintf("%T", v)
}

// canonItem renders an item of either SDK package in one form ("" for
// none), its attributes in name order.
func canonItem[V any](it map[string]V) string {
	names := make([]string, 0, len(it))
	for n := range it {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%s;", n, avString(it[n]))
	}
	return b.String()
}

// TestPersistTornTransaction cuts the log inside a TransactWriteItems
// over two tables with streams (puts, an update and a delete), at eight
// places and at its end, and restarts on each cut: the transaction is
// there whole or not at all, and each table matches its stream. Each cut
// is the torn tail a crash leaves while the transaction's entry is being
// written.
func TestPersistTornTransaction(t *testing.T) {
	dir := t.TempDir()
	clock := engine.NewManualClock(t0)
	e := newDurableEnv(t, dir, clock)
	for _, name := range []string{"txa", "txb"} {
		createStreamTable(e.ctx, t, e.db, name)
	}
	e.put("txa", item{"pk": S("old"), "v": N("1")})
	e.put("txb", item{"pk": S("count"), "n": N("1")})
	before := segmentSize(t, newestSegment(t, dir))
	pad := S(strings.Repeat("p", 2000))
	if _, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("txa"), Item: item{"pk": S("x1"), "pad": pad}}},
		{Put: &types.Put{TableName: aws.String("txa"), Item: item{"pk": S("x2"), "pad": pad}}},
		{Put: &types.Put{TableName: aws.String("txb"), Item: item{"pk": S("y1"), "pad": pad}}},
		{Update: &types.Update{TableName: aws.String("txb"), Key: item{"pk": S("count")}, UpdateExpression: aws.String("ADD n :one"),
			ExpressionAttributeValues: item{":one": N("1")}}},
		{Delete: &types.Delete{TableName: aws.String("txa"), Key: item{"pk": S("old")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	crashed := crashCopy(t, dir)
	after := segmentSize(t, newestSegment(t, crashed))
	for k := int64(0); k <= 8; k++ {
		cut := before + k*(after-before)/8
		t.Run(fmt.Sprintf("cut at %d of %d bytes", cut-before, after-before), func(t *testing.T) {
			d := crashCopy(t, crashed)
			if err := os.Truncate(newestSegment(t, d), cut); err != nil {
				t.Fatal(err)
			}
			e2 := newDurableEnv(t, d, clock)
			ta := streamMatchesTable(e2.ctx, t, e2.db, e2.st, "txa")
			tb := streamMatchesTable(e2.ctx, t, e2.db, e2.st, "txb")
			got := fmt.Sprintf("txa %d items, old=%t x1=%t x2=%t; txb %d items, y1=%t count=%s", len(ta), ta["S:old"] != "", ta["S:x1"] != "", ta["S:x2"] != "",
				len(tb), tb["S:y1"] != "", tb["S:count"])
			want := "txa 1 items, old=true x1=false x2=false; txb 1 items, y1=false count=n=N:1;pk=S:count;"
			if cut == after {
				want = "txa 2 items, old=false x1=true x2=true; txb 2 items, y1=true count=n=N:2;pk=S:count;"
			}
			if got != want {
				t.Fatalf("after the restart: %s\nwant %s", got, want)
			}
		})
	}
}

// segmentSize is the size of a log segment.
func segmentSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// buildArchiver builds the archiver binary into a temporary directory and
// returns its path.
func buildArchiver(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "archiver")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ttl-archiver/archiver/cmd/archiver").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// writeKillOps is how many operations each round of the write kill tests
// has acknowledged before the kill: WRITEKILL_OPS, else def.
func writeKillOps(t *testing.T, def int64) int64 {
	t.Helper()
	s := os.Getenv("WRITEKILL_OPS")
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		t.Fatalf("WRITEKILL_OPS=%q: want a positive count", s)
	}
	return n
}

// killDuring runs op(w, 0), op(w, 1), ... in each of workers goroutines
// until op fails, SIGKILLs cmd once n operations in all were
// acknowledged, and returns, once every worker has stopped, how many
// operations each acknowledged. An operation that fails before the kill
// fails the test.
func killDuring(t *testing.T, cmd *exec.Cmd, workers int, n int64, op func(w, i int) error) []int64 {
	t.Helper()
	acked := make([]atomic.Int64, workers)
	var total atomic.Int64
	var killed atomic.Bool
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if err := op(w, i); err != nil {
					if !killed.Load() {
						errs <- fmt.Errorf("worker %d, operation %d, before the kill: %w", w, i, err)
					}
					return
				}
				acked[w].Add(1)
				total.Add(1)
			}
		}()
	}
	for total.Load() < n && len(errs) == 0 {
		time.Sleep(2 * time.Millisecond)
	}
	killed.Store(true)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	cmd.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	out := make([]int64, workers)
	for w := range out {
		out[w] = acked[w].Load()
	}
	return out
}

// TestTransactKill9 SIGKILLs the real binary while 8 clients run
// TransactWriteItems over two tables with streams (each puts txPuts+1
// items, adds one to the client's counter and deletes an item of the
// client's previous transaction), three rounds on one --data-dir, and after each
// restart finds every transaction applied whole or not at all, every
// acknowledged one there, and each table matching its stream
// (streamMatchesTable). Rounds of 200 transactions keep it quick;
// WRITEKILL_OPS sets more.
func TestTransactKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the archiver binary")
	}
	n := writeKillOps(t, 200)
	bin, dir := buildArchiver(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd, ep := startBinary(t, bin, dir)
	db, _ := binaryClients(ep, 1)
	createStreamTable(ctx, t, db, "txa")
	createStreamTable(ctx, t, db, "txb")
	pad := S(strings.Repeat("p", 1000))
	const workers = 8
	for round := range 3 {
		acked := killDuring(t, cmd, workers, n, func(w, i int) error {
			id := fmt.Sprintf("r%dw%d", round, w)
			in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String("txb"), Item: item{"pk": S(fmt.Sprintf("%s-%d-b", id, i)), "pad": pad}}},
				{Update: &types.Update{TableName: aws.String("txb"), Key: item{"pk": S(id + "-count")}, UpdateExpression: aws.String("ADD n :one"),
					ExpressionAttributeValues: item{":one": N("1")}}},
			}}
			for j := range txPuts {
				in.TransactItems = append(in.TransactItems, types.TransactWriteItem{Put: &types.Put{TableName: aws.String("txa"),
					Item: item{"pk": S(fmt.Sprintf("%s-%d-a%d", id, i, j)), "pad": pad}}})
			}
			if i > 0 {
				in.TransactItems = append(in.TransactItems, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("txa"),
					Key: item{"pk": S(fmt.Sprintf("%s-%d-a%d", id, i-1, txPuts-1))}}})
			}
			_, err := db.TransactWriteItems(ctx, in)
			return err
		})
		cmd, ep = startBinary(t, bin, dir)
		var st *dynamodbstreams.Client
		db, st = binaryClients(ep, 3)
		txa := streamMatchesTable(ctx, t, db, st, "txa")
		txb := streamMatchesTable(ctx, t, db, st, "txb")
		for w, k := range acked {
			checkTxWorker(t, fmt.Sprintf("r%dw%d", round, w), k, txa, txb)
		}
		t.Logf("round %d: %v transactions acknowledged per client before kill -9; %d and %d items", round, acked, len(txa), len(txb))
		db, _ = binaryClients(ep, 1)
	}
}

// txPuts is how many items of table txa each transaction of
// TestTransactKill9 puts; the next one deletes the last of them.
const txPuts = 8

var countRE = regexp.MustCompile(`(?:^|;)n=N:([0-9]+);`)

// checkTxWorker checks one client's transactions after a restart: its
// counter says how many were applied (c: acked or one more, the one the
// kill interrupted), transactions 0..c-1 are there whole (all their txa
// items in the last one, all but the one their successor deleted in the
// others) and none after.
func checkTxWorker(t *testing.T, id string, acked int64, txa, txb map[string]string) {
	t.Helper()
	var c int64
	if m := countRE.FindStringSubmatch(txb["S:"+id+"-count"]); m != nil {
		c, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if c != acked && c != acked+1 {
		t.Fatalf("client %s: %d transactions applied, %d acknowledged", id, c, acked)
	}
	for i := int64(0); i <= acked; i++ {
		in := i < c
		got := fmt.Sprintf("b=%t a=", txb[fmt.Sprintf("S:%s-%d-b", id, i)] != "")
		want := fmt.Sprintf("b=%t a=", in)
		for j := range txPuts {
			got += fmt.Sprint(txa[fmt.Sprintf("S:%s-%d-a%d", id, i, j)] != "", " ")
			want += fmt.Sprint(in && (j < txPuts-1 || i == c-1), " ")
		}
		if got != want {
			t.Fatalf("client %s, transaction %d of %d applied (%d acknowledged): %s, want %s: applied in part", id, i, c, acked, got, want)
		}
	}
}

// TestBatchWriteKill9 SIGKILLs the real binary while 8 clients run
// BatchWriteItem (20 puts and 5 deletes of the client's previous batch's
// items each, unprocessed items sent again), three rounds on one
// --data-dir, and after each restart finds every acknowledged put and
// delete there and the table matching its stream (streamMatchesTable):
// a batch is not atomic, but each of its writes is, with its record.
// Rounds of 80 batches keep it quick; WRITEKILL_OPS sets more.
func TestBatchWriteKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the archiver binary")
	}
	n := writeKillOps(t, 80)
	bin, dir := buildArchiver(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd, ep := startBinary(t, bin, dir)
	db, _ := binaryClients(ep, 1)
	createStreamTable(ctx, t, db, "batch")
	pad := S(strings.Repeat("p", 500))
	const workers = 8
	for round := range 3 {
		acked := killDuring(t, cmd, workers, n, func(w, i int) error {
			id := fmt.Sprintf("r%dw%d", round, w)
			var reqs []types.WriteRequest
			for j := range 20 {
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(fmt.Sprintf("%s-%d-%d", id, i, j)), "pad": pad}}})
			}
			for j := 0; j < 5 && i > 0; j++ {
				reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: item{"pk": S(fmt.Sprintf("%s-%d-%d", id, i-1, j))}}})
			}
			for len(reqs) > 0 {
				out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"batch": reqs}})
				if err != nil {
					return err
				}
				reqs = out.UnprocessedItems["batch"]
			}
			return nil
		})
		cmd, ep = startBinary(t, bin, dir)
		var st *dynamodbstreams.Client
		db, st = binaryClients(ep, 3)
		items := streamMatchesTable(ctx, t, db, st, "batch")
		for w, k := range acked {
			id := fmt.Sprintf("r%dw%d", round, w)
			for i := int64(0); i < k; i++ {
				for j := range 20 {
					// Items 0-4 of the last acknowledged batch are the
					// interrupted batch's to delete, or not.
					_, there := items[fmt.Sprintf("S:%s-%d-%d", id, i, j)]
					switch {
					case j >= 5 && !there:
						t.Fatalf("client %s: item %d of acknowledged batch %d is gone", id, j, i)
					case j < 5 && i < k-1 && there:
						t.Fatalf("client %s: item %d of batch %d is there, acknowledged batch %d deleted it", id, j, i, i+1)
					}
				}
			}
		}
		t.Logf("round %d: %v batches acknowledged per client before kill -9; %d items", round, acked, len(items))
		db, _ = binaryClients(ep, 1)
	}
}
