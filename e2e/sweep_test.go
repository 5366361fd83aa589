package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nats-io/nats.go"

	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/sweep"
)

const (
	sweepE2ETable  = "Carts"
	sweepE2EItems  = 1500 // expiring over sweepE2ESpread
	sweepE2ESpread = 15   // seconds
)

// TestSweepAndArchiveOnNATS is issue 12's "done when": `archiver sweep` and
// `archiver run --expired-when past-ttl --sink nats://...` as processes,
// against an engine process whose own TTL is off. Every item written to
// expire arrives on NATS as an expiry deleted by another principal (the
// sweeper), exactly once; items a user deletes before their TTL never do.
// The p99 of arrival minus TTL is logged (measured, not asserted: the
// README records it).
func TestSweepAndArchiveOnNATS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildArchiver(t)
	work := t.TempDir()
	eng := startProc(t, work, "engine", bin, "engine", "--listen", "127.0.0.1:0", "--ttl-interval", "-1s", "--stream-shards", "2")
	endpoint := engineEndpoint(t, eng)
	db := enginetest.ClientAt(endpoint, "writer")
	createSweptTable(t, db)

	natsAddr := startNATS(t)
	nc, err := nats.Connect(natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var (
		mu      sync.Mutex
		arrived = map[string]int{}
		lags    []time.Duration
		bad     []string
	)
	sub, err := nc.Subscribe("carts.>", func(m *nats.Msg) {
		now := time.Now()
		var line struct {
			Keys     map[string]map[string]string
			Metadata struct{ Kind, DeletedBy, TTLValue string }
		}
		if err := json.Unmarshal(m.Data, &line); err != nil {
			t.Errorf("undecodable message: %v", err)
			return
		}
		key := line.Keys[keyAttr]["S"]
		mu.Lock()
		defer mu.Unlock()
		arrived[key]++
		if line.Metadata.Kind != "expired" || line.Metadata.DeletedBy != "other" {
			bad = append(bad, fmt.Sprintf("%s: kind %q deletedBy %q", key, line.Metadata.Kind, line.Metadata.DeletedBy))
		}
		if ttl, err := strconv.ParseInt(line.Metadata.TTLValue, 10, 64); err == nil && arrived[key] == 1 {
			lags = append(lags, now.Sub(time.Unix(ttl, 0)))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	common := []string{"--endpoint", endpoint, "--table", sweepE2ETable, "--metrics-addr", "127.0.0.1:0", "--log-level", "info"}
	sw := startProc(t, work, "sweep", bin, append([]string{"sweep",
		"--checkpoint", "file://" + filepath.Join(work, "sweep.json")}, common...)...)
	run := startProc(t, work, "run", bin, append([]string{"run", "--expired-when", "past-ttl",
		"--checkpoint", "file://" + filepath.Join(work, "run.json"),
		"--sink", "nats://" + natsAddr + "?subject=carts.{kind}&create-stream=CARTS"}, common...)...)

	// Items expiring over the next seconds; every tenth has an hour to
	// live and is deleted by its user now (well before its TTL, however
	// slow the machine).
	first := time.Now().Add(3 * time.Second).Unix()
	var expiring, userDeleted []string
	for i := 0; i < sweepE2EItems; i++ {
		key := fmt.Sprintf("cart-%05d", i)
		ttl := first + int64(i*sweepE2ESpread/sweepE2EItems)
		if i%10 == 0 {
			ttl += 3600
			userDeleted = append(userDeleted, key)
		} else {
			expiring = append(expiring, key)
		}
		putSwept(t, ctx, db, key, ttl)
	}
	for _, key := range userDeleted {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(sweepE2ETable),
			Key: map[string]dtypes.AttributeValue{keyAttr: &dtypes.AttributeValueMemberS{Value: key}}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually.Wait(t, 2*time.Minute, "every expiring item on NATS", func() error {
		for _, p := range []*proc{eng, sw, run} {
			if p.exited() {
				t.Fatalf("%s exited:\n%s", p.name, p.tail(30))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if n := len(arrived); n < len(expiring) {
			return fmt.Errorf("%d of %d arrived", n, len(expiring))
		}
		return nil
	})
	time.Sleep(time.Second) // time for any stray message to show
	mu.Lock()
	defer mu.Unlock()
	for _, key := range expiring {
		if arrived[key] != 1 {
			t.Errorf("%s arrived %d times, want once", key, arrived[key])
		}
	}
	for _, key := range userDeleted {
		if arrived[key] != 0 {
			t.Errorf("%s, deleted by its user before its TTL, arrived as an expiry", key)
		}
	}
	for _, b := range bad {
		t.Errorf("not a swept expiry: %s", b)
	}
	slices.Sort(lags)
	if len(lags) > 0 {
		t.Logf("arrival on NATS minus TTL (whole seconds) over %d items: p50 %s p99 %s max %s",
			len(lags), lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)*99/100].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
	}
}

// createSweptTable creates the test table with a stream, TTL on ttlAttr and
// the recipe's expiration-window index.
func createSweptTable(t *testing.T, db *dynamodb.Client) {
	t.Helper()
	enginetest.CreateTable(t, db, sweptTable())
}

// sweptTable is the swept table: a stream, TTL on ttlAttr and the
// recipe's expiration-window index.
func sweptTable() enginetest.Table {
	return enginetest.Table{Name: sweepE2ETable, Hash: keyAttr, TTL: ttlAttr,
		Attributes: []dtypes.AttributeDefinition{
			{AttributeName: aws.String(sweep.DefaultWindowAttribute), AttributeType: dtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String(ttlAttr), AttributeType: dtypes.ScalarAttributeTypeN}},
		Indexes: []dtypes.GlobalSecondaryIndex{{IndexName: aws.String(sweep.DefaultIndex),
			KeySchema: []dtypes.KeySchemaElement{{AttributeName: aws.String(sweep.DefaultWindowAttribute), KeyType: dtypes.KeyTypeHash},
				{AttributeName: aws.String(ttlAttr), KeyType: dtypes.KeyTypeRange}},
			Projection: &dtypes.Projection{ProjectionType: dtypes.ProjectionTypeKeysOnly}}},
	}
}

// putSwept writes an item with the TTL ttl and its window attribute.
func putSwept(t *testing.T, ctx context.Context, db *dynamodb.Client, key string, ttl int64) {
	t.Helper()
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(sweepE2ETable), Item: map[string]dtypes.AttributeValue{
		keyAttr:                      &dtypes.AttributeValueMemberS{Value: key},
		ttlAttr:                      &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(ttl, 10)},
		sweep.DefaultWindowAttribute: &dtypes.AttributeValueMemberS{Value: sweep.Window(time.Unix(ttl, 0), sweep.DefaultWindow, 1)},
		"items":                      &dtypes.AttributeValueMemberN{Value: "3"},
	}})
	if err != nil {
		t.Fatal(err)
	}
}
