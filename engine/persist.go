package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
	"github.com/ttl-archiver/archiver/engine/internal/wal"
)

// Persistence (Options.DataDir). The engine logs effects, not requests:
// every state change (a table's metadata, an item stored or deleted, a
// stream event) is appended to a write-ahead log under the lock that orders
// it, and ServeHTTP answers only once the log is fsynced up to the position
// the request left it at (group commit: concurrent requests share one
// fsync). Snapshots bound start-up time: the log is rotated, the state is
// written to a temporary file (fsynced, renamed, directory fsynced) and the
// segments before the rotation are removed. Start-up loads the snapshot,
// replays the segments after it (a torn last entry is dropped) and builds
// the indexes once.
//
// Files in DataDir: LOCK (flock'ed by the engine using the directory),
// snapshot, wal-N.log, iterator.key (shard iterators stay valid across
// restarts), control.json (the control API's clock and faults,
// persist_control.go).

const (
	snapshotFile    = "snapshot"
	lockFile        = "LOCK"
	iteratorKeyFile = "iterator.key"
	// snapshotEvery is how many log bytes trigger a background snapshot.
	snapshotEvery = 64 << 20
	// flushEvery is how often the background loop makes writes no request
	// waits for (the TTL sweeper's, the Go fault hooks') durable.
	flushEvery = 50 * time.Millisecond
	// snapRetry is how long the background loop waits after a failed
	// snapshot (a full disk, say) before it tries again.
	snapRetry = 30 * time.Second
)

// persister keeps one engine's state in its data directory.
type persister struct {
	e    *Engine
	dir  string
	lock *os.File
	log  *wal.Log

	health    diskHealth
	controlMu sync.Mutex   // one write of controlFile at a time (saveControl)
	snapMu    sync.Mutex   // one snapshot at a time
	snapEvery atomic.Int64 // log bytes that trigger a background snapshot (snapshotEvery; tests lower it)
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// openPersister locks dir, loads the state it holds into e (which must be
// empty) and starts logging e's changes.
func openPersister(e *Engine, dir string) (*persister, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: data directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	p := &persister{e: e, dir: dir, lock: lock, stop: make(chan struct{}), done: make(chan struct{})}
	p.snapEvery.Store(snapshotEvery)
	start := time.Now()
	err = p.iteratorKey()
	var last uint64
	var replayed int64
	if err == nil {
		last, replayed, err = p.load()
	}
	if err == nil {
		err = p.loadControl()
	}
	if err == nil {
		p.log, err = wal.Create(dir, last+1)
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	e.streams.SetJournal(p)
	// Table IDs mix the clock with this counter; a ManualClock may stand
	// where it stood before the restart, so start the counter somewhere
	// new or a new table could take the ID of a persisted one.
	e.seedSeq.Store(uint64(mrand.Uint32()))
	e.log.Info("engine state loaded", zap.String("dir", dir), zap.Duration("took", time.Since(start)), zap.Int64("walBytes", replayed))
	go p.loop(replayed > snapshotEvery)
	return p, nil
}

// iteratorKey makes shard iterators survive restarts: the registry's key
// is kept in DIR/iterator.key (written once, atomically) and read back.
func (p *persister) iteratorKey() error {
	path := filepath.Join(p.dir, iteratorKeyFile)
	k, err := os.ReadFile(path)
	switch {
	case err == nil && len(k) == 32:
		p.e.streams.SetIteratorKey(k)
		return nil
	case err == nil:
		return fmt.Errorf("engine: %s holds %d bytes, want a 32-byte key", path, len(k))
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("engine: %w", err)
	}
	if err := writeAtomic(p.dir, iteratorKeyFile, p.e.streams.IteratorKey()); err != nil {
		return fmt.Errorf("engine: iterator key: %w", err)
	}
	return nil
}

// writeAtomic replaces dir/name with data so that a crash leaves the old
// file or the new one, never a mix: a temporary file, fsynced, renamed
// over it, then the directory fsynced.
func writeAtomic(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err == nil {
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	return wal.SyncDir(dir)
}

// Record logs a stream event (stream.Journal); the stream's lock is held.
func (p *persister) Record(ev *stream.Event) {
	p.log.Append(func(b []byte) []byte { return appendStreamEvent(b, ev) })
}

// logChange logs that key now holds ne (nil: deleted) in t, together with
// ev, the stream record that describes the change (nil: none), as one log
// entry, so that a crash keeps both or neither. It refuses, logging
// nothing, when the log cannot promise to write the entry (a full disk):
// the caller must then change nothing. t.mu is held for writing.
func (p *persister) logChange(t *table, key []byte, ne *entry, ev *stream.Event, rw *replWrite) error {
	return p.tryLog(func(b []byte) []byte { return appendChange(b, t.id, key, ne, ev, rw) })
}

// logTx logs a transaction's writes, each with its stream record (evs[i]
// for writes[i], nil: none), as one entry, so that a crash keeps all of
// them or none, and a full disk refuses all of them or none. The write
// locks of the writes' tables and the locks of their streams are held.
func (p *persister) logTx(writes []txWrite, evs []*stream.Event) error {
	return p.tryLog(func(b []byte) []byte { return appendTx(b, writes, evs) })
}

// tryLog appends the entry enc encodes, or refuses it, logging nothing,
// when the log cannot promise to write it.
func (p *persister) tryLog(enc func([]byte) []byte) error {
	if _, err := p.log.TryAppend(enc); err != nil {
		return p.refused(err)
	}
	p.health.ok(p)
	return nil
}

// writeRefused is a write the data directory could not take: nothing was
// changed, in memory or on disk. It reaches clients as a
// ThrottlingException (400): the SDKs retry it with backoff (and in their
// adaptive mode also slow their sending), and unlike a 5xx, which says
// the outcome is unknown, a 4xx says the request was not applied, which
// is the truth here.
type writeRefused struct {
	dir   string
	cause error
}

func (e *writeRefused) Error() string {
	return "The engine's data directory " + e.dir + " (--data-dir) cannot take writes now (" + e.cause.Error() +
		"); nothing was changed. Retry with backoff: writes resume by themselves once the directory can be written again (free space on its disk)"
}

func (e *writeRefused) Unwrap() error { return e.cause }

// As makes the refusal the engine's wire error.
func (e *writeRefused) As(target any) bool {
	if ae, ok := target.(**awserr.Error); ok {
		*ae = &awserr.Error{Code: codeThrottling, Status: 400, Message: e.Error()}
		return true
	}
	return false
}

// isRefused reports whether err is a write the data directory refused.
func isRefused(err error) bool {
	var wr *writeRefused
	return errors.As(err, &wr)
}

// readOnly reports whether an operation only reads (PartiQL statements
// may write, so they count as writes): it is answered even while the
// data directory cannot be written.
func readOnly(op string, streamsAPI bool) bool {
	switch op {
	case "GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems", "DescribeTable", "ListTables",
		"DescribeTimeToLive", "DescribeEndpoints", "DescribeLimits", "ListTagsOfResource":
		return true
	}
	return streamsAPI
}

// codeThrottling is the error code of a write the data directory refused.
const codeThrottling = "ThrottlingException"

// refused wraps a log refusal for the client and the log (rate-limited).
func (p *persister) refused(err error) error {
	if errors.Is(err, wal.ErrClosed) {
		return errEngineClosed
	}
	p.health.fail(p, err, true)
	return &writeRefused{dir: p.dir, cause: err}
}

// diskHealth rate-limits what the engine logs about a data directory it
// cannot write: one ERROR when writes start failing, then at most one
// every logEvery while they keep failing (with how many writes were
// refused meanwhile), and one INFO when a write is taken again.
type diskHealth struct {
	failing atomic.Bool // read on every write: ok does nothing unless set
	mu      sync.Mutex
	since   time.Time // when the failures began
	lines   logLimit  // the ERROR lines; counts the writes refused
}

func (h *diskHealth) fail(p *persister, err error, refused bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	if refused {
		n = 1
	}
	now := time.Now()
	if !h.failing.Load() {
		h.since = now
		h.failing.Store(true)
	}
	if c, ok := h.lines.note(now, n); ok {
		p.e.log.Error("engine: the data directory cannot be written; writes are refused (ThrottlingException) and resume by themselves once it can: free space on its disk",
			zap.String("dir", p.dir), zap.Error(err), zap.Duration("for", now.Sub(h.since)), zap.Int64("refused", c))
	}
}

func (h *diskHealth) ok(p *persister) {
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing.Swap(false) {
		p.e.log.Info("engine: the data directory takes writes again", zap.String("dir", p.dir),
			zap.Duration("after", time.Since(h.since)), zap.Int64("refused", h.lines.reset()))
	}
}

// tableChanged logs t's metadata. t.mu is held (or t is not yet visible).
func (p *persister) tableChanged(t *table) {
	js := t.metaJSON()
	p.log.Append(func(b []byte) []byte { return append(append(b, recTableMeta), js...) })
}

// tableDeleted logs that t is gone. t.mu is held.
func (p *persister) tableDeleted(t *table) {
	p.log.Append(func(b []byte) []byte { return putStr(append(b, recTableDeleted), t.id) })
}

// sync waits until everything logged so far is durable.
func (p *persister) sync() error { return p.log.Sync(p.log.Pos()) }

// loop flushes writes no request waits for and snapshots when the log has
// grown past snapEvery (at once when soon is set). A snapshot runs in a
// goroutine of its own while the flushing goes on: writing one takes
// seconds for millions of items, and meanwhile the writes no request
// syncs would pile up unflushed in the log's memory (a start-up TTL sweep
// of a million expired items peaked 1 GB higher that way).
func (p *persister) loop(soon bool) {
	defer close(p.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	var notBefore time.Time // no snapshot before it: the last one failed
	var snapping chan error // the running snapshot's result, nil when none runs
	defer func() {
		if snapping != nil {
			<-snapping // close snapshots next, and then closes the log
		}
	}()
	for {
		select {
		case err := <-snapping: // never ready while snapping is nil
			snapping = nil
			if err != nil {
				notBefore = time.Now().Add(snapRetry)
				p.e.log.Error("engine snapshot failed; retrying later", zap.String("dir", p.dir), zap.Error(err), zap.Duration("in", snapRetry))
			}
		default:
		}
		if snapping == nil && (soon || p.log.SinceRotate() > p.snapEvery.Load()) && time.Now().After(notBefore) {
			soon = false
			snapping = make(chan error, 1)
			go func(c chan<- error) { c <- p.snapshot() }(snapping)
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		if err := p.sync(); err != nil && !errors.Is(err, wal.ErrClosed) {
			p.health.fail(p, err, false)
		}
	}
}

// close stops the background loop, snapshots when the log holds anything
// since the last one, closes the log and releases the directory.
func (p *persister) close() error {
	p.closeOnce.Do(func() {
		close(p.stop)
		<-p.done
		var errs []error
		if p.log.SinceRotate() > 0 {
			errs = append(errs, p.snapshot())
		}
		errs = append(errs, p.log.Close(), p.lock.Close())
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// snapshot writes the whole state to DIR/snapshot and removes the log
// segments it covers. Writes go on meanwhile: the log is rotated first, and
// everything logged after the rotation is replayed over the snapshot at
// start-up, which is harmless for what the snapshot already holds (every
// entry sets a state, and stream events the snapshot reflects are skipped).
func (p *persister) snapshot() error {
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	seg, err := p.log.Rotate()
	if err != nil {
		return err
	}
	tmp := filepath.Join(p.dir, snapshotFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("engine snapshot: %w", err)
	}
	defer os.Remove(tmp) // a no-op once renamed
	defer f.Close()
	w := &frameWriter{w: bufio.NewWriterSize(f, 1<<20)}
	w.put(binary.AppendUvarint(binary.AppendUvarint([]byte{recSnapHeader}, snapVersion), seg))
	p.e.writeTables(w)
	p.e.repl.writeQueue(w)
	if err := p.e.streams.Export(func(ev *stream.Event) error {
		w.put(appendStreamEvent(w.scratch[:0], ev))
		return w.err
	}); err != nil {
		return fmt.Errorf("engine snapshot: %w", err)
	}
	w.put([]byte{recSnapEnd})
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if w.err == nil {
		w.err = f.Sync()
	}
	if w.err != nil {
		return fmt.Errorf("engine snapshot %s: %w", tmp, w.err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("engine snapshot: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, snapshotFile)); err != nil {
		return fmt.Errorf("engine snapshot: %w", err)
	}
	if err := wal.SyncDir(p.dir); err != nil {
		return err
	}
	return wal.Remove(p.dir, seg)
}

// frameWriter writes framed entries; the first error sticks.
type frameWriter struct {
	w       *bufio.Writer
	scratch []byte // for the caller's payloads
	frame   []byte
	err     error
}

func (w *frameWriter) put(payload []byte) {
	if w.err != nil {
		return
	}
	w.frame = wal.AppendFrame(w.frame[:0], payload)
	_, w.err = w.w.Write(w.frame)
	if cap(payload) > cap(w.scratch) && cap(payload) <= 1<<20 {
		w.scratch = payload[:0]
	}
}

// snapChunk is how many items a snapshot copies per hold of a table's read
// lock.
const snapChunk = 4096

// writeTables writes every table's metadata and items. Items are read in
// chunks under the table's read lock and encoded outside it.
func (e *Engine) writeTables(w *frameWriter) {
	e.mu.RLock()
	tables := make([]*table, 0, len(e.tables))
	for _, t := range e.tables {
		tables = append(tables, t)
	}
	e.mu.RUnlock()
	sort.Slice(tables, func(i, j int) bool { return tables[i].name < tables[j].name })
	chunk := make([]*entry, 0, snapChunk)
	for _, t := range tables {
		t.mu.RLock()
		js := t.metaJSON()
		t.mu.RUnlock()
		w.put(append([]byte{recTableMeta}, js...))
		var cursor []byte
		for w.err == nil {
			chunk = chunk[:0]
			t.mu.RLock()
			n := t.items.First()
			if cursor != nil {
				n = t.items.SeekGE(cursor)
			}
			for ; n != nil && len(chunk) < snapChunk; n = n.Next() {
				chunk = append(chunk, n.val)
			}
			if n != nil {
				cursor = n.Key()
			}
			t.mu.RUnlock()
			for _, ent := range chunk {
				w.put(appendItemPut(w.scratch[:0], t.id, ent))
			}
			if n == nil {
				break
			}
		}
		t.writeRepl(w)
	}
}

// Snapshot writes the engine's whole state to its data directory now and
// drops the write-ahead log it covers, so that the next start-up loads it
// instead of replaying the log. The engine snapshots by itself as the log
// grows and on Close; without Options.DataDir, Snapshot does nothing.
func (e *Engine) Snapshot() error {
	if e.p == nil {
		return nil
	}
	return e.p.snapshot()
}

// notDurable is the error a request gets when the log could not be synced
// after the request changed something: a 503 once the engine is closed (a
// retry may reach a new engine on the same directory), otherwise a 500,
// DynamoDB's answer when the outcome is unknown, naming the directory and
// the cause. The changes stay queued and are written once the directory
// can be written again (see wal.Log.Sync), unless the engine stops first.
func (p *persister) notDurable(err error) error {
	if errors.Is(err, wal.ErrClosed) {
		return errEngineClosed
	}
	p.health.fail(p, err, false)
	return &awserr.Error{Code: awserr.CodeInternalServerError, Status: 500,
		Message: "The engine could not make the request's changes durable in its data directory " + p.dir + " (--data-dir): " + err.Error() +
			"; they may or may not be applied (they are written once the directory can be written again, unless the engine stops first). Retry with backoff"}
}

// errEngineClosed answers requests to an engine with a data directory
// after Close: their effects could no longer be made durable.
var errEngineClosed = &awserr.Error{Code: awserr.CodeServiceUnavailable, Status: 503,
	Message: "The engine is closed: it no longer writes to its data directory"}

// closed reports whether close has begun.
func (p *persister) closed() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// durableWriter returns w, or with a data directory a writer that waits
// for the log before the response goes out (for the control API, whose
// handlers write their own responses). When the log cannot be synced, a
// request that changes something (any POST) gets 503 and an error body
// instead of its own; a read (GET) is answered as it is.
func (e *Engine) durableWriter(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if e.p == nil {
		return w
	}
	return &syncedWriter{ResponseWriter: w, p: e.p, read: r.Method == http.MethodGet}
}

type syncedWriter struct {
	http.ResponseWriter
	p        *persister
	read     bool
	synced   bool
	replaced bool // the handler's body is dropped: an error went out instead
}

func (w *syncedWriter) WriteHeader(status int) {
	if w.synced {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.synced = true
	err := w.p.sync()
	if err == nil || w.read {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.replaced = true
	var msg string
	if errors.Is(err, wal.ErrClosed) {
		msg = errEngineClosed.Message
	} else {
		w.p.health.fail(w.p, err, false)
		msg = "the engine could not make this change durable in its data directory " + w.p.dir + " (--data-dir): " + err.Error() +
			"; it may or may not be applied (it is written once the directory can be written again). Retry with backoff"
	}
	writeControl(w.ResponseWriter, http.StatusServiceUnavailable, map[string]string{"error": msg})
}

func (w *syncedWriter) Write(b []byte) (int, error) {
	if !w.synced {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}
