// Package consumer turns DynamoDB Streams records into archived events: it
// decodes each record, classifies it (a TTL expiry, a user's delete, an
// insert or a modify), hands each event to the sinks that want its kind, and
// advances each shard's checkpoint only as far as every sink acknowledged
// every event, contiguously. A crash therefore re-delivers at most the
// records after the last checkpoint and never skips one.
//
// A [Consumer] runs a [shard.Walker] (which reads the shards in lineage
// order), processes the records it reads, and adapts a [checkpoint.Store]
// as the walker's [shard.Positions]: a restarted consumer resumes each
// shard after its checkpoint.
//
// # Order and retries
//
// Batches of one shard reach each sink in stream order. A sink that
// acknowledges a batch with an error gets that batch and every later batch
// of the shard again, in order, after an exponential backoff with jitter,
// for as long as the consumer runs; the shard's checkpoint stays behind the
// failed batch meanwhile and other sinks are not written again. Sinks must
// therefore tolerate duplicates (the sinks package's contract).
//
// # Coverage
//
// A sink that implements [Recorder] (the S3 and file sinks) records, in
// its own archive, the ranges of each shard the consumer read (package
// manifest), and a shard's checkpoint waits for them: it is saved only
// right after every recording sink's Record of the range up to it
// returned nil, when one of them says a range is due (RecordDue: its
// cadence), at the shard's end (the last range, Ended), at every stop or
// hand-off (drained, recorded, saved, then released) and before records
// that were trimmed unread. A range runs from the last saved position
// ("": the shard's start) to the new one, and counts the records read,
// the events each recording sink was given by kind and the dead letters
// by reason; it names the shard's parent and what was not read (a
// trimmed start, records trimmed under the reader, a LATEST start). A
// failed Record is retried like a failed save. Without a recording sink
// nothing waits: checkpoints are saved every CheckpointInterval as ever.
//
// # Path of a batch
//
// A batch the walker read goes, top to bottom, through:
//
//  1. Consumer.process (consumer.go): decode and classify its records
//     (ttl.go looks up the table's TTL attribute; undecodable.go sets the
//     undecodable aside), split the events by route and make the batch an
//     entry (entry.go);
//  2. shardDelivery.add (sharddelivery.go): admit the entry under the
//     shard's and the consumer's in-flight budgets, queued in stream order;
//  3. lane.enqueue, lane.run, lane.ack, lane.popAcked (lane.go): each
//     route's lane writes its item (item.go) to the sink, retries a failed
//     one and every later one in order, and hands the undeliverable to the
//     dead-letter lane (deadletter.go);
//  4. item.finish, shardDelivery.entryDone and advance (item.go,
//     sharddelivery.go): once every sink acknowledged the entry, and every
//     entry before it, the acknowledged prefix advances and wakes the
//     shard's saver;
//  5. shardDelivery.runSaver, saveIfAdvanced, saveCheckpoint and take
//     (sharddelivery.go): the saver has the recording sinks record the
//     range (coverage.go) and calls the store's Save.
//
// Beside the path, Consumer.reportLag sets the lag gauges and watches for
// stuck shards (stuck.go); it saves nothing.
//
// # Memory
//
// Each shard holds at most Config.MaxInFlightBytes of records that are not
// yet acknowledged by every sink, and all shards together at most
// Config.MaxInFlightBytesTotal, both counted as estimated memory: the
// decoded records ([event.EstimateMemory]) and every sink's rendered copy
// of the events it was given; while a budget is full the shard's reader waits
// (backpressure): a slow sink slows reading down instead of filling memory,
// and many shards behind at once (after an outage) share one bound. A
// shard that waits for budget for Config.StarvedFlush makes every sink
// Flush, so that a sink holding events until a size threshold (S3's
// flush-bytes) cannot stall reading until its flush interval.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/budget"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

// TableAPI is the DynamoDB API the consumer needs: DescribeTable (to find
// tables' streams) and DescribeTimeToLive (to find their TTL attribute).
// *dynamodb.Client satisfies it.
type TableAPI interface {
	shard.TableAPI
	TTLAPI
}

// Route sends the events of some kinds to a sink.
type Route struct {
	Sink sinks.Sink
	// Kinds are the kinds the sink gets; empty means [event.Expired] only.
	Kinds []event.Kind
}

// Config configures a Consumer. Streams, Store, Routes and at least one of
// TableNames, StreamARNs or a TableSource are required; TableNames (and a
// TableSource) also need Tables.
type Config struct {
	// Options configure the walker that reads the shards, as they are:
	// Streams (the DynamoDB Streams client), TableNames and StreamARNs
	// (what to read), Start (where a shard with no checkpoint starts),
	// Assigner (which shards this worker reads: a lease store; nil: every
	// shard, one worker), its limits and intervals (zero: the walker's
	// defaults). The consumer uses some of them itself: StreamRetention
	// (below TrimWarning; default 24 h), Logger (its own logs are named
	// "consumer", the walker's "shard"; nil: none) and Registerer (the
	// consumer's and the walker's metrics; nil: not registered). It sets
	// Processor and Positions itself (they must be nil), and the walker's
	// Tables from Config.Tables (Options.Tables must be nil). Options.Now
	// is the walker's clock only; Config.Now is the consumer's.
	shard.Options
	// Tables is the DynamoDB client: it finds tables' streams and their TTL
	// attribute. Optional with StreamARNs only (TTL values are then
	// unknown).
	Tables TableAPI

	// Store keeps the checkpoints. The consumer does not close it.
	Store checkpoint.Store
	// Routes are the sinks and the kinds each gets. The consumer closes the
	// sinks when Run returns.
	Routes []Route

	// MaxInFlightBytes bounds the estimated memory
	// ([event.EstimateMemory], and the sinks' copies) of one shard's
	// records not yet acknowledged by every sink (default 64 MiB, some
	// 14,000 small items with two sinks). A batch
	// larger than the budget is admitted alone.
	MaxInFlightBytes int
	// MaxInFlightBytesTotal bounds the same over every shard (default
	// 128 MiB). Both count the records and the sinks' rendered copies of
	// them (lines, messages); the garbage collector's headroom and the
	// sinks' own buffers come on top (see the README's sizing advice).
	// A batch larger than it is admitted only when nothing else is in
	// flight.
	MaxInFlightBytesTotal int
	// StarvedFlush: once a shard has waited this long for budget, every
	// sink is asked to Flush (at most once per StarvedFlush), so that
	// events a sink holds back for a size threshold are written and
	// acknowledged (default 2 s; negative: never).
	StarvedFlush time.Duration
	// CheckpointInterval is the least time between two periodic saves of a
	// shard's checkpoint (default 1 s). When a shard's acknowledged prefix
	// advances and its checkpoint was not saved in the last interval, it
	// is saved at once; further advances within the interval are saved
	// together at its end. Checkpoints are also saved when a shard ends or
	// stops and at shutdown. With a recording sink ([Recorder]) a periodic
	// save waits until one of them says the shard's range is due, asked
	// again every interval while something is unsaved.
	CheckpointInterval time.Duration
	// RetryMinBackoff and RetryMaxBackoff bound the backoff between
	// retries of a failed sink write (defaults 100 ms and 30 s).
	RetryMinBackoff, RetryMaxBackoff time.Duration

	// DeadLetter, when set, receives what can never be delivered, each
	// event annotated with [event.DeadLetter]: records the consumer cannot
	// decode (at once, without stopping the shard), and the events of a
	// batch that a sink failed permanently ([sinks.ErrPermanent], or only
	// the events a [sinks.RejectedError] names) or kept failing for longer
	// than RetryFor. Once the dead-letter sink acknowledged them they count
	// as delivered to the sink that failed them, and the checkpoint may
	// pass them. Failed writes to the dead-letter sink itself are retried
	// without end. Nil: failed batches are retried without end (the
	// stuck-shard alarms speak; see StuckAfter). The consumer closes it
	// when Run returns.
	DeadLetter sinks.Sink
	// RetryFor is how long a batch may keep failing at one sink before its
	// events go to DeadLetter (default 15 min; negative: only permanent
	// failures go there). Ignored without DeadLetter.
	RetryFor time.Duration
	// StuckAfter: a shard whose oldest unacknowledged batch a sink has kept
	// failing for this long is stuck: it counts in archiver_shards_stuck
	// and is logged at ERROR every StuckLogInterval, naming the sink, the
	// first event ID and the time left before the stream trims the record
	// (default 1 min).
	StuckAfter time.Duration
	// StuckLogInterval is the least time between two ERROR logs about one
	// stuck shard (default 1 min).
	StuckLogInterval time.Duration
	// TrimWarning: an unacknowledged record within TrimWarning of the
	// stream's trim (Options.StreamRetention after its creation; DynamoDB
	// Streams: 24 h, the default) is logged and counted in
	// archiver_records_near_trim: it is about to be lost (default 2 h).
	// The walker uses StreamRetention too: a shard missing from the
	// stream's description is taken for gone only once its records could
	// have been trimmed.
	TrimWarning time.Duration
	// TTLRefresh is how long a table's TTL attribute is cached (default
	// 5 min); an unknown attribute is looked up again after 10 s.
	TTLRefresh time.Duration
	// ExpiredWhen says which REMOVE records are expiries: ExpiredWhenService
	// (the zero value) only DynamoDB's own TTL deletes; ExpiredWhenPastTTL
	// also any other delete made after the item's TTL had passed (a
	// sweeper's; see [event.ClassifyWith]), which needs Tables for the TTL
	// attribute: a batch with a REMOVE waits (fails and is retried) until
	// DescribeTimeToLive has answered once. Either way a REMOVE's
	// event.Event.DeletedBy says whether DynamoDB's TTL made it.
	ExpiredWhen event.ExpiredWhen
	// TTLAttribute, when set, is every table's TTL attribute, and
	// DescribeTimeToLive is not called: for a table whose DynamoDB TTL is
	// off while a sweeper expires its items (sweep.Config.TTLAttribute).
	// Under ExpiredWhenPastTTL a table with TTL off and no TTLAttribute
	// has no expiries at all; the consumer warns once per table.
	TTLAttribute string
	// ShutdownTimeout bounds flushing sinks, final checkpoints and closing
	// sinks after the walker stopped (default 10 s). The walker first gives
	// each active shard up to Options.StopTimeout (default 15 s) to be acknowledged
	// and checkpointed, so a stop takes at most StopTimeout +
	// ShutdownTimeout: keep the sum inside the platform's stop timeout
	// (ECS: 30 s).
	ShutdownTimeout time.Duration

	// GlobalTables are the tables of TableNames that are global tables
	// (replicas in several Regions, see [shard.GlobalTable]): under
	// ExpiredWhenService their past-TTL plain deletes are mostly other
	// Regions' expiries replicated here, counted in
	// archiver_replicated_ttl_deletes_total and said at INFO, not warned
	// about as a sweeper's.
	GlobalTables []string

	// Now is the clock of the TTL attribute cache and of the once-a-minute
	// warning about past-TTL user deletes (default time.Now).
	Now func() time.Time
}

// route is a Route ready for use.
type route struct {
	sink  sinks.Sink
	name  string
	kinds map[event.Kind]bool
}

// Consumer reads streams and archives their events. Create it with New and
// call Run once.
type Consumer struct {
	cfg    Config
	store  checkpoint.Store
	routes []*route
	log    *zap.Logger
	m      *metrics
	ttl    *ttlCache
	walker *shard.Walker
	// pastTTL speaks about REMOVEs past-ttl would call expiries, under
	// event.ExpiredWhenService; nil under event.ExpiredWhenPastTTL.
	pastTTL *pastTTLWarner

	// dlq is the dead-letter sink as a route (its lane is the last of
	// every shard's); nil without one.
	dlq *route
	// recorders are the recording sinks among the routes' and the
	// dead-letter sink (coverage.go); none: checkpoints wait for no
	// record.
	recorders []*recorder

	base context.Context // lanes and saves: lives until Run has shut down
	// inflight is the memory budget all shards share.
	inflight *budget.Budget
	// starve rate-limits the starved flushes.
	starveMu        sync.Mutex
	lastStarveFlush time.Time
	starveFlushing  bool
	// saveSlots bounds the shards' periodic checkpoint saves in flight at
	// once (final saves at a shard's end or stop are not bounded).
	saveSlots chan struct{}

	// watched are the tables watch has set gauges for.
	tablesMu sync.Mutex
	watched  map[string]bool
	// failed is what watch keeps about shards whose readers keep failing.
	failed failedReaders

	mu     sync.Mutex
	states map[string]*shardDelivery
	known  map[string]string // stream/shard → sequence number loaded from the store
	ran    bool
}

// New checks the configuration and builds the consumer and its walker.
func New(c Config) (*Consumer, error) {
	if err := checkConfig(c); err != nil {
		return nil, err
	}
	c = withDefaults(c)
	log := c.Logger
	if log == nil {
		log = zap.NewNop()
	}
	cons := &Consumer{
		cfg:       c,
		store:     c.Store,
		log:       log.Named("consumer"),
		m:         newMetrics(c.Registerer),
		states:    map[string]*shardDelivery{},
		watched:   map[string]bool{},
		known:     map[string]string{},
		inflight:  budget.New(int64(c.MaxInFlightBytesTotal)),
		saveSlots: make(chan struct{}, 16),
	}
	routes, err := newRoutes(c.Routes)
	if err != nil {
		return nil, err
	}
	cons.routes = routes
	if c.DeadLetter != nil {
		cons.dlq = &route{sink: c.DeadLetter, name: c.DeadLetter.Name()}
	}
	cons.recorders = newRecorders(cons.routes, cons.dlq)
	var ttlAPI TTLAPI
	var tables shard.TableAPI
	if c.Tables != nil {
		ttlAPI, tables = c.Tables, c.Tables
	}
	cons.ttl = newTTLCache(ttlAPI, c.TTLRefresh, c.Now, cons.log, cons.m)
	cons.ttl.fixed = c.TTLAttribute
	cons.ttl.warnOff = c.ExpiredWhen == event.ExpiredWhenPastTTL
	if c.ExpiredWhen == event.ExpiredWhenService {
		cons.pastTTL = newPastTTLWarner(c.Now, cons.log, cons.m, c.GlobalTables)
	}
	opts := c.Options // StreamRetention defaulted above
	opts.Tables, opts.Processor, opts.Positions, opts.Logger = tables, processor{cons}, positions{cons}, log
	if len(cons.recorders) > 0 {
		opts.Processor = recording{processor{cons}}
	}
	w, err := shard.New(opts)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	cons.walker = w
	return cons, nil
}

// checkConfig checks what New's caller must set, and must leave to the
// consumer, and that no budget or duration is negative.
func checkConfig(c Config) error {
	if c.Streams == nil {
		return errors.New("consumer: Config.Streams is nil")
	}
	if c.Processor != nil || c.Positions != nil {
		return errors.New("consumer: Config.Processor and Config.Positions must be nil: the consumer is the walker's processor and its checkpoint store the positions")
	}
	if c.Options.Tables != nil {
		return errors.New("consumer: Config.Options.Tables is set: set Config.Tables, which the consumer also asks for TTL attributes")
	}
	if c.Store == nil {
		return errors.New("consumer: Config.Store is nil")
	}
	if len(c.Routes) == 0 {
		return errors.New("consumer: Config.Routes is empty: no sink to archive to")
	}
	if c.MaxInFlightBytes < 0 || c.MaxInFlightBytesTotal < 0 || c.CheckpointInterval < 0 || c.RetryMinBackoff < 0 || c.RetryMaxBackoff < 0 ||
		c.TTLRefresh < 0 || c.ShutdownTimeout < 0 || c.StuckAfter < 0 || c.StuckLogInterval < 0 || c.StreamRetention < 0 || c.TrimWarning < 0 {
		return errors.New("consumer: Config: budgets and durations must not be negative")
	}
	return checkExpiredWhen(c)
}

// withDefaults returns c with the defaults of the budgets, intervals and
// clock left zero.
func withDefaults(c Config) Config {
	c.RetryFor = defaultDuration(c.RetryFor, 15*time.Minute)
	c.StuckAfter = defaultDuration(c.StuckAfter, time.Minute)
	c.StuckLogInterval = defaultDuration(c.StuckLogInterval, time.Minute)
	c.StreamRetention = defaultDuration(c.StreamRetention, 24*time.Hour)
	c.TrimWarning = defaultDuration(c.TrimWarning, 2*time.Hour)
	if c.MaxInFlightBytes == 0 {
		c.MaxInFlightBytes = 64 << 20
	}
	if c.MaxInFlightBytesTotal == 0 {
		c.MaxInFlightBytesTotal = 128 << 20
	}
	if c.StarvedFlush == 0 {
		c.StarvedFlush = 2 * time.Second
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = time.Second
	}
	if c.RetryMinBackoff == 0 {
		c.RetryMinBackoff = 100 * time.Millisecond
	}
	if c.RetryMaxBackoff == 0 {
		c.RetryMaxBackoff = 30 * time.Second
	}
	if c.RetryMaxBackoff < c.RetryMinBackoff {
		c.RetryMaxBackoff = c.RetryMinBackoff
	}
	if c.TTLRefresh == 0 {
		c.TTLRefresh = 5 * time.Minute
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// newRoutes checks the configured routes and builds the consumer's: a
// route without kinds takes expired events only.
func newRoutes(routes []Route) ([]*route, error) {
	var out []*route
	for i, r := range routes {
		if r.Sink == nil {
			return nil, fmt.Errorf("consumer: Config.Routes[%d].Sink is nil", i)
		}
		kinds := r.Kinds
		if len(kinds) == 0 {
			kinds = []event.Kind{event.Expired}
		}
		rt := &route{sink: r.Sink, name: r.Sink.Name(), kinds: map[event.Kind]bool{}}
		for _, k := range kinds {
			if !k.Valid() {
				return nil, fmt.Errorf("consumer: Config.Routes[%d].Kinds: %q is not a kind (want expired, deleted, inserted or modified)", i, k)
			}
			rt.kinds[k] = true
		}
		out = append(out, rt)
	}
	return out, nil
}

// Run reads the streams until ctx ends. Then it stops reading, waits (up to
// Config.ShutdownTimeout) for the sinks to acknowledge what they hold,
// writes final checkpoints, closes the sinks and returns nil. It returns an
// error only when reading could not go on for another reason. Run may be
// called once.
func (c *Consumer) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran {
		c.mu.Unlock()
		return errors.New("consumer: Run called twice")
	}
	c.ran = true
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	c.base = base
	c.mu.Unlock()
	defer cancelBase()

	lagDone := make(chan struct{})
	lagCtx, stopLag := context.WithCancel(base)
	go func() {
		defer close(lagDone)
		c.reportLag(lagCtx)
	}()

	c.log.Info("consumer started", zap.Int("sinks", len(c.routes)))
	runErr := c.walker.Run(ctx)
	if runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
		runErr = nil
	}

	// The walker has stopped every reader (ShardStopped saved what was
	// acknowledged). Make the sinks durable and checkpoint the rest.
	sctx, cancel := context.WithTimeout(base, c.cfg.ShutdownTimeout)
	defer cancel()
	sinkList := c.uniqueSinks()
	var wg sync.WaitGroup
	for _, r := range sinkList {
		wg.Add(1)
		go func(r *route) {
			defer wg.Done()
			if err := r.sink.Flush(sctx); err != nil {
				c.log.Warn("sink flush at shutdown failed", zap.String("sink", r.name), zap.Error(err))
			}
		}(r)
	}
	wg.Wait()
	for _, s := range c.snapshot() {
		if err := s.drain(sctx); err != nil {
			c.log.Warn("shard not fully acknowledged at shutdown; its tail will be read again",
				zap.String("shard", s.id), zap.Error(err))
		}
		if err := s.save(sctx, false); err != nil {
			c.log.Warn("final checkpoint failed", zap.String("shard", s.id), zap.Error(err))
		}
		c.remove(s)
	}
	stopLag()
	<-lagDone
	for _, r := range sinkList {
		if err := r.sink.Close(sctx); err != nil {
			c.log.Warn("sink close failed", zap.String("sink", r.name), zap.Error(err))
		}
	}
	c.log.Info("consumer stopped")
	if runErr != nil {
		return fmt.Errorf("consumer: %w", runErr)
	}
	return nil
}

// uniqueSinks returns one route per distinct sink, the dead-letter sink
// included.
func (c *Consumer) uniqueSinks() []*route {
	var out []*route
	all := c.routes
	if c.dlq != nil {
		all = append(all[:len(all):len(all)], c.dlq)
	}
next:
	for _, r := range all {
		for _, o := range out {
			if sameSink(o.sink, r.sink) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// reportLag keeps the lag gauges current and watches for stuck shards,
// every CheckpointInterval. It saves nothing: each shard saves its own
// checkpoint (shardDelivery.runSaver).
func (c *Consumer) reportLag(ctx context.Context) {
	t := time.NewTicker(c.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		for _, s := range c.snapshot() {
			recs, age := s.lag(now)
			c.m.lagRecords.WithLabelValues(s.table, s.id).Set(float64(recs))
			c.m.lagSeconds.WithLabelValues(s.table, s.id).Set(age.Seconds())
		}
		c.watch(now)
	}
}

func stateKey(arn, id string) string { return arn + "\x00" + id }

// state returns the shard's state, creating it on first use.
func (c *Consumer) state(table, arn, id string) *shardDelivery {
	k := stateKey(arn, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.states[k]
	if s == nil {
		if table == "" {
			table = shard.TableFromStreamARN(arn)
		}
		s = newShardDelivery(c, k, table, arn, id, c.known[k])
		c.states[k] = s
	}
	return s
}

func (c *Consumer) lookup(arn, id string) *shardDelivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[stateKey(arn, id)]
}

func (c *Consumer) snapshot() []*shardDelivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*shardDelivery, 0, len(c.states))
	for _, s := range c.states {
		out = append(out, s)
	}
	return out
}

// remove tears the shard's state down. A save in flight (the shard's
// runSaver's:
// the final saves were made) is cancelled and waited for before
// Consumer.mu is taken: a save may be waiting on a sink's Record.
func (c *Consumer) remove(s *shardDelivery) {
	s.cancel()
	s.saveMu.Lock()
	s.closed = true
	saved, finished := s.saved, s.finished
	s.saveMu.Unlock()
	c.mu.Lock()
	if c.states[s.key] == s {
		delete(c.states, s.key)
		// What was saved is what a restart of the shard resumes from.
		if finished {
			delete(c.known, s.key)
		} else {
			c.known[s.key] = saved
		}
	}
	c.mu.Unlock()
	s.close()
}

// processor is the Consumer as the walker's shard.Processor (kept off the
// Consumer's own API: only the walker may call these).
type processor struct{ c *Consumer }

func (p processor) Process(ctx context.Context, b shard.Batch) error { return p.c.process(ctx, b) }
func (p processor) ShardEnded(ctx context.Context, streamARN, shardID string) error {
	return p.c.shardEnded(ctx, streamARN, shardID)
}
func (p processor) ShardStopped(ctx context.Context, streamARN, shardID string) error {
	return p.c.shardStopped(ctx, streamARN, shardID)
}

// recording is the processor of a consumer with recording sinks: also
// the walker's shard.Coverage, so that its ranges name the shard's parent
// and what was not read. (Without recording sinks the walker asks the
// stream nothing more than before.)
type recording struct{ processor }

func (p recording) ShardStarted(table, streamARN string, s shard.Shard) {
	p.c.shardStarted(table, streamARN, s)
}
func (p recording) Skipped(ctx context.Context, streamARN, shardID string, why shard.Skip) error {
	return p.c.skipped(ctx, streamARN, shardID, why)
}

// process decodes, classifies and routes one batch. It blocks while the
// shard's in-flight budget is full. A record it cannot decode goes to the
// dead-letter sink with the batch; without one, process fails (naming the
// field) and the shard is retried. It also fails once the shard's lease was
// lost.
func (c *Consumer) process(ctx context.Context, b shard.Batch) error {
	if len(b.Records) == 0 {
		return nil
	}
	s := c.state(b.Table, b.StreamARN, b.ShardID)
	ttlAttr, err := c.ttlAttribute(ctx, s.table, b.Records)
	if err != nil {
		return err
	}
	events, bad, err := c.decodeBatch(s, b, ttlAttr)
	if err != nil {
		return err
	}
	size := b.Bytes
	if size == 0 {
		for _, r := range b.Records {
			size += event.EstimateMemory(r)
		}
	}
	// The entry outlives its records (it waits, acknowledged, for the next
	// checkpoint save after the budget let them go): its sequence number
	// is a copy, as the decoder's strings point into the whole response.
	last, _ := event.LastSequence(b.Records)
	en := &entry{last: strings.Clone(last), bytes: size, records: len(b.Records),
		first: event.FirstCreation(b.Records), lastAt: lastCreation(b.Records)}
	subs, counts := c.split(events)
	for k, n := range counts {
		en.kinds[k] = int32(n)
	}
	for _, sub := range subs {
		if len(sub) > 0 {
			en.pending++
		}
		en.bytes += sinkCopies(sub)
	}
	if len(bad) > 0 {
		en.pending++
		en.bytes += sinkCopies(bad)
		en.dead[reasonIndex(event.ReasonUndecodable)] = int32(len(bad))
	}
	if s.needFirst {
		if f := event.FirstSequence(b.Records); f != "" {
			en.firstSeq, s.needFirst = strings.Clone(f), false
		}
	}
	if err := s.add(ctx, en); err != nil {
		return err
	}
	if len(bad) > 0 {
		n := float64(len(bad))
		s.lanes[len(c.routes)].enqueue(&item{batch: sinks.Batch{StreamARN: b.StreamARN, ShardID: b.ShardID, Events: bad}, e: en,
			onDurable: func() {
				c.m.deadLettered.WithLabelValues(s.table, "decode", event.ReasonUndecodable).Add(n)
				s.entryDone(en)
			}})
	}
	// Metrics before the events are handed on (after that, only sinks read
	// the shared slice).
	c.observe(s.table, ttlAttr, b.Records, events, counts)
	for j, sub := range subs {
		if len(sub) > 0 {
			s.lanes[j].enqueue(&item{batch: sinks.Batch{StreamARN: b.StreamARN, ShardID: b.ShardID, Events: sub}, e: en})
		}
	}
	return nil
}

// split gives each route the events of the kinds it wants, by route (nil
// for a route that wants none), and counts the events of each kind (in
// kindOrder). A route that wants every event of the batch gets the decoded
// slice itself (the consumer does not touch it again); the others get
// filtered copies.
func (c *Consumer) split(events []event.Event) (subs [][]event.Event, counts [4]int) {
	for i := range events {
		counts[kindIndex(events[i].Kind)]++
	}
	subs = make([][]event.Event, len(c.routes))
	shared := false
	for j, r := range c.routes {
		wanted := 0
		for k, n := range counts {
			if r.kinds[kindOrder[k]] {
				wanted += n
			}
		}
		switch {
		case wanted == 0:
		case wanted == len(events) && !shared:
			subs[j], shared = events, true
		default:
			sub := make([]event.Event, 0, wanted)
			for i := range events {
				if r.kinds[events[i].Kind] {
					sub = append(sub, events[i])
				}
			}
			subs[j] = sub
		}
	}
	return subs, counts
}

// observe books a batch's events in the metrics: the count of each kind,
// the TTL lag of the expired ones, and (pastTTL) user deletes of items
// already past their TTL.
func (c *Consumer) observe(table, ttlAttr string, recs []types.Record, events []event.Event, counts [4]int) {
	for k, n := range counts {
		if n > 0 {
			c.m.events.WithLabelValues(table, string(kindOrder[k])).Add(float64(n))
		}
	}
	if c.pastTTL != nil && counts[kindIndex(event.Deleted)] > 0 {
		c.pastTTL.note(table, ttlAttr, recs)
	}
	if counts[kindIndex(event.Expired)] > 0 {
		lag := c.m.ttlLag.WithLabelValues(table)
		for i := range events {
			if e := &events[i]; e.Kind == event.Expired && !e.TTLTime.IsZero() && !e.ApproximateCreationTime.IsZero() {
				lag.Observe(e.TTLLag.Seconds())
			}
		}
	}
}

// sinkCopies estimates the memory a sink holds for evs until it
// acknowledges them: each event rendered once (an archive line, a NATS
// message with its headers), about its SizeBytes plus 1 KiB of metadata
// and 24 bytes of JSON per top-level attribute. The budgets count it with
// the records, so that they bound what the process holds for its
// in-flight records, not the decoded records alone.
func sinkCopies(evs []event.Event) int {
	n := 0
	for i := range evs {
		n += int(evs[i].SizeBytes) + 1024 + 24*len(evs[i].Image())
	}
	return n
}

// starved asks every sink to Flush, at most once per StarvedFlush and never
// twice at once: a shard has waited that long for budget, and a sink may be
// holding its events back for a size threshold that the budget keeps them
// from reaching.
func (c *Consumer) starved() {
	if c.cfg.StarvedFlush < 0 {
		return
	}
	c.starveMu.Lock()
	if c.starveFlushing || time.Since(c.lastStarveFlush) < c.cfg.StarvedFlush {
		c.starveMu.Unlock()
		return
	}
	c.starveFlushing = true
	c.lastStarveFlush = time.Now()
	c.starveMu.Unlock()
	c.m.starvedFlushes.Inc()
	c.log.Info("in-flight budget full: flushing sinks so they acknowledge what they hold",
		zap.Int("total_budget_bytes", c.cfg.MaxInFlightBytesTotal), zap.Int("shard_budget_bytes", c.cfg.MaxInFlightBytes))
	go func() {
		defer func() {
			c.starveMu.Lock()
			c.starveFlushing = false
			c.starveMu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(c.base, time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for _, r := range c.uniqueSinks() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.sink.Flush(ctx); err != nil && ctx.Err() == nil {
					c.log.Warn("flush after a full in-flight budget failed", zap.String("sink", r.name), zap.Error(err))
				}
			}()
		}
		wg.Wait()
	}()
}

// kindOrder lists the kinds by kindIndex.
var kindOrder = [4]event.Kind{event.Expired, event.Deleted, event.Inserted, event.Modified}

// kindIndex is k's index in kindOrder.
func kindIndex(k event.Kind) int {
	switch k {
	case event.Expired:
		return 0
	case event.Deleted:
		return 1
	case event.Inserted:
		return 2
	}
	return 3
}

// shardEnded waits until every record of the closed shard was acknowledged
// by every sink, then records the shard Finished.
func (c *Consumer) shardEnded(ctx context.Context, streamARN, shardID string) error {
	s := c.state("", streamARN, shardID)
	if err := s.drain(ctx); err != nil {
		return fmt.Errorf("consumer: shard %s ended: %w", shardID, err)
	}
	if err := s.save(ctx, true); err != nil {
		return err
	}
	c.log.Debug("shard finished", zap.String("stream", streamARN), zap.String("shard", shardID))
	c.remove(s)
	return nil
}

// shardStopped waits (until ctx ends) for the shard's in-flight records to
// be acknowledged, saves the checkpoint as far as they were, and forgets
// the shard.
func (c *Consumer) shardStopped(ctx context.Context, streamARN, shardID string) error {
	s := c.lookup(streamARN, shardID)
	if s == nil {
		return nil
	}
	derr := s.drain(ctx)
	if derr != nil && !errors.Is(derr, checkpoint.ErrLeaseLost) {
		c.log.Warn("shard stopped before all its records were acknowledged; the tail will be read again",
			zap.String("stream", streamARN), zap.String("shard", shardID), zap.Error(derr))
	}
	sctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	serr := s.save(sctx, false)
	c.remove(s)
	if serr != nil {
		return serr
	}
	if derr != nil {
		return fmt.Errorf("consumer: shard %s stopped: %w", shardID, derr)
	}
	return nil
}

// positions adapts the checkpoint store to shard.Positions.
type positions struct{ c *Consumer }

func (p positions) Positions(ctx context.Context, streamARN string) (map[string]shard.Position, error) {
	cps, err := p.c.store.Load(ctx, streamARN)
	if err != nil {
		return nil, fmt.Errorf("consumer: load checkpoints of %s: %w", streamARN, err)
	}
	p.c.mu.Lock()
	for id, cp := range cps {
		if !cp.Finished {
			k := stateKey(streamARN, id)
			if _, active := p.c.states[k]; !active {
				p.c.known[k] = cp.SequenceNumber
			}
		}
	}
	p.c.mu.Unlock()
	return cps, nil // a checkpoint is a shard.Position
}

// checkExpiredWhen checks Config.ExpiredWhen.
func checkExpiredWhen(c Config) error {
	switch c.ExpiredWhen {
	case event.ExpiredWhenService:
	case event.ExpiredWhenPastTTL:
		if c.Tables == nil && c.TTLAttribute == "" {
			return errors.New("consumer: Config.ExpiredWhen: past-ttl needs Config.TTLAttribute or Config.Tables (the TTL attribute comes from DescribeTimeToLive)")
		}
	default:
		return fmt.Errorf("consumer: Config.ExpiredWhen: %v is not ExpiredWhenService or ExpiredWhenPastTTL", c.ExpiredWhen)
	}
	return nil
}

// defaultDuration is d, or def when d is zero.
func defaultDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
