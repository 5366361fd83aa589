package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/smallfs"
)

// TestPersistFullDiskTransactAndBatch fills a real 8 MiB tmpfs under the
// data directory with transactions over two streamed tables, then with
// batches (skipped where mounting is not permitted): the transaction the
// disk cannot take is refused whole (a ThrottlingException, none of its
// items, no record), a batch hands back what it could not write in
// UnprocessedItems and wrote the rest, and after space is freed and the
// engine restarted, every acknowledged write is there and each table
// matches its stream.
func TestPersistFullDiskTransactAndBatch(t *testing.T) {
	fs := smallfs.Mount(t, "8m")
	dir := filepath.Join(fs, "data")
	e := newDurableEnv(t, dir, engine.NewManualClock(t0))
	createStreamTable(e.ctx, t, e.db, "fulla")
	createStreamTable(e.ctx, t, e.db, "fullb")
	ballast := smallfs.Fill(t, fs, 4<<20)
	db, _ := binaryClients(e.srv.Endpoint(), 1) // one attempt: see each answer
	big := S(strings.Repeat("x", 40<<10))
	var acked []string // "table/pk"
	refused := -1
	for i := 0; refused < 0; i++ {
		if i > 100 {
			t.Fatal("an 8 MiB disk took 100 transactions of 400 KiB")
		}
		var items []types.TransactWriteItem
		var keys []string
		for j := range 10 {
			table := []string{"fulla", "fullb"}[j%2]
			pk := fmt.Sprintf("tx%03d-%d", i, j)
			keys = append(keys, table+"/"+pk)
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item{"pk": S(pk), "v": big}}})
		}
		_, err := db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		switch {
		case err == nil:
			acked = append(acked, keys...)
		case errCode(err) == "ThrottlingException" && strings.Contains(errMsg(err), dir):
			refused = i
		default:
			t.Fatalf("transaction %d on a filling disk: %v, want success or a ThrottlingException naming %s", i, err, dir)
		}
	}
	refusedTx := func(table string) []string {
		var out []string
		for j := range 10 {
			if []string{"fulla", "fullb"}[j%2] == table {
				out = append(out, fmt.Sprintf("S:tx%03d-%d", refused, j))
			}
		}
		return out
	}
	for j := range 10 {
		table := []string{"fulla", "fullb"}[j%2]
		if e.get(table, item{"pk": S(fmt.Sprintf("tx%03d-%d", refused, j))}) != nil {
			t.Fatalf("item %d of the refused transaction %d is in %s", j, refused, table)
		}
	}
	// Small batches still fit in the space the log reserved; fill it too.
	handedBack := false
	for i := 0; !handedBack; i++ {
		if i > 10000 {
			t.Fatal("batches are never refused on a full disk")
		}
		var reqs []types.WriteRequest
		for j := range 25 {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(fmt.Sprintf("b%05d-%02d", i, j))}}})
		}
		out, err := db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"fulla": reqs}})
		if errCode(err) == "ThrottlingException" {
			break // refused whole: its first write was refused
		}
		if err != nil {
			t.Fatalf("batch %d on a full disk: %v", i, err)
		}
		back := map[string]bool{}
		for _, r := range out.UnprocessedItems["fulla"] {
			back[avString(r.PutRequest.Item["pk"])] = true
			handedBack = true
		}
		for _, r := range reqs {
			pk := avString(r.PutRequest.Item["pk"])
			if got := e.get("fulla", r.PutRequest.Item) != nil; got == back[pk] {
				t.Fatalf("batch %d on a full disk: %s in the table %t, handed back %t: want exactly one", i, pk, got, back[pk])
			}
			if !back[pk] {
				acked = append(acked, "fulla/"+strings.TrimPrefix(pk, "S:"))
			}
		}
	}

	t.Logf("transaction %d refused; batches: %d acknowledged writes in all, handed back %t", refused, len(acked), handedBack)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e.closed = true
	e2 := newDurableEnv(t, dir, engine.NewManualClock(t0))
	tables := map[string]map[string]string{}
	for _, table := range []string{"fulla", "fullb"} {
		tables[table] = streamMatchesTable(e2.ctx, t, e2.db, e2.st, table)
		for _, pk := range refusedTx(table) {
			if _, there := tables[table][pk]; there {
				t.Errorf("item %s of the refused transaction is in %s after a restart", pk, table)
			}
		}
	}
	for _, k := range acked {
		table, pk, _ := strings.Cut(k, "/")
		if _, there := tables[table]["S:"+pk]; !there {
			t.Errorf("acknowledged item %s is gone after a restart", k)
		}
	}
}
