package sweep

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// t0 is where the beds' clocks start: on a boundary of every window the
// tests use.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const table = "sessions"

// bed is the engine over HTTP with the real SDK client, a manual clock
// shared by the engine and the sweeper, and an in-memory cursor store.
type bed struct {
	t      *testing.T
	clock  *engine.ManualClock
	db     *dynamodb.Client
	api    *recorder
	store  *memStore
	window time.Duration
	shards int
}

// bedOptions shape a bed's table.
type bedOptions struct {
	window     time.Duration        // default 1m
	shards     int                  // Window's shards (default 1)
	projection types.ProjectionType // default KEYS_ONLY
	hashOnly   bool                 // the index has no range key
	noTTL      bool                 // leave the table's TTL disabled
	hook       func(op string, r *http.Request) error
}

func newBed(t *testing.T, o bedOptions) *bed {
	t.Helper()
	b := &bed{t: t, clock: engine.NewManualClock(t0), store: newMemStore(), window: or(o.window, time.Minute), shards: or(o.shards, 1)}
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1, Clock: b.clock, Hooks: engine.Hooks{OnRequest: o.hook}})
	b.db = bed.DynamoDB
	b.api = &recorder{Client: b.db}
	b.createTable(o)
	return b
}

// createTable makes the table: key (pk S, sk N), TTL on "ttl", and the
// recipe's index.
func (b *bed) createTable(o bedOptions) {
	b.t.Helper()
	ixKey := []types.KeySchemaElement{{AttributeName: aws.String(DefaultWindowAttribute), KeyType: types.KeyTypeHash}}
	defs := []types.AttributeDefinition{{AttributeName: aws.String(DefaultWindowAttribute), AttributeType: types.ScalarAttributeTypeS}}
	if !o.hashOnly {
		ixKey = append(ixKey, types.KeySchemaElement{AttributeName: aws.String("ttl"), KeyType: types.KeyTypeRange})
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String("ttl"), AttributeType: types.ScalarAttributeTypeN})
	}
	tbl := enginetest.Table{Name: table, Range: "sk", RangeType: types.ScalarAttributeTypeN, NoStream: true, TTL: "ttl",
		Attributes: defs,
		Indexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String(DefaultIndex),
			KeySchema:  ixKey,
			Projection: &types.Projection{ProjectionType: or(o.projection, types.ProjectionTypeKeysOnly)},
		}},
	}
	if o.noTTL {
		tbl.TTL = ""
	}
	enginetest.CreateTable(b.t, b.db, tbl)
}

// sweeper makes a sweeper of the bed's table with fast retries; edit
// adjusts its Config first.
func (b *bed) sweeper(edit func(*Config)) *Sweeper {
	b.t.Helper()
	cfg := Config{
		Client: b.api, Table: table, Cursor: b.store,
		Window: b.window, WindowShards: b.shards, Lookback: 2 * b.window,
		Now:        b.clock.Now,
		Logger:     zaptest.NewLogger(b.t, zaptest.Level(zap.WarnLevel)),
		Registerer: prometheus.NewRegistry(),
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	s.retry.Min, s.retry.Max = time.Millisecond, 5*time.Millisecond
	return s
}

// pass runs one pass and fails the test on an error.
func (b *bed) pass(s *Sweeper) PassStats {
	b.t.Helper()
	st, err := s.Pass(context.Background())
	if err != nil {
		b.t.Fatalf("pass at %v: %v (%+v)", b.clock.Now(), err, st)
	}
	return st
}

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// epoch renders t as a TTL Number with milliseconds.
func epoch(t time.Time) string {
	ms := t.UnixMilli()
	return fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
}

// item is a test item: its key, TTL and window attribute.
type item struct {
	pk     string
	ttl    time.Time
	window string                          // default Window(ttl) with the bed's window and shards
	extra  map[string]types.AttributeValue // added; a nil value removes the attribute
}

// put writes items.
func (b *bed) put(items ...item) {
	b.t.Helper()
	for chunk := range slices.Chunk(items, 25) {
		var reqs []types.WriteRequest
		for _, it := range chunk {
			av := map[string]types.AttributeValue{
				"pk":                   &types.AttributeValueMemberS{Value: it.pk},
				"sk":                   &types.AttributeValueMemberN{Value: "1"},
				"ttl":                  &types.AttributeValueMemberN{Value: epoch(it.ttl)},
				DefaultWindowAttribute: &types.AttributeValueMemberS{Value: or(it.window, Window(it.ttl, b.window, b.shards))},
			}
			for k, v := range it.extra {
				if av[k] = v; v == nil {
					delete(av, k)
				}
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: av}})
		}
		in := &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}}
		for len(in.RequestItems) > 0 {
			out, err := b.db.BatchWriteItem(context.Background(), in)
			if err != nil {
				b.t.Fatal(err)
			}
			in.RequestItems = out.UnprocessedItems
		}
	}
}

// remaining returns the table's items by pk.
func (b *bed) remaining() map[string]map[string]types.AttributeValue {
	b.t.Helper()
	out := map[string]map[string]types.AttributeValue{}
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		page, err := b.db.Scan(context.Background(), in)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, it := range page.Items {
			out[it["pk"].(*types.AttributeValueMemberS).Value] = it
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// checkDue fails unless exactly the items whose TTL is not below now
// remain: nothing deleted early, nothing due left.
func (b *bed) checkDue(items []item) {
	b.t.Helper()
	now := b.clock.Now()
	left := b.remaining()
	for _, it := range items {
		_, ok := left[it.pk]
		if due := it.ttl.Before(now); due == ok {
			b.t.Fatalf("at %v: item %s (TTL %v) remains: %v, want %v", now, it.pk, it.ttl, ok, !due)
		}
	}
}

// spread makes n items named prefix-i whose TTLs are spread over
// [from, from+span) to the millisecond, with every tenth on a window
// edge.
func spread(prefix string, n int, from time.Time, span, window time.Duration) []item {
	items := make([]item, n)
	for i := range items {
		off := time.Duration(i*7919%int(span/time.Millisecond)) * time.Millisecond
		if i%10 == 0 {
			off = off.Truncate(window)
		}
		items[i] = item{pk: prefix + "-" + strconv.Itoa(i), ttl: from.Add(off)}
	}
	return items
}

// recorder is the DynamoDB client as the sweeper sees it: it records the
// Query windows, counts calls, bounds nothing, and can act just before
// a DeleteItem is sent.
type recorder struct {
	*dynamodb.Client
	beforeDelete func(in *dynamodb.DeleteItemInput)

	mu       sync.Mutex
	queries  []string       // the window of every first page
	pages    map[string]int // pages read, by window
	deletes  int
	inflight atomic.Int64
	maxIn    atomic.Int64 // most DeleteItem calls in flight at once
}

func (r *recorder) Query(ctx context.Context, in *dynamodb.QueryInput, f ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	w := in.ExpressionAttributeValues[":w"].(*types.AttributeValueMemberS).Value
	r.mu.Lock()
	if in.ExclusiveStartKey == nil {
		r.queries = append(r.queries, w)
	}
	if r.pages == nil {
		r.pages = map[string]int{}
	}
	r.pages[w]++
	r.mu.Unlock()
	return r.Client.Query(ctx, in, f...)
}

func (r *recorder) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, f ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	n := r.inflight.Add(1)
	defer r.inflight.Add(-1)
	for m := r.maxIn.Load(); n > m && !r.maxIn.CompareAndSwap(m, n); m = r.maxIn.Load() {
	}
	r.mu.Lock()
	r.deletes++
	before := r.beforeDelete
	r.mu.Unlock()
	if before != nil {
		before(in)
	}
	return r.Client.DeleteItem(ctx, in, f...)
}

// deleteCount is the number of DeleteItem calls so far.
func (r *recorder) deleteCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deletes
}

// pagesOf is the number of Query pages read of window w.
func (r *recorder) pagesOf(w string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pages[w]
}

// takeQueries returns the windows queried since the last call.
func (r *recorder) takeQueries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.queries = nil
	return q
}

// memStore is an in-memory CursorStore that, like the durable ones,
// refuses to move a cursor back.
type memStore struct {
	mu    sync.Mutex
	c     Cursor
	saves []time.Time
}

func newMemStore() *memStore { return &memStore{} }

func (m *memStore) LoadCursor(ctx context.Context, tbl string) (Cursor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c, nil
}

func (m *memStore) SaveCursor(ctx context.Context, tbl string, c Cursor) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.Window.Before(m.c.Window) {
		return errors.New("memStore: cursor moves back")
	}
	m.c = c
	m.saves = append(m.saves, c.Window)
	return nil
}

func (m *memStore) cursor() (Cursor, []time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c, slices.Clone(m.saves)
}
