package engine_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/smallfs"
)

// TestPersistFullDisk fills a real 8 MiB tmpfs under the data directory
// (skipped where mounting is not permitted): a write is refused with a
// ThrottlingException naming the directory and changes nothing, reads and
// the clock go on, the TTL sweep deletes nothing it cannot log with its
// REMOVE record, its control endpoint answers 503, writes resume by
// themselves once space is freed, and after a restart every item matches
// its stream: acknowledged writes there with their records, refused ones
// absent.
func TestPersistFullDisk(t *testing.T) {
	fs := smallfs.Mount(t, "8m")
	dir := filepath.Join(fs, "data")
	e := newDurableEnv(t, dir, engine.NewManualClock(t0))
	e.createTable("full", "", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}
	})
	if _, err := e.db.UpdateTimeToLive(e.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("full"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	exp := fmt.Sprint(t0.Add(-time.Hour).Unix())
	for i := 0; i < 30; i++ {
		e.put("full", item{"pk": S(fmt.Sprintf("ttl-%02d", i)), "exp": N(exp)})
	}
	ballast := smallfs.Fill(t, fs, 4<<20)
	db, _ := binaryClients(e.srv.Endpoint(), 1) // one attempt: see each answer
	big := strings.Repeat("x", 100<<10)
	var acked []string
	var refusal error
	for i := 0; refusal == nil; i++ {
		k := fmt.Sprintf("big-%03d", i)
		_, err := db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("full"), Item: item{"pk": S(k), "v": S(big)}})
		switch {
		case err == nil:
			acked = append(acked, k)
		case i > 200:
			t.Fatalf("an 8 MiB disk took 20 MiB of items: %v", err)
		default:
			refusal = err
		}
	}
	refusedKey := fmt.Sprintf("big-%03d", len(acked))
	var re *awshttp.ResponseError
	if errCode(refusal) != "ThrottlingException" || !errors.As(refusal, &re) || re.HTTPStatusCode() != 400 || !strings.Contains(errMsg(refusal), dir) {
		t.Fatalf("PutItem on a full disk: %v; want a 400 ThrottlingException naming %s", refusal, dir)
	}
	// Small writes still fit in the space the log reserved; fill it too.
	for i := 0; ; i++ {
		k := fmt.Sprintf("small-%05d", i)
		_, err := db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("full"), Item: item{"pk": S(k)}})
		if err != nil {
			if errCode(err) != "ThrottlingException" {
				t.Fatalf("small PutItem on a full disk: %v", err)
			}
			break
		}
		acked = append(acked, k)
		if i > 100000 {
			t.Fatal("small writes are never refused")
		}
	}
	if got := e.get("full", item{"pk": S(acked[0])}); got == nil {
		t.Errorf("GetItem on a full disk: acknowledged item %s not found", acked[0])
	}
	if got := e.get("full", item{"pk": S(refusedKey)}); got != nil {
		t.Errorf("the refused item %s is in the table", refusedKey)
	}
	resp, err := http.Get(e.srv.Endpoint() + "/_engine/clock")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /_engine/clock on a full disk: %v %v, want 200", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post(e.srv.Endpoint()+"/_engine/ttl/sweep", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("POST /_engine/ttl/sweep on a full disk: %d, want 503", resp.StatusCode)
	}

	if _, err := db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("full"), Key: item{"pk": S(acked[0])}}); errCode(err) != "ThrottlingException" {
		t.Errorf("DeleteItem on a full disk: %v, want a ThrottlingException", err)
	}

	// Free the space: writes resume without a restart.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.SweepTTL(e.ctx); err != nil {
		t.Fatalf("SweepTTL once space is freed: %v", err)
	}
	e.put("full", item{"pk": S("after")})
	acked = append(acked, "after")

	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e.closed = true
	e2 := newDurableEnv(t, dir, engine.NewManualClock(t0))
	for _, k := range acked {
		if e2.get("full", item{"pk": S(k)}) == nil {
			t.Errorf("acknowledged item %s is gone after a restart", k)
		}
	}
	if e2.get("full", item{"pk": S(refusedKey)}) != nil {
		t.Errorf("the refused item %s is there after a restart", refusedKey)
	}
	desc, err := e2.db.DescribeTable(e2.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("full")})
	if err != nil {
		t.Fatal(err)
	}
	inserted, removed := map[string]bool{}, map[string]bool{}
	for _, sh := range e2.shardIDs("full") {
		for _, r := range e2.readShard(*desc.Table.LatestStreamArn, sh, "TRIM_HORIZON", "") {
			pk := r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS).Value
			switch r.EventName {
			case "INSERT":
				inserted[pk] = true
			case "REMOVE":
				removed[pk] = true
			}
		}
	}
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("ttl-%02d", i)
		there := e2.get("full", item{"pk": S(k)}) != nil
		if there == removed[k] {
			t.Errorf("%s: in the table %v, REMOVE record %v: want exactly one", k, there, removed[k])
		}
	}
	for _, k := range acked {
		if !inserted[k] {
			t.Errorf("acknowledged item %s has no INSERT record", k)
		}
	}
	if inserted[refusedKey] {
		t.Errorf("the refused item %s has an INSERT record", refusedKey)
	}
}
