// Package s3sink is the S3 sink ([Sink]): events buffered per shard,
// uploaded as compressed objects of newline-delimited archive lines (or
// Parquet files, format=parquet) with
// conditional writes, key conflicts resolved by what the object holds,
// and coverage manifests recorded beside the data. Its URL and client
// are package objstore's, which the archive reader shares; package sinks
// opens it by URL, and its contract is package sinkapi's.
package s3sink

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/budget"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/parquetline"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/internal/sinkmetrics"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// API is the part of *s3.Client the S3 sink uses. HeadBucket and
// DeleteObject serve only [Sink.Preflight].
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadBucket(ctx context.Context, in *s3.HeadBucketInput, optFns ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Sink archives events as newline-delimited archive lines (see
// [event.AppendLine]) in S3 objects, compressed with gzip (default), zstd or
// not at all, under Hive-style keys that Athena and Glue discover:
//
//	PREFIX/table=T/kind=K/dt=YYYY-MM-DD/hr=HH/REGION.SHARD-FIRSTSEQ-LASTSEQ.jsonl.gz
//
// (.jsonl.zst for zstd, .jsonl without compression; .parquet with
// format=parquet, where each object is one Parquet file of the same
// events, package parquetline, compressed inside with zstd and uploaded
// without Content-Encoding). dt and hr are the
// events' creation hour (UTC); REGION is the Region of the stream they
// were read from ([event.Event.Region]; an event without one has the name
// without "REGION.", as every key had before Regions were named), and
// FIRSTSEQ and LASTSEQ are the sequence numbers of the object's first and
// last record. The Region keeps apart the objects of a global table's
// replicas, whose streams can have equal shard IDs and sequence numbers,
// when archivers of several Regions (or one reading them all) share a
// bucket and prefix.
//
// Events are buffered per table, kind, Region, shard and hour, and a buffer becomes
// one object when it reaches FlushBytes (uncompressed), when its oldest
// event has waited FlushInterval, on Flush and on Close. Every object holds
// records of one shard only, in stream order. That is what makes names
// deterministic: a stream position range names exactly one set of records,
// so an upload retried (by the sink, or by the consumer after a crash
// re-delivers from its checkpoint and the buffer is cut at the same record)
// produces the same key and the same bytes. A re-delivery cut at a
// different record (an interval flush fired at another moment) yields a
// second, overlapping object: at-least-once, and readers de-duplicate by
// Metadata.eventID.
//
// Objects are written with If-None-Match: *, so a write never overwrites.
// A 412 answer (the key is taken) is resolved, never retried as such:
//   - When the object there holds the same events as the upload, the
//     upload counts as written, even if the bytes differ (another version
//     rendered the lines differently). A line's identity is its
//     Metadata.eventID and, for a dead letter, the failing sink's name
//     (DeadLetter.sink), so dead letters of one event from two sinks are
//     never merged. The object's stored SHA-256 answers when it is the
//     same; otherwise the object is read back line by line, decompressed
//     by its Content-Encoding or key extension, one line in memory at a
//     time.
//   - Otherwise the upload is written under a distinct key that is still
//     deterministic: the same name with the first 12 hex digits of the
//     object's SHA-256 before the extension,
//     REGION.SHARD-FIRSTSEQ-LASTSEQ.0123456789ab.jsonl.gz, also with
//     If-None-Match: * and resolved the same way if that key is taken
//     too. Only when that object too holds other events do the batches
//     fail, with a permanent error.
//
// Each resolution counts in archiver_sink_conflicts_total{sink,outcome}:
// same_content, same_events, distinct_key or unresolved.
//
// Uploads carry Content-Type application/x-ndjson (Parquet:
// application/vnd.apache.parquet), Content-Encoding gzip or zstd (none for
// Parquet and compression=none), an x-amz-checksum-sha256, the configured server-side encryption and
// storage class, and metadata (records, first-sequence, last-sequence).
// Failed uploads are retried with exponential backoff and jitter on 5xx,
// throttling, expired credentials and network errors, up to MaxAttempts;
// then the batches in the object are acknowledged with the error, and the
// consumer retries them. Other answers (3xx and 4xx: NoSuchBucket,
// AccessDenied, InvalidBucketName, a KMS key that is missing, disabled or
// not usable by the role, any other bad request) are not retried: the
// batches are acknowledged at once with an error marked [sinkapi.ErrPermanent]. No
// answer makes the sink send one request more than MaxAttempts times. An
// event whose table name cannot be part of a key is rejected alone (a
// [*sinkapi.RejectedError]). A batch is acknowledged only after S3 confirmed every
// object holding its events.
//
// The sink records coverage manifests ([Sink.Record], package manifest)
// under PREFIX/_manifests/: per shard, it tracks every object it made
// durable since the shard's last manifest (key without the prefix, size
// and SHA-256 as stored, the shard's first and last sequence numbers in
// it), and a manifest of a range lists those with events in it. With
// manifests=false it tracks nothing, and package sinks' Open returns it
// without Record and RecordDue.
type Sink struct {
	c         objstore.S3Config
	api       API
	name      string
	log       *zap.Logger
	m         sinkmetrics.Sink
	conflicts conflictCounter
	budget    *budget.Budget
	sem       chan struct{}
	zenc      *zstd.Encoder
	pq        *parquetline.Encoder // format=parquet's (nil otherwise)
	ext       string
	// rec tracks the objects of each shard since its last manifest and
	// records manifests (nil with manifests=false).
	rec *recorder.Recorder

	// mu guards closed, shards and inflight; it is held only briefly.
	// Buffers live in per-shard states with locks of their own, so writers
	// of different shards copy lines in parallel. Lock order: a shard's mu,
	// then s.mu.
	mu       sync.Mutex
	closed   bool
	writers  sync.WaitGroup // Write calls in progress
	shards   map[string]*s3Shard
	inflight map[*s3Upload]struct{}
	// pending is the bytes of buffers cut and not yet uploaded (or given
	// up); starved counts writers waiting for budget that chose to let
	// those uploads free it rather than cut the open buffers. When pending
	// drops to zero with writers still starved, the open buffers are cut.
	pending int64
	starved int

	stop   chan struct{}
	ticker chan struct{}
	now    func() time.Time

	// uploads logs each object uploaded, or a summary a minute when
	// there are many.
	uploads *uploadLog

	// Buffers are reused through free lists that, unlike sync.Pool, survive
	// garbage collections: re-growing megabytes of buffer for every object
	// made the collector run (and scan the caller's heap) far more often.
	linePool  chan []byte // per-Write rendering buffers
	chunkPool chan []byte // s3ChunkBytes chunks of finished uploads
	gzPool    chan *gzip.Writer
	outPool   chan []byte // compressed bodies of finished uploads
}

// s3Shard holds the open buffers of one shard ID (one per table, kind,
// Region and hour: two Regions' shards of one ID share the state, never a
// buffer).
type s3Shard struct {
	mu   sync.Mutex
	bufs map[s3BufKey]*s3Buffer
	// lastWrite is the last Write's time; a shard with no open buffer
	// and no write for shardIdleAfter is forgotten (dead: a Write that
	// finds it dead starts a new state).
	lastWrite time.Time
	dead      bool
}

// shardIdleAfter is how long an S3 sink keeps the state of a shard it
// holds nothing for: shards close every few hours, and an archiver
// running for months must not keep one state per shard it ever saw.
func (s *Sink) shardIdleAfter() time.Duration {
	return max(10*s.c.FlushInterval, 10*time.Minute)
}

type s3BufKey struct {
	table  string
	kind   event.Kind
	region string
	shard  string
	hour   int64 // Unix hours
}

// s3Buffer is one object being filled. Its lines are in chunks, in
// order, size bytes in all: lines are appended to the last chunk and a
// chunk is never copied into a larger one, so an open buffer holds at
// most one chunk's slack and filling it copies each line once.
type s3Buffer struct {
	key         s3BufKey
	stream      string // the stream ARN of its first event
	chunks      [][]byte
	size        int
	first, last string
	records     int
	opened      time.Time
	batches     []*s3Batch
	dirty       bool // an upload attempt failed
}

type s3Upload struct {
	done chan struct{}
}

type s3Batch struct {
	mu        sync.Mutex
	ack       sinkapi.Ack
	remaining int
	err       error
	// rejected lists the events Write refused (nil for none); the batch
	// is acknowledged with it when everything else is durable.
	rejected *sinkapi.RejectedError
}

func (b *s3Batch) done(err error) {
	b.mu.Lock()
	if err != nil && b.err == nil {
		b.err = err
	}
	b.remaining--
	fire := b.remaining == 0
	b.mu.Unlock()
	if !fire {
		return
	}
	switch {
	case b.err != nil:
		b.ack(b.err)
	case b.rejected != nil:
		b.ack(b.rejected)
	default:
		b.ack(nil)
	}
}

// uploadConcurrency bounds the PutObject calls one S3 sink runs at once.
const uploadConcurrency = 4

// New opens an S3 sink. Credentials and the HTTP client come from
// o.AWSConfig (default: the AWS default chain).
func New(ctx context.Context, c objstore.S3Config, o sinkapi.Options) (*Sink, error) {
	client, err := NewClient(ctx, c, o)
	if err != nil {
		return nil, err
	}
	return NewWithClient(c, client, o)
}

// NewClient builds the S3 client an S3 sink of c uses
// ([objstore.NewClient]), with o.AWSConfig.
func NewClient(ctx context.Context, c objstore.S3Config, o sinkapi.Options) (*s3.Client, error) {
	return objstore.NewClient(ctx, c, o.AWSConfig)
}

// NewWithClient opens an S3 sink on a given client (tests, benchmarks,
// callers with their own client set-up).
func NewWithClient(c objstore.S3Config, api API, o sinkapi.Options) (*Sink, error) {
	c.Manifests = o.Manifests(c.Manifests)
	if c.FlushBytes <= 0 {
		c.FlushBytes = 8 << 20
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Minute
	}
	switch {
	case c.Format == sinkurl.FormatParquet && c.Compression != "":
		return nil, fmt.Errorf("s3 sink: compression %q with format parquet: a Parquet file is compressed inside (zstd); give one of them", c.Compression)
	case c.Format != "" && c.Format != sinkurl.FormatNDJSON && c.Format != sinkurl.FormatParquet:
		return nil, fmt.Errorf("s3 sink: format %q: must be ndjson or parquet", c.Format)
	case c.Compression == "" && c.Format != sinkurl.FormatParquet:
		c.Compression = "gzip"
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 200 * time.Millisecond
	}
	s := &Sink{
		c:        c,
		api:      api,
		name:     "s3://" + path.Join(c.Bucket, c.Prefix),
		log:      o.Log(),
		sem:      make(chan struct{}, uploadConcurrency),
		shards:   map[string]*s3Shard{},
		inflight: map[*s3Upload]struct{}{},
		stop:     make(chan struct{}),
		ticker:   make(chan struct{}),
		now:      time.Now,
	}
	s.uploads = newUploadLog(s.log, func() time.Time { return s.now() })
	if !c.Manifests.Off {
		s.rec = recorder.New(s.name, c.Manifests, recorder.Store{List: s.listManifests, Read: s.readManifest, Put: s.putManifest}, s.log, o.Registerer, func() time.Time { return s.now() })
	}
	s.m = sinkmetrics.New(o.Registerer, s.name)
	s.conflicts = newConflictCounter(o.Registerer, s.name)
	// The free lists stay short: what they hold is live heap that no
	// budget counts, and the collector's headroom doubles it (eight
	// pooled 8 MiB buffers were a fifth of the peak RSS).
	s.linePool = make(chan []byte, 4)
	s.chunkPool = make(chan []byte, 16)
	s.gzPool = make(chan *gzip.Writer, uploadConcurrency)
	s.outPool = make(chan []byte, uploadConcurrency)
	// Memory bound: what is buffered plus what is being uploaded.
	if c.MaxBufferBytes <= 0 {
		c.MaxBufferBytes = max(4*c.FlushBytes, 64<<20)
	}
	s.c.MaxBufferBytes = c.MaxBufferBytes
	s.budget = budget.New(c.MaxBufferBytes)
	switch c.Compression {
	case "":
		s.ext = parquetline.Ext
		s.pq = parquetline.NewEncoder()
	case "gzip":
		s.ext = ".jsonl.gz"
	case "zstd":
		s.ext = ".jsonl.zst"
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("s3 sink: zstd: %w", err)
		}
		s.zenc = enc
	case "none":
		s.ext = ".jsonl"
	default:
		return nil, fmt.Errorf("s3 sink: compression %q: must be gzip, zstd or none", c.Compression)
	}
	s.log.Info("s3 sink open: an object is uploaded once its oldest event has waited flush_interval, "+
		"or when it holds flush_bytes, and at shutdown",
		zap.String("sink", s.name), zap.Duration("flush_interval", c.FlushInterval), zap.Int64("flush_bytes", c.FlushBytes),
		zap.String("format", cmp.Or(c.Format, sinkurl.FormatNDJSON)))
	go s.tick()
	return s, nil
}

// Name is "s3://BUCKET/PREFIX".
func (s *Sink) Name() string { return s.name }

// Key returns the object key for a buffer of records of one table, kind,
// Region, shard and hour from first to last. An empty region (a stream
// ARN that names none) leaves "REGION." out.
func (s *Sink) Key(table string, kind event.Kind, region, shard string, hour time.Time, first, last string) string {
	h := hour.UTC()
	if region != "" {
		region += "."
	}
	name := fmt.Sprintf("table=%s/kind=%s/dt=%s/hr=%s/%s%s-%s-%s%s",
		table, kind, h.Format("2006-01-02"), h.Format("15"), region, shard, first, last, s.ext)
	if s.c.Prefix == "" {
		return name
	}
	return s.c.Prefix + "/" + name
}

// Write buffers the batch's events. It blocks while the sink holds
// MaxBufferBytes in buffers and uploads (backpressure); waiting, it uploads
// its partly filled buffers early rather than wait for their interval.
func (s *Sink) Write(ctx context.Context, b sinkapi.Batch, ack sinkapi.Ack) error {
	if ack == nil {
		ack = func(error) {}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	shardID := b.ShardID
	if shardID == "" && len(b.Events) > 0 {
		shardID = b.Events[0].ShardID
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return sinkapi.ErrClosed
	}
	s.writers.Add(1)
	defer s.writers.Done()
	sh := s.shardLocked(shardID)
	s.mu.Unlock()
	if len(b.Events) == 0 {
		go ack(nil)
		return nil
	}
	// Render outside any lock (writers of different shards render in
	// parallel) into a pooled buffer; ends[i] is where line i ends.
	var buf []byte
	select {
	case buf = <-s.linePool:
	default:
	}
	defer func() {
		select {
		case s.linePool <- buf[:0]:
		default:
		}
	}()
	buf, ends, rej := renderS3Lines(buf, b.Events)
	if rej != nil && len(rej.Indexes) == len(b.Events) {
		go ack(rej)
		return nil
	}
	total := int64(len(buf))
	kicked := false
	err := s.budget.Acquire(ctx, total, func() { kicked = s.kick() })
	if kicked {
		s.mu.Lock()
		s.starved--
		s.mu.Unlock()
	}
	if err != nil {
		return err
	}
	s.m.Buffered.Add(float64(total))
	sb := &s3Batch{ack: ack, remaining: 1, rejected: rej} // 1: held until the loop is done
	now := s.now()
	sh.mu.Lock()
	for sh.dead {
		// Forgotten while this Write rendered: start afresh.
		sh.mu.Unlock()
		s.mu.Lock()
		sh = s.shardLocked(shardID)
		s.mu.Unlock()
		sh.mu.Lock()
	}
	sh.lastWrite = now
	s.bufferLocked(sh, sb, b, buf, ends, now)
	sh.mu.Unlock()
	sb.done(nil)
	return nil
}

// bufferLocked appends the rendered lines of b's events (line i ends at
// ends[i] in buf; an empty one was rejected) to the shard's buffers, one
// per table, kind, Region, shard and hour, books sb on each buffer it adds to, and
// cuts a buffer that reached FlushBytes. The caller holds sh.mu.
func (s *Sink) bufferLocked(sh *s3Shard, sb *s3Batch, b sinkapi.Batch, buf []byte, ends []int, now time.Time) {
	for i := range b.Events {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		if start == ends[i] {
			continue // rejected
		}
		e := &b.Events[i]
		k := s3BufKey{table: e.Table, kind: e.Kind, region: e.Region, shard: e.ShardID, hour: e.ApproximateCreationTime.Unix() / 3600}
		if e.ApproximateCreationTime.Unix() < 0 && e.ApproximateCreationTime.Unix()%3600 != 0 {
			k.hour-- // floor for times before 1970
		}
		if k.shard == "" {
			k.shard = b.ShardID
		}
		bf := sh.bufs[k]
		if bf == nil {
			bf = &s3Buffer{key: k, stream: cmp.Or(e.StreamARN, b.StreamARN), first: e.SequenceNumber, opened: now}
			sh.bufs[k] = bf
		}
		if n := len(bf.batches); n == 0 || bf.batches[n-1] != sb {
			bf.batches = append(bf.batches, sb)
			sb.mu.Lock()
			sb.remaining++
			sb.mu.Unlock()
		}
		s.appendLine(bf, buf[start:ends[i]])
		bf.last = e.SequenceNumber
		bf.records++
		if int64(bf.size) >= s.c.FlushBytes {
			s.cutLocked(sh, bf)
		}
	}
}

// renderS3Lines appends the archive lines of evs to buf; ends[i] is where
// line i ends. An event whose table name cannot be part of a key gets an
// empty line and is listed in the returned rejection (nil when there is
// none): it is refused, the others go on.
func renderS3Lines(buf []byte, evs []event.Event) ([]byte, []int, *sinkapi.RejectedError) {
	ends := make([]int, len(evs))
	var rej *sinkapi.RejectedError
	for i := range evs {
		if err := sinkapi.CheckTableName(evs[i].Table); err != nil {
			if rej == nil {
				rej = &sinkapi.RejectedError{Err: fmt.Errorf("s3 sink: event %s: %w", evs[i].EventID, err)}
			}
			rej.Indexes = append(rej.Indexes, i)
			ends[i] = len(buf)
			continue
		}
		buf = event.AppendLine(buf, &evs[i])
		ends[i] = len(buf)
	}
	return buf, ends, rej
}

// shardLocked returns the shard's state, creating it. s.mu is held.
func (s *Sink) shardLocked(id string) *s3Shard {
	sh := s.shards[id]
	if sh == nil {
		sh = &s3Shard{bufs: map[s3BufKey]*s3Buffer{}, lastWrite: s.now()}
		s.shards[id] = sh
	}
	return sh
}

// forgetIdleShards drops the states of shards with no open buffer and no
// write for shardIdleAfter.
func (s *Sink) forgetIdleShards(now time.Time) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.shards))
	shards := make([]*s3Shard, 0, len(s.shards))
	for id, sh := range s.shards {
		ids = append(ids, id)
		shards = append(shards, sh)
	}
	s.mu.Unlock()
	idle := s.shardIdleAfter()
	for i, sh := range shards {
		sh.mu.Lock()
		if len(sh.bufs) == 0 && now.Sub(sh.lastWrite) >= idle {
			sh.dead = true
			s.mu.Lock()
			if s.shards[ids[i]] == sh {
				delete(s.shards, ids[i])
			}
			s.mu.Unlock()
		}
		sh.mu.Unlock()
	}
}

// s3ChunkBytes is the size of a buffer's chunks once it holds more than
// that; smaller buffers start at 64 KiB and double, so that many slow
// partitions do not each hold a megabyte.
const s3ChunkBytes = 1 << 20

// appendLine appends one line to bf, in a new chunk when the last one has
// no room: a full chunk from the free list, or a chunk of bf's size so
// far (64 KiB to s3ChunkBytes), or the line's size if larger.
func (s *Sink) appendLine(bf *s3Buffer, line []byte) {
	n := len(bf.chunks)
	if n == 0 || cap(bf.chunks[n-1])-len(bf.chunks[n-1]) < len(line) {
		var c []byte
		if bf.size >= s3ChunkBytes/2 && len(line) <= s3ChunkBytes {
			select {
			case c = <-s.chunkPool:
			default:
			}
		}
		if c == nil {
			c = make([]byte, 0, max(len(line), min(max(bf.size, 64<<10), s3ChunkBytes)))
		}
		bf.chunks = append(bf.chunks, c)
		n++
	}
	bf.chunks[n-1] = append(bf.chunks[n-1], line...)
	bf.size += len(line)
}

// joined is bf's lines in one slice: its only chunk, or a copy of all.
func (bf *s3Buffer) joined() []byte {
	if len(bf.chunks) == 1 {
		return bf.chunks[0]
	}
	out := make([]byte, 0, bf.size)
	for _, c := range bf.chunks {
		out = append(out, c...)
	}
	return out
}

// kick runs when a writer has to wait for buffer budget. While uploads
// are pending, their completion frees budget: cutting the open (partly
// filled) buffers too would only make more, smaller objects and queue
// them behind the others. So it cuts the open buffers only when nothing is
// pending; otherwise it marks the writer starved (it returns true, and the
// writer undoes that once it got its budget) and the last pending upload
// to finish cuts them if a writer is still starved.
func (s *Sink) kick() (starved bool) {
	s.mu.Lock()
	if s.pending > 0 {
		s.starved++
		s.mu.Unlock()
		return true
	}
	s.mu.Unlock()
	s.cutAll()
	return false
}

// cutLocked turns a buffer into an upload. sh.mu is held.
func (s *Sink) cutLocked(sh *s3Shard, bf *s3Buffer) {
	delete(sh.bufs, bf.key)
	up := &s3Upload{done: make(chan struct{})}
	s.mu.Lock()
	s.inflight[up] = struct{}{}
	s.pending += int64(bf.size)
	s.mu.Unlock()
	go s.upload(bf, up)
}

// cutWhere uploads every buffer for which cut returns true.
func (s *Sink) cutWhere(cut func(*s3Buffer) bool) {
	s.mu.Lock()
	shards := make([]*s3Shard, 0, len(s.shards))
	for _, sh := range s.shards {
		shards = append(shards, sh)
	}
	s.mu.Unlock()
	for _, sh := range shards {
		sh.mu.Lock()
		for _, bf := range sh.bufs {
			if cut(bf) {
				s.cutLocked(sh, bf)
			}
		}
		sh.mu.Unlock()
	}
}

func (s *Sink) cutAll() { s.cutWhere(func(*s3Buffer) bool { return true }) }

// tick cuts buffers whose oldest event waited FlushInterval.
func (s *Sink) tick() {
	defer close(s.ticker)
	every := min(max(s.c.FlushInterval/4, 5*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var lastForget time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		now := s.now()
		s.cutWhere(func(bf *s3Buffer) bool { return now.Sub(bf.opened) >= s.c.FlushInterval })
		s.uploads.tick()
		if now.Sub(lastForget) >= time.Minute {
			lastForget = now
			s.forgetIdleShards(now)
		}
	}
}

func (s *Sink) upload(bf *s3Buffer, up *s3Upload) {
	s.sem <- struct{}{}
	err := s.put(bf)
	<-s.sem
	s.mu.Lock()
	s.pending -= int64(bf.size)
	cut := s.pending == 0 && s.starved > 0
	s.mu.Unlock()
	s.budget.Release(int64(bf.size))
	s.m.Buffered.Sub(float64(bf.size))
	if cut {
		// Writers still wait for budget and no upload will free it: the
		// open buffers hold it.
		s.cutAll()
	}
	for _, b := range bf.batches {
		b.done(err)
	}
	if !bf.dirty && s.c.Compression != "none" {
		// After a failed attempt, or when a chunk was the body itself,
		// the HTTP transport may still be reading it.
		for _, c := range bf.chunks {
			if cap(c) != s3ChunkBytes {
				continue
			}
			select {
			case s.chunkPool <- c[:0]:
			default:
			}
		}
	}
	s.mu.Lock()
	delete(s.inflight, up)
	s.mu.Unlock()
	close(up.done)
}

// compress returns bf's lines compressed into a buffer from outPool (or
// the lines themselves without compression), or with format=parquet the
// Parquet file of their events.
func (s *Sink) compress(bf *s3Buffer) ([]byte, error) {
	var out []byte
	select {
	case out = <-s.outPool:
	default:
		out = make([]byte, 0, bf.size/4+64)
	}
	switch s.c.Compression {
	case "gzip":
		w := bytes.NewBuffer(out)
		var zw *gzip.Writer
		select {
		case zw = <-s.gzPool:
			zw.Reset(w)
		default:
			var err error
			if zw, err = gzip.NewWriterLevel(w, gzip.DefaultCompression); err != nil {
				return nil, err
			}
		}
		defer func() {
			select {
			case s.gzPool <- zw:
			default:
			}
		}()
		for _, c := range bf.chunks {
			if _, err := zw.Write(c); err != nil {
				return nil, err
			}
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return w.Bytes(), nil
	case "zstd":
		return s.zenc.EncodeAll(bf.joined(), out), nil
	case "":
		w := bytes.NewBuffer(out)
		if err := s.pq.FromLines(w, bf.joined()); err != nil {
			return nil, err
		}
		return w.Bytes(), nil
	}
	return bf.joined(), nil
}

// put uploads one buffer as one object, retrying retryable failures.
func (s *Sink) put(bf *s3Buffer) error {
	body, err := s.compress(bf)
	if err != nil {
		return fmt.Errorf("s3 sink: compressing: %w", err)
	}
	// Buffers go back to the free lists only when no attempt failed: after
	// a failed request the HTTP transport may still be reading the body.
	defer func() {
		if bf.dirty || s.c.Compression == "none" {
			return
		}
		select {
		case s.outPool <- body[:0]:
		default:
		}
	}()
	sum := sha256.Sum256(body)
	checksum := base64.StdEncoding.EncodeToString(sum[:])
	key := s.Key(bf.key.table, bf.key.kind, bf.key.region, bf.key.shard, time.Unix(bf.key.hour*3600, 0), bf.first, bf.last)
	in := &s3.PutObjectInput{
		Bucket:         aws.String(s.c.Bucket),
		Key:            aws.String(key),
		IfNoneMatch:    aws.String("*"),
		ContentType:    aws.String(s.contentType()),
		ContentLength:  aws.Int64(int64(len(body))),
		ChecksumSHA256: aws.String(checksum),
		Metadata: map[string]string{
			"records":        strconv.Itoa(bf.records),
			"first-sequence": bf.first,
			"last-sequence":  bf.last,
		},
	}
	if s.c.Compression == "gzip" || s.c.Compression == "zstd" {
		in.ContentEncoding = aws.String(s.c.Compression)
	}
	s.encrypt(in)
	if s.c.StorageClass != "" {
		in.StorageClass = s3types.StorageClass(s.c.StorageClass)
	}
	p := &s3Put{in: in, body: body, sum: sum, alt: distinctKey(key, s.ext, sum), lines: bf.joined}
	began := time.Now()
	stored, err := s.send(context.Background(), p)
	bf.dirty = bf.dirty || p.dirty
	if err != nil {
		return err
	}
	s.m.Objects.Inc()
	s.m.Bytes.Add(float64(len(body)))
	s.uploads.uploaded(key, bf.records, len(body), time.Since(began))
	s.track(bf, stored)
	return nil
}

// contentType is the media type of the sink's objects.
func (s *Sink) contentType() string {
	if s.c.Format == sinkurl.FormatParquet {
		return "application/vnd.apache.parquet"
	}
	return "application/x-ndjson"
}

// s3Put is one object to write with If-None-Match: *: its request (Body
// is set for each attempt), its bytes and their SHA-256, the distinct key
// a conflict writes it under, and its uncompressed lines, to compare
// events with an object found at its key (nil: the bytes alone are
// compared). dirty is set once an attempt failed or met a conflict: the
// HTTP transport may still be reading body.
type s3Put struct {
	in    *s3.PutObjectInput
	body  []byte
	sum   [sha256.Size]byte
	alt   string
	lines func() []byte
	// sameProof, for a manifest, accepts other bytes at the key as
	// written (see [recorder.SameProof]).
	sameProof func(stored, data []byte) bool
	dirty     bool
}

// s3Stored is where an object's bytes are once it is written: its key
// (prefix included), their size and their hex SHA-256. After a key
// conflict it is the object that already held them (same_content,
// same_events) or the distinct key.
type s3Stored struct {
	key    string
	size   int64
	sha256 string
}

// send writes p, retrying retryable failures with backoff up to
// MaxAttempts (or until ctx ends), and resolves a key conflict (see
// [Sink.resolveConflict]). It returns where the bytes are stored.
func (s *Sink) send(ctx context.Context, p *s3Put) (s3Stored, error) {
	key := aws.ToString(p.in.Key)
	retry := backoff.Policy{Min: s.c.RetryBase, Max: 20 * time.Second}
	for attempt := 1; ; attempt++ {
		stored, err := s.attempt(ctx, p)
		if err == nil {
			return stored, nil
		}
		p.dirty = true
		if !retryableS3(err) || attempt >= s.c.MaxAttempts || ctx.Err() != nil {
			s.log.Error("s3 upload failed", zap.String("key", key), zap.Int("attempts", attempt), zap.Error(err))
			err = fmt.Errorf("s3 sink: put s3://%s/%s (attempt %d): %w", s.c.Bucket, key, attempt, err)
			if permanentS3(err) {
				err = sinkapi.Permanent(err)
			}
			return s3Stored{}, err
		}
		s.m.Retries.Inc()
		s.log.Warn("s3 upload failed; retrying", zap.String("key", key), zap.Int("attempt", attempt), zap.Error(err))
		backoff.Sleep(ctx, retry.Delay(attempt-1))
	}
}

// attempt is one PutObject of p, bounded by two minutes, and the
// resolution of a conflict it meets.
func (s *Sink) attempt(ctx context.Context, p *s3Put) (s3Stored, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p.in.Body = bytes.NewReader(p.body)
	_, err := s.api.PutObject(ctx, p.in)
	if err == nil {
		return s3Stored{key: aws.ToString(p.in.Key), size: int64(len(p.body)), sha256: hex.EncodeToString(p.sum[:])}, nil
	}
	if !isPreconditionFailed(err) {
		return s3Stored{}, err
	}
	p.dirty = true
	outcome, stored, err := s.resolveConflict(ctx, p)
	if outcome != "" {
		s.conflicts(outcome).Inc()
	}
	return stored, err
}

// encrypt sets the configured server-side encryption on in.
func (s *Sink) encrypt(in *s3.PutObjectInput) {
	switch s.c.SSE {
	case "AES256":
		in.ServerSideEncryption = s3types.ServerSideEncryptionAes256
	case "aws:kms":
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		if s.c.KMSKeyID != "" {
			in.SSEKMSKeyId = aws.String(s.c.KMSKeyID)
		}
	}
}

func isPreconditionFailed(err error) bool {
	return awserr.Code(err) == "PreconditionFailed" || awserr.StatusCode(err) == http.StatusPreconditionFailed
}

// retryableS3 reports whether an upload error is worth another attempt:
// 5xx, throttling, timeouts, conflicts of concurrent conditional writes,
// what [awserr.IsRetryable] retries, expired credentials (the provider
// refreshes them), a body damaged on the way (checksum mismatch) and
// network errors. Other 3xx and 4xx (access denied, no such bucket, a KMS
// key that is missing or disabled, bad request) and content conflicts are
// not; see [permanentS3].
func retryableS3(err error) bool {
	if errors.Is(err, sinkapi.ErrPermanent) {
		return false
	}
	if code := awserr.StatusCode(err); code != 0 {
		if code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code == http.StatusConflict {
			return true
		}
		return awserr.IsRetryable(err) || retryableS3Codes[awserr.Code(err)]
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// No HTTP response at all (connection refused, reset, DNS): retry.
	var oe *smithy.OperationError
	return errors.As(err, &oe)
}

// retryableS3Codes are S3 error codes worth another attempt whatever their
// HTTP status (several come as 400 or 403), beyond the throttling and
// server faults awserr knows.
var retryableS3Codes = map[string]bool{
	"RequestTimeout": true, "RequestTimeTooSkewed": true,
	"ConditionalRequestConflict": true, "OperationAborted": true,
	"ExpiredToken": true, "ExpiredTokenException": true, "TokenRefreshRequired": true, "RequestExpired": true,
	"BadDigest": true, "XAmzContentSHA256Mismatch": true, "IncompleteBody": true,
	"KMS.DependencyTimeoutException": true, "KMS.KMSInternalException": true,
}

// permanentS3 reports whether an S3 failure is one that sending the same
// request again will never fix: an answer with a 3xx or 4xx status that
// [retryableS3] does not retry (NoSuchBucket, AccessDenied, InvalidBucketName,
// PermanentRedirect, KMS.NotFoundException, KMS.DisabledException, any
// other 400), or an error already marked permanent (a content conflict
// the sink could not resolve). Network errors, 5xx and throttling are
// never permanent, nor is giving up after MaxAttempts.
func permanentS3(err error) bool {
	if errors.Is(err, sinkapi.ErrPermanent) {
		return true
	}
	code := awserr.StatusCode(err)
	return code >= 300 && code < 500 && !retryableS3(err)
}

// Flush uploads every buffer now and returns once every batch written
// before it was acknowledged.
func (s *Sink) Flush(ctx context.Context) error {
	s.cutAll()
	s.mu.Lock()
	waits := make([]chan struct{}, 0, len(s.inflight))
	for up := range s.inflight {
		waits = append(waits, up.done)
	}
	s.mu.Unlock()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close uploads what is buffered and waits for every upload (until ctx
// ends; uploads still running then finish and acknowledge on their own).
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	s.mu.Unlock()
	<-s.ticker
	// Writes that got in before Close finish buffering first.
	writersDone := make(chan struct{})
	go func() {
		s.writers.Wait()
		close(writersDone)
	}()
	select {
	case <-writersDone:
	case <-ctx.Done():
		return ctx.Err()
	}
	err := s.Flush(ctx)
	s.uploads.close()
	if s.zenc != nil && err == nil {
		s.zenc.Close()
	}
	return err
}
