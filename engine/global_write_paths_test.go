package engine_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sttypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Every write path replicates: each case writes in us-east-1 (an INSERT,
// a MODIFY and a REMOVE at least), and once replication is idle both
// Regions hold the same items and eu-west-1's stream shows, key by key,
// the same records as us-east-1's (events, keys, old and new images),
// none with a userIdentity.
func TestReplicationWritePaths(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(t *testing.T, db *dynamodb.Client)
	}{
		{"BatchWriteItem", batchWrites},
		{"TransactWriteItems", transactWrites},
		{"ExecuteStatement", statementWrites},
		{"BatchExecuteStatement", batchStatementWrites},
		{"ExecuteTransaction", transactionStatementWrites},
		{"UpdateItem with conditions", conditionalWrites},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGlobal(t, "", "eu-west-1")
			c.write(t, g.regions["us-east-1"].DynamoDB)
			g.checkReplicated(t, "us-east-1", "eu-west-1", 0)
		})
	}
}

// The TTL sweeper's deletes replicate as plain REMOVEs with the old image:
// the owner's stream has a service REMOVE, the other's the same REMOVE
// with no userIdentity.
func TestReplicationTTLDeletes(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	db := g.regions["eu-west-1"].DynamoDB
	exp := N(itoa(t0.Add(time.Minute).Unix()))
	for _, pk := range []string{"t1", "t2"} {
		if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("Sessions"), Item: item{"pk": S(pk), "exp": exp, "v": N("1")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := update(t, db, "t2", "SET v = v + :one", "", item{":one": N("1")}); err != nil {
		t.Fatal(err)
	}
	g.put(t, "eu-west-1", item{"pk": S("kept"), "exp": N(itoa(t0.Add(48 * time.Hour).Unix()))})
	g.wait(t)
	g.clock.Advance(time.Hour)
	if n, err := g.b.Engine.SweepTTL(t.Context()); err != nil || n != 2 {
		t.Fatalf("SweepTTL = %d, %v; want 2 (eu-west-1's)", n, err)
	}
	g.checkReplicated(t, "eu-west-1", "us-east-1", 2)
}

// checkReplicated waits for replication and compares the two Regions:
// the same items, and dst's records equal to src's key by key, none with
// a userIdentity; src's records have one on its services deletes only
// (services of them).
func (g *global) checkReplicated(t *testing.T, src, dst string, services int) {
	t.Helper()
	g.wait(t)
	var held [2]string
	for i, r := range []string{src, dst} {
		var lines []string
		for _, it := range scanItems(t.Context(), t, g.regions[r].DynamoDB, "Sessions") {
			lines = append(lines, canonItem(it))
		}
		sort.Strings(lines)
		held[i] = strings.Join(lines, "\n")
	}
	if held[0] != held[1] || held[0] == "" {
		t.Errorf("%s holds\n%s\n%s holds\n%s", src, held[0], dst, held[1])
	}
	srcRecs, dstRecs := byKey(g.records(t, src)), byKey(g.records(t, dst))
	for pk, want := range srcRecs {
		if got := dstRecs[pk]; got != want {
			t.Errorf("%s's records of %s:\n%s\nwant %s's:\n%s", dst, pk, got, src, want)
		}
	}
	if len(dstRecs) != len(srcRecs) {
		t.Errorf("%s has records of %d keys, %s of %d", dst, len(dstRecs), src, len(srcRecs))
	}
	for _, r := range g.records(t, dst) {
		if r.UserIdentity != nil {
			t.Errorf("%s: a replicated %s of %s has userIdentity %+v", dst, r.EventName, avString(r.Dynamodb.Keys["pk"]), r.UserIdentity)
		}
	}
	n := 0
	for _, r := range g.records(t, src) {
		if r.UserIdentity != nil {
			n++
		}
	}
	if n != services {
		t.Errorf("%s: %d records with a userIdentity, want %d", src, n, services)
	}
}

// byKey renders records, in sequence order, as lines per key: event, old
// and new image (no userIdentity: compared apart).
func byKey(recs []sttypes.Record) map[string]string {
	sort.Slice(recs, func(i, j int) bool {
		a, b := aws.ToString(recs[i].Dynamodb.SequenceNumber), aws.ToString(recs[j].Dynamodb.SequenceNumber)
		return len(a) < len(b) || len(a) == len(b) && a < b
	})
	out := map[string]string{}
	for _, r := range recs {
		pk := avString(r.Dynamodb.Keys["pk"])
		out[pk] += fmt.Sprintf("  %s keys{%s} old{%s} new{%s}\n", r.EventName, canonItem(r.Dynamodb.Keys), canonItem(r.Dynamodb.OldImage), canonItem(r.Dynamodb.NewImage))
	}
	return out
}

// update runs an UpdateItem of Sessions' item pk.
func update(t *testing.T, db *dynamodb.Client, pk, expr, cond string, values item) error {
	t.Helper()
	in := &dynamodb.UpdateItemInput{TableName: aws.String("Sessions"), Key: item{"pk": S(pk)}, UpdateExpression: aws.String(expr), ExpressionAttributeValues: values}
	if cond != "" {
		in.ConditionExpression = aws.String(cond)
	}
	_, err := db.UpdateItem(t.Context(), in)
	return err
}

func batchWrites(t *testing.T, db *dynamodb.Client) {
	put := func(pk, v string) types.WriteRequest {
		return types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(pk), "v": N(v)}}}
	}
	for _, reqs := range [][]types.WriteRequest{
		{put("a", "1"), put("b", "1"), put("c", "1")},
		{put("b", "2"), {DeleteRequest: &types.DeleteRequest{Key: item{"pk": S("c")}}}, put("a", "1")},
	} {
		out, err := db.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"Sessions": reqs}})
		if err != nil || len(out.UnprocessedItems) != 0 {
			t.Fatalf("BatchWriteItem: %v, %v unprocessed", err, out.UnprocessedItems)
		}
	}
}

func transactWrites(t *testing.T, db *dynamodb.Client) {
	for _, items := range [][]types.TransactWriteItem{
		{{Put: &types.Put{TableName: aws.String("Sessions"), Item: item{"pk": S("a"), "v": N("1")}}},
			{Put: &types.Put{TableName: aws.String("Sessions"), Item: item{"pk": S("b"), "v": N("1")}}}},
		{{Update: &types.Update{TableName: aws.String("Sessions"), Key: item{"pk": S("a")}, UpdateExpression: aws.String("SET v = v + :one"),
			ConditionExpression: aws.String("v = :one"), ExpressionAttributeValues: item{":one": N("1")}}},
			{Delete: &types.Delete{TableName: aws.String("Sessions"), Key: item{"pk": S("b")}}},
			{Put: &types.Put{TableName: aws.String("Sessions"), Item: item{"pk": S("c"), "v": N("3")}}}},
	} {
		if _, err := db.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
			t.Fatal(err)
		}
	}
}

func statementWrites(t *testing.T, db *dynamodb.Client) {
	for _, s := range []string{
		`INSERT INTO "Sessions" VALUE {'pk': 'a', 'v': 1}`,
		`INSERT INTO "Sessions" VALUE {'pk': 'b', 'v': 1}`,
		`UPDATE "Sessions" SET v = v + 1 WHERE pk = 'a'`,
		`UPDATE "Sessions" SET w = 'x' REMOVE v WHERE pk = 'a'`,
		`DELETE FROM "Sessions" WHERE pk = 'b'`,
	} {
		if _, err := db.ExecuteStatement(t.Context(), &dynamodb.ExecuteStatementInput{Statement: aws.String(s)}); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func batchStatementWrites(t *testing.T, db *dynamodb.Client) {
	for _, batch := range [][]string{
		{`INSERT INTO "Sessions" VALUE {'pk': 'a', 'v': 1}`, `INSERT INTO "Sessions" VALUE {'pk': 'b', 'v': 1}`},
		{`UPDATE "Sessions" SET v = 5 WHERE pk = 'a'`, `DELETE FROM "Sessions" WHERE pk = 'b'`, `INSERT INTO "Sessions" VALUE {'pk': 'c', 'v': 3}`},
	} {
		var reqs []types.BatchStatementRequest
		for _, s := range batch {
			reqs = append(reqs, types.BatchStatementRequest{Statement: aws.String(s)})
		}
		out, err := db.BatchExecuteStatement(t.Context(), &dynamodb.BatchExecuteStatementInput{Statements: reqs})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range out.Responses {
			if r.Error != nil {
				t.Fatalf("%s: %s %s", batch[i], r.Error.Code, aws.ToString(r.Error.Message))
			}
		}
	}
}

func transactionStatementWrites(t *testing.T, db *dynamodb.Client) {
	for _, tx := range [][]string{
		{`INSERT INTO "Sessions" VALUE {'pk': 'a', 'v': 1}`, `INSERT INTO "Sessions" VALUE {'pk': 'b', 'v': 1}`},
		{`UPDATE "Sessions" SET v = v + 1 WHERE pk = 'a'`, `DELETE FROM "Sessions" WHERE pk = 'b'`},
	} {
		var stmts []types.ParameterizedStatement
		for _, s := range tx {
			stmts = append(stmts, types.ParameterizedStatement{Statement: aws.String(s)})
		}
		if _, err := db.ExecuteTransaction(t.Context(), &dynamodb.ExecuteTransactionInput{TransactStatements: stmts}); err != nil {
			t.Fatal(err)
		}
	}
}

// conditionalWrites: UpdateItem creating (attribute_not_exists), then
// updating under a condition that holds, one whose condition fails (it
// writes nothing, so nothing replicates), and a conditional delete.
func conditionalWrites(t *testing.T, db *dynamodb.Client) {
	one := item{":one": N("1")}
	for _, u := range []struct{ pk, expr, cond string }{
		{"a", "SET v = :one", "attribute_not_exists(pk)"},
		{"b", "SET v = :one", "attribute_not_exists(pk)"},
		{"a", "SET v = v + :one", "v = :one"},
	} {
		if err := update(t, db, u.pk, u.expr, u.cond, one); err != nil {
			t.Fatalf("UpdateItem %s %s if %s: %v", u.pk, u.expr, u.cond, err)
		}
	}
	if err := update(t, db, "a", "SET v = v + :one", "v = :one", one); errCode(err) != "ConditionalCheckFailedException" {
		t.Fatalf("UpdateItem whose condition fails: %v", err)
	}
	if _, err := db.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String("Sessions"), Key: item{"pk": S("b")},
		ConditionExpression: aws.String("v = :one"), ExpressionAttributeValues: one}); err != nil {
		t.Fatal(err)
	}
}
