package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// Clock is the engine's source of time: TTL expiry, stream record times,
// iterator lifetimes and retention all read it.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that only moves when told to. Tests use it to
// expire items and age stream records without waiting. It is safe for
// concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a clock standing at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t (backwards too).
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Advance moves the clock forward by d and returns the new time.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// Options configures an Engine. The zero value is usable: region
// us-east-1, account 000000000000, a TTL sweep every second, one shard per
// stream, 24 h stream retention, real time.
type Options struct {
	Region    string // default us-east-1
	AccountID string // default 000000000000

	// TTLInterval is the pause between background TTL sweeps (default 1s).
	// A negative value disables the sweeper; tests then call SweepTTL.
	TTLInterval time.Duration
	// TTLLag delays each expired item's deletion by a per-item delay in
	// 0..TTLLag past its expiry, mimicking production's lag. The delay is
	// derived from the item's key, so it is stable across sweeps.
	TTLLag time.Duration

	StreamShards         int           // open shards per stream (default 1)
	ShardRollover        time.Duration // close and replace each shard after this age (0 = never)
	ShardRolloverRecords int           // ...or after this many records (0 = never)
	StreamRetention      time.Duration // stream records older than this are trimmed (default 24h)

	Clock  Clock       // default: real time
	Logger *zap.Logger // default: zap.NewNop()
	Hooks  Hooks

	// ControlFrom lists the non-loopback client networks allowed to use
	// the HTTP control API under /_engine/ (see control_api.go); loopback
	// clients are always allowed, everyone else gets 403.
	ControlFrom []netip.Prefix

	// AllowHosts lists host names (or IP addresses), without port, that a
	// request's Host header may name besides localhost, loopback
	// addresses and the engine's own address: docker-compose service
	// names, host.docker.internal; "*" admits any. A request that arrives
	// on a loopback address naming another Host is refused with 403
	// (DNS rebinding would otherwise hand a web page the whole API); one
	// that arrives on another address is checked only when AllowHosts is
	// set (see checkHost).
	AllowHosts []string

	// UI serves the web console at /_engine/ui/ (ui_serve.go) to the
	// clients the control API admits, behind its guards. Off: 404.
	UI bool

	// BodyTimeout bounds the time to receive one request body, from the
	// end of its headers (default 1 minute: 20 MiB at 350 KB/s), whatever
	// length it announces, chunked too; a body not complete by then is
	// answered 408 and its connection closed. A body the engine answers
	// without reading (a refusal) has as long to arrive before the
	// connection is reused; else it closes once the answer is sent.
	BodyTimeout time.Duration
	// MaxConns caps the open connections of a Server from Listen (default
	// 1024). A connection beyond the cap closes the one that has waited
	// longest without a request in progress (idle between keep-alive
	// requests, or not yet past its first request's header); when every
	// one is serving a request, it waits in the listen backlog until one
	// ends.
	MaxConns int
	// IdleTimeout closes a Listen server's keep-alive connection that has
	// waited this long for its next request (default 2 minutes, longer
	// than the SDKs' 90 s, so clients close first).
	IdleTimeout time.Duration

	// DataDir, when set, makes the engine durable: tables, items, TTL
	// settings, tags and streams (shards, records, sequence counters)
	// survive a restart and a crash. Every change is in a write-ahead log
	// in DataDir, fsynced before the request that made it is answered;
	// snapshots bound start-up time. Changes made through Go methods
	// (SweepTTL, the fault hooks) and the background sweeper become
	// durable within 50 ms. One engine at a time may use a directory
	// (DataDir/LOCK). Empty: everything lives in memory.
	DataDir string
}

// Hooks let tests intercept requests.
type Hooks struct {
	// OnRequest is called before each operation with the operation name
	// ("PutItem", "GetRecords", ...) and the HTTP request, whose headers
	// include Authorization (the SigV4 Credential's access key tells
	// callers apart). A non-nil error is sent to the client instead of
	// running the operation: an *Error with its code, message and status
	// (400 unless set); any other error as a 500 InternalServerError.
	// The request body has already been read; do not read it.
	OnRequest func(op string, r *http.Request) error
}

// SetHook replaces the engine's OnRequest hook while it runs (nil removes
// it): a test starts one engine and changes the fault it injects from one
// step to the next. Requests already past the hook are not affected.
func (e *Engine) SetHook(fn func(op string, r *http.Request) error) {
	if fn == nil {
		e.hook.Store(nil)
		return
	}
	e.hook.Store(&fn)
}

// Error is an AWS error: one a hook sends to the client, e.g.
// &Error{Code: "ProvisionedThroughputExceededException", Message: "..."},
// or one the fault-injection methods return (Code
// "ResourceNotFoundException" for a table without a stream, ...).
type Error struct {
	Code    string
	Message string
	Status  int // HTTP status; 400 when zero
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// NewError returns an *Error with the given code, message and status.
func NewError(code, msg string, status int) *Error {
	return &Error{Code: code, Message: msg, Status: status}
}

// Throttle returns the error DynamoDB sends when a table's throughput is
// exceeded (ProvisionedThroughputExceededException, 400); the AWS SDKs
// retry it.
func Throttle() *Error {
	return &Error{Code: awserr.CodeThroughputExceeded, Message: "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."}
}

// Engine is an in-memory DynamoDB and DynamoDB Streams server with a real
// TTL process. It is an http.Handler; all methods are safe for concurrent
// use.
type Engine struct {
	o       Options
	clock   Clock
	log     *zap.Logger
	streams *stream.Registry
	p       *persister // nil without Options.DataDir

	mu     sync.RWMutex
	tables map[tkey]*table // by Region and name

	throttleBatchWrites atomic.Int64 // BatchWriteItem calls still to throttle
	throttleBatchGets   atomic.Int64 // BatchGetItem calls still to throttle

	hook atomic.Pointer[func(op string, r *http.Request) error] // Hooks.OnRequest, replaced by SetHook

	txTokens txTokens // TransactWriteItems ClientRequestTokens (api_transact_tokens.go)

	repl           *replicator // global tables' replication (global_replicate.go)
	ttlIndependent atomic.Bool // every Region's TTL deletes every expired item (SetTTLIndependent)

	listenHost   string                    // the host Listen was given: a Host the engine answers to
	guardLog     guardLog                  // rate limits of the guards' WARN lines (loglimit.go)
	clockSet     atomic.Pointer[time.Time] // the time POST /_engine/clock last set (persist_control.go)
	bodiesInRead atomic.Int64              // request bodies being received (readBody)

	reqSeq   atomic.Uint64
	reqSalt  uint64
	seedSeq  atomic.Uint64
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// New returns an engine and starts its background sweeper (unless
// o.TTLInterval < 0). Close stops it. With o.DataDir it first loads the
// state kept there; it fails when another engine holds the directory or
// its files are corrupt (the error names the file and offset).
func New(o Options) (*Engine, error) {
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if !validRegion(o.Region) {
		return nil, fmt.Errorf("engine: Region %q is not a Region name: 1 to 63 lower-case letters, digits and hyphens, e.g. us-east-1", o.Region)
	}
	if o.AccountID == "" {
		o.AccountID = "000000000000"
	}
	if o.TTLInterval == 0 {
		o.TTLInterval = time.Second
	}
	if o.TTLLag < 0 {
		return nil, fmt.Errorf("engine: TTLLag must not be negative, got %v", o.TTLLag)
	}
	if o.StreamShards == 0 {
		o.StreamShards = 1
	}
	if o.StreamShards < 0 || o.StreamShards > 1024 {
		return nil, fmt.Errorf("engine: StreamShards must be 1..1024, got %d", o.StreamShards)
	}
	if o.ShardRollover < 0 || o.ShardRolloverRecords < 0 {
		return nil, errors.New("engine: ShardRollover and ShardRolloverRecords must not be negative")
	}
	if o.StreamRetention == 0 {
		o.StreamRetention = 24 * time.Hour
	}
	if o.StreamRetention < 0 {
		return nil, fmt.Errorf("engine: StreamRetention must be positive, got %v", o.StreamRetention)
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if err := checkConnOptions(&o); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	e := &Engine{
		o:      o,
		clock:  o.Clock,
		log:    o.Logger,
		tables: map[tkey]*table{},
		stop:   make(chan struct{}),
	}
	e.SetHook(o.Hooks.OnRequest)
	e.repl = newReplicator(e)
	e.reqSalt = uint64(time.Now().UnixNano())
	e.streams = stream.NewRegistry(stream.Options{
		Region:          o.Region,
		AccountID:       o.AccountID,
		Shards:          o.StreamShards,
		Rollover:        o.ShardRollover,
		RolloverRecords: o.ShardRolloverRecords,
		Retention:       o.StreamRetention,
		Now:             o.Clock.Now,
	})
	if o.DataDir != "" {
		p, err := openPersister(e, o.DataDir)
		if err != nil {
			return nil, err
		}
		e.p = p
	}
	if o.TTLInterval > 0 {
		e.wg.Add(1)
		go e.background(o.TTLInterval)
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.repl.run(e.stop)
	}()
	return e, nil
}

// background runs the TTL sweeper and the streams' housekeeping.
func (e *Engine) background(every time.Duration) {
	defer e.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		if n, err := e.SweepTTL(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("ttl sweep failed", zap.Error(err))
		} else if n > 0 {
			e.log.Debug("ttl sweep", zap.Int("deleted", n))
		}
		e.streams.Tick()
	}
}

// Close stops the background work. The engine keeps serving requests;
// with Options.DataDir it first snapshots its state and releases the
// directory, and requests after Close are refused with a 503
// ServiceUnavailable before they change anything (their effects could not
// be made durable).
func (e *Engine) Close() error {
	e.stopOnce.Do(func() { close(e.stop) })
	e.wg.Wait()
	if e.p != nil {
		var err error
		if !e.p.closed() {
			err = e.saveControl() // the throttles used since the last change
		}
		return errors.Join(e.p.close(), err)
	}
	return nil
}

// lookup returns the table named name, or whose ARN is name (DynamoDB
// takes either), in the Region ctx acts in (regionFor), or a
// ResourceNotFoundException.
func (e *Engine) lookup(ctx context.Context, name string) (*table, error) {
	region, fixed := e.regionFor(ctx)
	e.mu.RLock()
	t := e.tableLocked(region, fixed, name)
	e.mu.RUnlock()
	if t == nil {
		return nil, awserr.NotFound("Requested resource not found: Table: %s not found", name)
	}
	return t, nil
}

// sortedTables returns every table of every Region, by Region, then name.
func (e *Engine) sortedTables() []*table {
	e.mu.RLock()
	tables := make([]*table, 0, len(e.tables))
	for _, t := range e.tables {
		tables = append(tables, t)
	}
	e.mu.RUnlock()
	sort.Slice(tables, func(i, j int) bool {
		return tables[i].region < tables[j].region || tables[i].region == tables[j].region && tables[i].name < tables[j].name
	})
	return tables
}

// tableLocked returns the table of region named name or whose ARN is
// name, or nil. An ARN names its own Region: unless fixed (a request, which
// acts in one Region only), that Region is searched. e.mu is held.
func (e *Engine) tableLocked(region string, fixed bool, name string) *table {
	if !strings.HasPrefix(name, "arn:") {
		return e.tables[tkey{region, name}]
	}
	n, err := checkTableARN(&name)
	if err != nil {
		return nil
	}
	if r := arnRegion(name); !fixed {
		region = r
	}
	if t := e.tables[tkey{region, n}]; t != nil && t.arn == name {
		return t
	}
	return nil
}

// tableARN is the ARN of the table named name in region.
func (e *Engine) tableARN(region, name string) string {
	return "arn:aws:dynamodb:" + region + ":" + e.o.AccountID + ":table/" + name
}

// public converts the engine's internal wire errors into *Error so that
// callers of the Go API can inspect them with errors.As.
func public(err error) error {
	var ae *awserr.Error
	if errors.As(err, &ae) {
		return &Error{Code: ae.Code, Message: ae.Message, Status: ae.HTTPStatus()}
	}
	return err
}

// streamARN returns the latest stream of a table named in the default
// Region, or by its ARN in the ARN's Region.
func (e *Engine) streamARN(tableName string) (string, error) {
	t, err := e.lookup(context.Background(), tableName)
	if err != nil {
		return "", err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.latest == nil {
		return "", awserr.NotFound("Table %s has no stream", tableName)
	}
	return t.latest.ARN(), nil
}

// StreamARN returns the ARN of the table's latest stream (enabled or
// disabled).
func (e *Engine) StreamARN(table string) (string, error) {
	arn, err := e.streamARN(table)
	return arn, public(err)
}

// ParseRollover parses the --shard-rollover flag: a Go duration ("4h",
// "90s") rolls shards over by age, a plain integer ("500") by record count;
// "" and "0" mean never.
func ParseRollover(s string) (time.Duration, int, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, 0, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return 0, 0, fmt.Errorf("shard rollover %q: record count must not be negative", s)
		}
		return 0, n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, 0, fmt.Errorf("shard rollover %q: want a duration like 4h or a record count like 500", s)
	}
	if d < 0 {
		return 0, 0, fmt.Errorf("shard rollover %q: duration must not be negative", s)
	}
	return d, 0, nil
}
