// Package shard walks DynamoDB Streams: it finds each table's stream, keeps
// the stream's shard lineage graph, and reads every shard in lineage order
// (a child only after all of its parents were read to their end), handing
// the records to a [Processor] in per-shard order.
//
// A [Walker] is the whole machine. It discovers streams (from a table's
// LatestStreamArn, older streams of the table listed by ListStreams, or
// explicit stream ARNs), pages DescribeStream to its end, starts each shard
// from its stored [Position] (AFTER_SEQUENCE_NUMBER) or from TRIM_HORIZON
// (or LATEST on a fresh start, when asked), polls GetRecords adaptively, and
// survives the stream's faults: expired iterators, trimmed data, throttling
// and a stream that goes away. With a [TableSource] (e.g. [TaggedTables])
// the tables it reads change while it runs: a table listed later is read
// from its stream's start, one no longer listed is let go (a deleted one
// once its stream is read to the end).
//
// # Lineage
//
// A shard is ready when it is not finished and every parent is finished or
// gone from the stream (trimmed away). A shard is finished when its reader
// reached the end of the closed shard and [Processor.ShardEnded] returned
// nil, when its stored Position says Finished, or (after a restart) when
// any of its descendants has a stored Position: a child is only ever started
// after its parents were finished, so a child's checkpoint proves it even if
// the parent's own Finished mark was never written.
//
// DescribeStream may leave a live shard out now and then. A shard the walker
// knows (open or closed) is therefore taken for gone only when it is not
// being read, several descriptions in a row left it out, and its records
// could have aged out of the stream (Options.StreamRetention after the walker
// first saw it closed, or last saw it open). Until then it stays unfinished
// and its children wait. A parent the walker never saw listed (trimmed
// before it first looked) holds its children back only when its stored
// Position says unfinished, and then only for a few descriptions (the first
// description after a restart may have left it out).
//
// # Ownership
//
// One Walker never runs two readers on one shard. With an [Assigner] (a
// lease store), several walkers in several processes split a stream's
// shards; each reader stops as soon as its [Assignment]'s context ends.
//
// # Retries and the SDK's retryer
//
// The AWS SDK's standard retryer retries throttling (LimitExceededException,
// ThrottlingException, ...), 5xx and network errors a bounded number of
// times (3 attempts by default) and then returns the last error wrapped in
// *retry.MaxAttemptsError, or joined with a retry-quota error; both unwrap,
// so errors.As still finds the service's exception. The walker relies on
// exactly that: it never sees an unbounded SDK retry loop, and it adds its
// own bounded, jittered, context-aware exponential backoff on top. Expired
// iterators, trimmed data and missing resources are not retried by the SDK
// and reach the walker at once. The walker reacts to each:
//
//   - ExpiredIteratorException: a new iterator AFTER the last record
//     queued for Process (or at the reader's original start).
//   - TrimmedDataAccessException: the gap is logged and counted
//     (archiver_shard_trimmed_gaps_total), reading goes on from
//     TRIM_HORIZON; records at or before the last one read are dropped. A
//     [Coverage] processor is told (Skipped) before the next batch.
//   - LimitExceededException, throttling codes, HTTP 429: backoff, same
//     iterator, for as long as it takes.
//   - 5xx, network and unknown errors: backoff and a fresh iterator; after
//     8 in a row the reader gives the shard back (ShardStopped) and the
//     walker restarts it later from its stored Position.
//   - ResourceNotFoundException: the stream is described again; a stream
//     that is gone has its readers stopped and is dropped; a shard that
//     descriptions leave out counts as trimmed away (its children may
//     start) under the rule of Lineage above, and until then is retried.
//
// # Concurrency and memory
//
// At most MaxConcurrentShards readers run at once. While ready shards wait
// for a slot, a reader that has been caught up for IdleYield gives its slot
// up, so more open shards than slots are all read in turn. Each reader
// holds at most ShardBufferBytes of batches Process has not finished with,
// plus one GetRecords response: by default one batch at a time.
//
// # Coverage
//
// A Processor that also implements [Coverage] is told, in order with its
// batches, where each reader starts (ShardStarted: the shard's parents and
// sequence number range) and what it did not read (Skipped): what a LATEST
// start passed over, records trimmed before a reader reached them, and,
// for a shard first read from TRIM_HORIZON, whether its first records had
// been trimmed, which the reader asks DynamoDB Streams once (an iterator
// AT the shard's StartingSequenceNumber) after its first records. So the
// consumer can record which records of each shard were read.
//
// # Metrics
//
// Registered with Options.Registerer, labelled by table (never by shard):
// archiver_shard_records_read_total, archiver_shard_bytes_read_total,
// archiver_shard_getrecords_calls_total,
// archiver_shard_api_errors_total{table,op,kind},
// archiver_shard_throttles_total, archiver_shard_trimmed_gaps_total,
// archiver_shard_iterator_age_seconds (gauge: the largest age over the
// table's active shards), archiver_shards_active (gauge),
// archiver_shards_ended_total, archiver_shard_discoveries_total and
// archiver_shard_trim_probes_total{table,result} (the question above:
// trimmed, whole, or failed and taken for whole).
package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/backoff"
)

// StreamsAPI is the part of the DynamoDB Streams API the walker calls.
// *dynamodbstreams.Client satisfies it.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
	ListStreams(ctx context.Context, in *dynamodbstreams.ListStreamsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.ListStreamsOutput, error)
}

// TableAPI is the part of the DynamoDB API the walker calls to find a
// table's stream. *dynamodb.Client satisfies it.
type TableAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Region is one AWS Region a walker reads, with clients signed for it
// (the Region is part of every request's signature, also against one
// endpoint that serves several Regions).
type Region struct {
	// Name is the Region's name, e.g. eu-west-1: the Region part of its
	// tables' and streams' ARNs.
	Name    string
	Streams StreamsAPI
	Tables  TableAPI
	// TableNames, when not nil, are the tables of Options.TableNames read
	// in this Region (a table without a replica here is left out); nil:
	// all of them.
	TableNames []string
}

// Shard is one shard as DescribeStream describes it.
type Shard struct {
	// ID is the shard ID.
	ID string
	// Parents holds the parent shard IDs (zero or one in DynamoDB Streams;
	// a slice so that merges would fit).
	Parents []string
	// StartingSequence and EndingSequence are the shard's sequence number
	// range. EndingSequence is set once the shard is closed.
	StartingSequence, EndingSequence string
}

// Closed reports whether the shard is closed (no new records will enter it).
func (s Shard) Closed() bool { return s.EndingSequence != "" }

// Position is where a shard stands in the checkpoint store.
type Position struct {
	// SequenceNumber is the last record of the shard that was fully
	// processed; the shard resumes AFTER it. Empty: none yet.
	SequenceNumber string
	// Finished is set once the shard was read to its end and every record
	// processed; a finished shard is never read again.
	Finished bool
}

// Batch is a non-empty run of records of one shard, in stream order.
type Batch struct {
	Table, StreamARN, ShardID string
	Records                   []types.Record
	// Bytes is the batch's estimated size in memory (the sum of
	// [event.EstimateMemory] of its records, and the raw bytes of the
	// undecodable ones), which memory budgets count.
	Bytes int
	// Undecodable lists the records of the batch that neither decoder
	// could read, by ascending index; Records holds placeholders in their
	// places. A batch holds at most one, its first record: the reader
	// starts a new batch at each, so that what precedes it can be
	// processed (and checkpointed) whatever becomes of it.
	Undecodable []Undecodable

	// skip, on a batch without records the reader queues between two
	// others, is a notice for Coverage.Skipped instead.
	skip Skip
}

// Processor receives the records. Process for one shard is never called
// concurrently with itself; different shards run in parallel.
type Processor interface {
	// Process handles one batch; it may block (backpressure). An error
	// stops that shard's reader (ShardStopped is then called); the walker
	// restarts the shard later from its stored Position (at-least-once).
	Process(ctx context.Context, b Batch) error
	// ShardEnded is called once a closed shard was read to its end (all its
	// batches passed to Process and returned). It returns after every
	// record of the shard is acknowledged and the shard is recorded
	// Finished; only then are the shard's children started. An error makes
	// the walker treat the shard as stopped and restart it later.
	ShardEnded(ctx context.Context, streamARN, shardID string) error
	// ShardStopped is called when a shard's reader stops before the shard's
	// end: its assignment was withdrawn (lease lost or handed off), the
	// walker is shutting down, the reader gave its slot to a waiting shard
	// (IdleYield), Process, ShardEnded or the Streams API failed, or the
	// shard went away. Batches queued but not yet passed to Process are
	// dropped; the shard later resumes from its stored Position. It returns after the shard's in-flight records are
	// acknowledged and checkpointed (or ctx ends). ctx is a fresh context
	// bounded by Options.StopTimeout.
	ShardStopped(ctx context.Context, streamARN, shardID string) error
}

// Skip is why a reader did not read some records of its shard.
type Skip int

// The reasons of a Skip.
const (
	// SkipTrimmed: the records were trimmed from the stream before the
	// reader reached them (DynamoDB Streams keeps a record 24 h).
	SkipTrimmed Skip = iota + 1
	// SkipLatest: the reader started at LATEST (Options.Start Latest, a
	// shard without a stored position): what the shard held before its
	// first record read was skipped on purpose.
	SkipLatest
)

func (s Skip) String() string {
	switch s {
	case SkipTrimmed:
		return "trimmed"
	case SkipLatest:
		return "latest"
	}
	return fmt.Sprintf("Skip(%d)", int(s))
}

// Coverage is an optional interface of a [Processor]: one that implements
// it is told what each reader of a shard covers, so that it can record
// which records of the shard were read (the consumer's coverage
// manifests). Its calls are made on the reader's goroutine, in order with
// Process, ShardEnded and ShardStopped.
type Coverage interface {
	// ShardStarted is called when a reader of the shard starts, before
	// anything else of it: s is the shard as the walker knows it (its
	// parents; its sequence number range, EndingSequence set when it was
	// closed then). It must not block.
	ShardStarted(table, streamARN string, s Shard)
	// Skipped says that records of the shard after the last one handed to
	// Process by this reader (or, before its first batch, after its start:
	// its stored Position, or the shard's start) and before the next batch
	// (or the shard's end) were not read, and why. A reader that starts at
	// TRIM_HORIZON with no stored Position asks, before its first batch
	// (or its end), for an iterator at the shard's StartingSequenceNumber:
	// a TrimmedDataAccessException gets Skipped(SkipTrimmed); any other
	// answer nothing. Skipped may block; an error stops the reader as a
	// failed Process does.
	Skipped(ctx context.Context, streamARN, shardID string, why Skip) error
}

// Positions loads stored positions (the consumer adapts a checkpoint store
// to it). It is called at every discovery of a stream and again right
// before readers start, so a shard resumes after its latest checkpoint
// (also one another worker just wrote).
type Positions interface {
	Positions(ctx context.Context, streamARN string) (map[string]Position, error)
}

// Assigner decides which ready shards this walker reads (nil: all of them).
// Ready shards are those not finished whose parents are all finished (or
// gone from the stream).
type Assigner interface {
	// Assign is called every discovery round and at every shard end, per
	// stream, with the stream's ready shards, in lineage order (the shards
	// this walker is already reading included). It returns the ones this
	// walker may read now, each with a context that is cancelled the moment
	// this walker must stop reading it. Assignments for shards the walker
	// already reads are ignored (their first Ctx stays in force). The
	// walker starts at most MaxConcurrentShards readers; assignments beyond
	// that are handed back at once with Release(finished=false).
	Assign(ctx context.Context, streamARN string, ready []Shard) ([]Assignment, error)
	// Release is called after the shard's reader stopped and
	// Processor.ShardStopped or ShardEnded returned, so the lease can be
	// let go (finished=false) or marked finished (finished=true).
	Release(ctx context.Context, streamARN, shardID string, finished bool) error
}

// Assignment is one shard an Assigner lets this walker read, for as long as
// Ctx is not done.
type Assignment struct {
	ShardID string
	Ctx     context.Context
}

// StartPosition says where a shard with no stored Position starts.
type StartPosition string

// The start positions. The zero value means TrimHorizon.
const (
	// TrimHorizon reads every record still in the stream.
	TrimHorizon StartPosition = "trim-horizon"
	// Latest skips what is already in the stream when the walker first
	// sees a stream with no stored positions at all: closed shards are
	// skipped and open shards start at LATEST. Every shard found later
	// (children, a new stream after re-enabling) starts at TRIM_HORIZON,
	// and a stream with stored positions always resumes from them. (A
	// LATEST shard whose iterator expires before its first record is read
	// again from LATEST; one restarted before its first checkpoint is read
	// from TRIM_HORIZON, which may re-deliver, never lose.)
	Latest StartPosition = "latest"
)

// ParseStartPosition parses "trim-horizon" (or "trim_horizon") and
// "latest", case-insensitively; "" means TrimHorizon.
func ParseStartPosition(s string) (StartPosition, error) {
	switch strings.ToLower(strings.ReplaceAll(s, "_", "-")) {
	case "", "trim-horizon":
		return TrimHorizon, nil
	case "latest":
		return Latest, nil
	}
	return "", fmt.Errorf("start position %q: want trim-horizon or latest", s)
}

// Options configure a Walker. Streams, Processor and at least one of
// TableNames or StreamARNs are required; TableNames also need Tables.
type Options struct {
	// Streams is the DynamoDB Streams client.
	Streams StreamsAPI
	// Tables is the DynamoDB client used to find tables' streams.
	Tables TableAPI
	// TableNames are tables whose streams are read: the table's latest
	// stream, and older streams of the table still listed by ListStreams,
	// oldest first (a newer stream of a table is read only after the older
	// ones were read to their end).
	TableNames []string
	// StreamARNs are streams read as given, each independently.
	StreamARNs []string
	// TableSource, when set, names more tables to read while the walker
	// runs (e.g. every table carrying a tag), asked at start and every
	// TableRefresh. Its tables are read as TableNames are (Tables is
	// required), except: a table first listed after the start is read
	// from TRIM_HORIZON whatever Start says; a table it stops listing is
	// let go, once its readers stopped and, when the table was deleted,
	// its streams were read to their end (a table that still exists, e.g.
	// untagged, has its readers stopped; its checkpoints stay). Not with
	// Regions. With a source, TableNames and StreamARNs may both be empty:
	// the walker then waits for the source's first table.
	TableSource TableSource
	// TableRefresh is how often TableSource is asked (default 30 s).
	TableRefresh time.Duration
	// Regions, when set, are the Regions whose replicas of TableNames are
	// read, each through its own clients: a global table has one replica
	// (same name, its own stream) per Region, and each Region's stream
	// marks as DynamoDB's TTL deletes only the expiries that Region's TTL
	// performed. Every table of TableNames is read in every Region listed;
	// a stream of StreamARNs is read through the clients of the Region its
	// ARN names, or through Streams when none is listed. Empty: Streams
	// and Tables alone (one Region).
	Regions []Region
	// Start is where a shard with no stored Position starts (default
	// TrimHorizon).
	Start StartPosition

	// Processor receives the records. Required.
	Processor Processor
	// Positions loads stored positions; nil: none are stored.
	Positions Positions
	// Assigner decides which shards this walker reads; nil: all.
	Assigner Assigner

	// MaxConcurrentShards bounds the shards read at once (default 256).
	MaxConcurrentShards int
	// ShardBufferBytes is each reader's read-ahead budget: a reader issues
	// no GetRecords while the batches Process has not finished with add up
	// to this much ([event.EstimateMemory]), so it holds at most that plus one
	// GetRecords response. The default, 1, is no read-ahead: a reader
	// holds one batch at a time, so a reader whose Process waits (a full
	// in-flight budget downstream) holds one response, however many
	// shards wait. Reading ahead showed no gain in the consumer bench,
	// where Process is quick.
	ShardBufferBytes int
	// GetRecordsLimit is GetRecords' Limit (default 1000, the maximum).
	GetRecordsLimit int32
	// SDKDecoding makes readers decode GetRecords responses with the
	// SDK's general decoder instead of [FastGetRecords] (which gives the
	// same result for about a third of the CPU, and hands anything it does
	// not recognise to the SDK anyway). An escape hatch.
	SDKDecoding bool
	// DiscoveryInterval is the period of re-discovery (default 10 s);
	// shards are also re-discovered at every shard end.
	DiscoveryInterval time.Duration
	// AssignInterval is how often the Assigner is asked again between
	// discoveries, from the shards already known (no DescribeStream), so
	// that a lease another worker released is picked up within about this
	// long (default 1 s; ignored without an Assigner).
	AssignInterval time.Duration
	// IdleBackoff is the longest wait between GetRecords calls on a shard
	// that returned nothing (default 250 ms); a call that returned records
	// is followed at once.
	IdleBackoff time.Duration
	// MinBackoff and MaxBackoff bound the exponential backoff (with full
	// jitter) after throttling and transient errors (defaults 50 ms, 5 s).
	MinBackoff, MaxBackoff time.Duration
	// IdleYield: while ready shards wait for a reader slot (more ready
	// shards than MaxConcurrentShards), a reader that has been caught up
	// (GetRecords returning nothing) for this long gives its slot up; the
	// shard goes to the back of the queue and is read again later
	// (default 5 s; negative: never).
	IdleYield time.Duration
	// StopTimeout bounds ShardStopped and Release calls after a reader
	// stops (default 15 s).
	StopTimeout time.Duration
	// StreamRetention is how long the stream keeps a record (default 24 h,
	// DynamoDB Streams' retention). A known shard that descriptions leave
	// out is taken for trimmed away only once its records could have aged
	// out: StreamRetention after the walker first saw it closed (or last
	// saw it open), and after several descriptions in a row left it out.
	// Until then its children wait. Set it to the stream's retention; a
	// value above it only delays the children of a parent trimmed before
	// it was read to its end.
	StreamRetention time.Duration

	// Logger receives the walker's logs (named "shard"); nil: none.
	Logger *zap.Logger
	// Registerer receives the walker's metrics; nil: not registered.
	// Collectors already registered by another walker are shared.
	Registerer prometheus.Registerer
	// Now is the clock for iterator ages and StreamRetention (default
	// time.Now).
	Now func() time.Time
}

// retry is the backoff between retries of a failed Streams call.
func (o *Options) retry() backoff.Policy {
	return backoff.Policy{Min: o.MinBackoff, Max: o.MaxBackoff}
}

// defaults checks the options and fills in the defaults of those left zero.
func (o *Options) defaults() error {
	if err := o.validate(); err != nil {
		return err
	}
	o.fillDefaults()
	return nil
}

// validate checks what a caller must set and what it may not set out of
// range; it defaults Start, whose zero value is valid.
func (o *Options) validate() error {
	if o.Streams == nil {
		return errors.New("shard: Options.Streams is nil")
	}
	if o.Processor == nil {
		return errors.New("shard: Options.Processor is nil")
	}
	if len(o.TableNames) == 0 && len(o.StreamARNs) == 0 && o.TableSource == nil {
		return errors.New("shard: Options.TableNames, StreamARNs and TableSource are all empty: nothing to read")
	}
	if (len(o.TableNames) > 0 || o.TableSource != nil) && o.Tables == nil {
		return errors.New("shard: Options.Tables is nil but Options.TableNames or TableSource is set")
	}
	if o.TableSource != nil && len(o.Regions) > 0 {
		return errors.New("shard: Options.TableSource and Options.Regions: tables from a source are read in one Region")
	}
	for i, n := range o.TableNames {
		if n == "" {
			return fmt.Errorf("shard: Options.TableNames[%d] is empty", i)
		}
	}
	for i, a := range o.StreamARNs {
		if !strings.HasPrefix(a, "arn:") || !strings.Contains(a, "/stream/") {
			return fmt.Errorf("shard: Options.StreamARNs[%d] %q is not a stream ARN (arn:...:table/NAME/stream/LABEL)", i, a)
		}
	}
	if err := validateRegions(o.Regions); err != nil {
		return err
	}
	switch o.Start {
	case "":
		o.Start = TrimHorizon
	case TrimHorizon, Latest:
	default:
		return fmt.Errorf("shard: Options.Start %q: want %q or %q", o.Start, TrimHorizon, Latest)
	}
	if o.MaxConcurrentShards < 0 || o.ShardBufferBytes < 0 || o.GetRecordsLimit < 0 || o.DiscoveryInterval < 0 || o.AssignInterval < 0 || o.TableRefresh < 0 ||
		o.IdleBackoff < 0 || o.MinBackoff < 0 || o.MaxBackoff < 0 || o.StopTimeout < 0 || o.StreamRetention < 0 {
		return errors.New("shard: Options: limits and durations must not be negative")
	}
	if o.GetRecordsLimit > 1000 {
		return fmt.Errorf("shard: Options.GetRecordsLimit %d: at most 1000", o.GetRecordsLimit)
	}
	return nil
}

// fillDefaults sets the limits, intervals and hooks left zero.
func (o *Options) fillDefaults() {
	if o.MaxConcurrentShards == 0 {
		o.MaxConcurrentShards = 256
	}
	if o.ShardBufferBytes == 0 {
		o.ShardBufferBytes = 1
	}
	if o.GetRecordsLimit == 0 {
		o.GetRecordsLimit = 1000
	}
	if o.DiscoveryInterval == 0 {
		o.DiscoveryInterval = 10 * time.Second
	}
	if o.AssignInterval == 0 {
		o.AssignInterval = time.Second
	}
	if o.TableRefresh == 0 {
		o.TableRefresh = 30 * time.Second
	}
	if o.IdleBackoff == 0 {
		o.IdleBackoff = 250 * time.Millisecond
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.IdleYield == 0 {
		o.IdleYield = 5 * time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 15 * time.Second
	}
	if o.StreamRetention == 0 {
		o.StreamRetention = 24 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// streamsFor returns the Streams client of the Region a stream ARN names:
// that of Regions, or Streams when the Region is not listed.
func (o *Options) streamsFor(arn string) StreamsAPI {
	if len(o.Regions) > 0 {
		name := event.RegionOf(arn)
		for _, r := range o.Regions {
			if r.Name == name {
				return r.Streams
			}
		}
	}
	return o.Streams
}

// tableStates lists the tables to read: every name of TableNames, in every
// Region of Regions (name by name), or with Tables and Streams alone.
func tableStates(o *Options) []*tableState {
	var out []*tableState
	for _, name := range o.TableNames {
		if len(o.Regions) == 0 {
			out = append(out, &tableState{name: name, tables: o.Tables, client: o.Streams})
			continue
		}
		for _, r := range o.Regions {
			if r.TableNames == nil || slices.Contains(r.TableNames, name) {
				out = append(out, &tableState{name: name, region: r.Name, tables: r.Tables, client: r.Streams})
			}
		}
	}
	return out
}

// validateRegions checks Options.Regions: named, distinct, with clients.
func validateRegions(rs []Region) error {
	seen := map[string]bool{}
	for i, r := range rs {
		switch {
		case r.Name == "":
			return fmt.Errorf("shard: Options.Regions[%d]: Name is empty", i)
		case seen[r.Name]:
			return fmt.Errorf("shard: Options.Regions[%d]: %s is listed twice", i, r.Name)
		case r.Streams == nil || r.Tables == nil:
			return fmt.Errorf("shard: Options.Regions[%d] (%s): Streams and Tables are required", i, r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}

// TableFromStreamARN returns the table name in a stream ARN
// (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL), or "" when the
// ARN has no such part.
func TableFromStreamARN(arn string) string {
	i := strings.Index(arn, ":table/")
	if i < 0 {
		return ""
	}
	rest := arn[i+len(":table/"):]
	j := strings.Index(rest, "/stream/")
	if j <= 0 {
		return ""
	}
	return rest[:j]
}
