// Package restoretest builds archives of expired items for the tests of
// restore, replay and their commands: an engine over HTTP, a table whose
// items expire, and the expiries archived through the real file sink.
package restoretest

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

// T0 is the engine clock's start.
var T0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// Bed is one engine on a loopback port, its manual clock and SDK clients.
type Bed struct {
	Srv   *engine.Server
	Clock *engine.ManualClock
	DB    *dynamodb.Client
	ST    *dynamodbstreams.Client
	Ctx   context.Context
	t     testing.TB
}

// Start starts an engine with a manual clock at T0 and the background
// sweeper off (ExpireAll sweeps), o's hooks kept.
func Start(t testing.TB, o engine.Options) *Bed {
	t.Helper()
	clock := engine.NewManualClock(T0)
	o.Clock, o.TTLInterval = clock, -1
	eb := enginetest.Start(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return &Bed{Srv: eb.Server, Clock: clock, Ctx: ctx, t: t, DB: eb.DynamoDB, ST: eb.Streams}
}

// CreateTable makes a table with hash key pk (S) and range key sk (N), a
// stream of view type view (none when view is "") and, when ttlAttr is
// not "", TTL on that attribute.
func (b *Bed) CreateTable(name, ttlAttr string, view st.StreamViewType) {
	b.t.Helper()
	enginetest.CreateTable(b.t, b.DB, enginetest.Table{Name: name, Range: "sk", RangeType: ddb.ScalarAttributeTypeN,
		Stream: ddb.StreamViewType(view), NoStream: view == "", TTL: ttlAttr})
}

// Item is item i of every DynamoDB type (S, N with 38 digits, B, SS, NS,
// BS, M, L, NULL, BOOL, nested), key pk=user#(i%7), sk=i, expiring at
// ttl (the attribute "expires").
func Item(i int, ttl int64) map[string]ddb.AttributeValue {
	n38 := new(big.Int).Exp(big.NewInt(10), big.NewInt(37), nil)
	n38.Add(n38, big.NewInt(int64(i)))
	return map[string]ddb.AttributeValue{
		"pk":      &ddb.AttributeValueMemberS{Value: fmt.Sprintf("user#%d", i%7)},
		"sk":      &ddb.AttributeValueMemberN{Value: fmt.Sprint(i)},
		"expires": &ddb.AttributeValueMemberN{Value: fmt.Sprint(ttl)},
		"s":       &ddb.AttributeValueMemberS{Value: fmt.Sprintf("héllo \"%d\"\n\t✓", i)},
		"n38":     &ddb.AttributeValueMemberN{Value: n38.String()},
		"nfrac":   &ddb.AttributeValueMemberN{Value: "-0.000000000000000000000000000000000001"},
		"b":       &ddb.AttributeValueMemberB{Value: []byte{0, 1, 2, 0xff, byte(i)}},
		"ss":      &ddb.AttributeValueMemberSS{Value: []string{"a", "b", fmt.Sprint(i)}},
		"ns":      &ddb.AttributeValueMemberNS{Value: []string{"1", "2.5", "99999999999999999999999999999999999999"}},
		"bs":      &ddb.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"null":    &ddb.AttributeValueMemberNULL{Value: true},
		"t":       &ddb.AttributeValueMemberBOOL{Value: true},
		"f":       &ddb.AttributeValueMemberBOOL{Value: false},
		"empty":   &ddb.AttributeValueMemberS{Value: ""},
		"l": &ddb.AttributeValueMemberL{Value: []ddb.AttributeValue{
			&ddb.AttributeValueMemberS{Value: "x"}, &ddb.AttributeValueMemberN{Value: "1e3"},
			&ddb.AttributeValueMemberL{Value: []ddb.AttributeValue{&ddb.AttributeValueMemberNULL{Value: true}}},
		}},
		"m": &ddb.AttributeValueMemberM{Value: map[string]ddb.AttributeValue{
			"nested": &ddb.AttributeValueMemberM{Value: map[string]ddb.AttributeValue{
				"deep": &ddb.AttributeValueMemberL{Value: []ddb.AttributeValue{&ddb.AttributeValueMemberBS{Value: [][]byte{{9}}}}},
				"ns":   &ddb.AttributeValueMemberNS{Value: []string{"-1"}},
			}},
			"empty": &ddb.AttributeValueMemberM{Value: map[string]ddb.AttributeValue{}},
		}},
	}
}

// PutExpiring writes items 0..n-1 of table with a TTL one minute after
// T0, and returns them.
func (b *Bed) PutExpiring(table string, n int) []map[string]ddb.AttributeValue {
	b.t.Helper()
	var out []map[string]ddb.AttributeValue
	for i := range n {
		it := Item(i, T0.Add(time.Minute).Unix())
		if _, err := b.DB.PutItem(b.Ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			b.t.Fatalf("PutItem: %v", err)
		}
		out = append(out, it)
	}
	return out
}

// ExpireAll moves the clock past every TTL PutExpiring wrote and sweeps.
func (b *Bed) ExpireAll() int {
	b.t.Helper()
	b.Clock.Set(T0.Add(2 * time.Minute))
	n, err := b.Srv.Engine().SweepTTL(b.Ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

// Archive reads table's whole stream, decodes every record as the
// consumer does and writes the events through the real file sink under
// dir, all kinds. It returns the number of events archived.
func (b *Bed) Archive(table, ttlAttr, dir string) int {
	b.t.Helper()
	sk, err := sinks.NewFileSink(dir, sinks.Options{NoManifests: true})
	if err != nil {
		b.t.Fatal(err)
	}
	return b.ArchiveTo(sk, table, ttlAttr)
}

// ArchiveTo is Archive through any sink (the S3 sink: an s3:// archive),
// which it closes.
func (b *Bed) ArchiveTo(sk sinks.Sink, table, ttlAttr string) int {
	b.t.Helper()
	evs := b.StreamEvents(table, ttlAttr)
	byShard := map[string][]event.Event{}
	var order []string
	for _, e := range evs {
		if byShard[e.ShardID] == nil {
			order = append(order, e.ShardID)
		}
		byShard[e.ShardID] = append(byShard[e.ShardID], e)
	}
	acks := make(chan error, len(order))
	for _, sh := range order {
		batch := sinks.Batch{StreamARN: evs[0].StreamARN, ShardID: sh, Events: byShard[sh]}
		if err := sk.Write(b.Ctx, batch, func(err error) { acks <- err }); err != nil {
			b.t.Fatal(err)
		}
	}
	if err := sk.Flush(b.Ctx); err != nil {
		b.t.Fatal(err)
	}
	for range order {
		if err := <-acks; err != nil {
			b.t.Fatal(err)
		}
	}
	if err := sk.Close(b.Ctx); err != nil {
		b.t.Fatal(err)
	}
	return len(evs)
}

// StreamEvents reads and decodes every record of table's stream.
func (b *Bed) StreamEvents(table, ttlAttr string) []event.Event {
	b.t.Helper()
	var out []event.Event
	for _, r := range b.StreamRecords(table) {
		e, err := event.Decode(table, r.StreamARN, r.ShardID, r.Record, ttlAttr)
		if err != nil {
			b.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// Record is one stream record and where it was read.
type Record struct {
	StreamARN, ShardID string
	Record             st.Record
}

// StreamRecords reads every record of table's stream, shard by shard.
func (b *Bed) StreamRecords(table string) []Record {
	b.t.Helper()
	td, err := b.DB.DescribeTable(b.Ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		b.t.Fatal(err)
	}
	arn := aws.ToString(td.Table.LatestStreamArn)
	desc, err := b.ST.DescribeStream(b.Ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		b.t.Fatal(err)
	}
	var out []Record
	for _, sh := range desc.StreamDescription.Shards {
		it, err := b.ST.GetShardIterator(b.Ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: st.ShardIteratorTypeTrimHorizon})
		if err != nil {
			b.t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			r, err := b.ST.GetRecords(b.Ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				b.t.Fatal(err)
			}
			for _, rec := range r.Records {
				out = append(out, Record{StreamARN: arn, ShardID: aws.ToString(sh.ShardId), Record: rec})
			}
			if len(r.Records) == 0 {
				break
			}
			iter = r.NextShardIterator
		}
	}
	return out
}

// EventNames counts table's stream records by key (pk/sk) and event name,
// e.g. m["user#1/8"]["INSERT"].
func (b *Bed) EventNames(table string) map[string]map[string]int {
	b.t.Helper()
	m := map[string]map[string]int{}
	for _, r := range b.StreamRecords(table) {
		keys := r.Record.Dynamodb.Keys
		k := keyString(keys["pk"]) + "/" + keyString(keys["sk"])
		if m[k] == nil {
			m[k] = map[string]int{}
		}
		m[k][string(r.Record.EventName)]++
	}
	return m
}

func keyString(v st.AttributeValue) string {
	switch x := v.(type) {
	case *st.AttributeValueMemberS:
		return x.Value
	case *st.AttributeValueMemberN:
		return x.Value
	}
	return strings.TrimSpace(fmt.Sprint(v))
}

// Scan returns every item of table.
func (b *Bed) Scan(table string) []map[string]ddb.AttributeValue {
	b.t.Helper()
	var all []map[string]ddb.AttributeValue
	in := &dynamodb.ScanInput{TableName: aws.String(table)}
	for {
		out, err := b.DB.Scan(b.Ctx, in)
		if err != nil {
			b.t.Fatal(err)
		}
		all = append(all, out.Items...)
		if out.LastEvaluatedKey == nil {
			return all
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
