package engine_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

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
