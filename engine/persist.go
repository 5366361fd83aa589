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
// restarts).

const (
	snapshotFile    = "snapshot"
	lockFile        = "LOCK"
	iteratorKeyFile = "iterator.key"
	// snapshotEvery is how many log bytes trigger a background snapshot.
	snapshotEvery = 64 << 20
	// flushEvery is how often the background loop makes writes no request
	// waits for (the TTL sweeper's, the Go fault hooks') durable.
	flushEvery = 50 * time.Millisecond
)

// persister keeps one engine's state in its data directory.
type persister struct {
	e    *Engine
	dir  string
	lock *os.File
	log  *wal.Log

	snapMu    sync.Mutex // one snapshot at a time
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
	start := time.Now()
	err = p.iteratorKey()
	var last uint64
	var replayed int64
	if err == nil {
		last, replayed, err = p.load()
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
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err == nil {
		_, err = f.Write(p.e.streams.IteratorKey())
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
		return fmt.Errorf("engine: iterator key: %w", err)
	}
	return wal.SyncDir(p.dir)
}

// Record logs a stream event (stream.Journal); the stream's lock is held.
func (p *persister) Record(ev *stream.Event) {
	p.log.Append(func(b []byte) []byte { return appendStreamEvent(b, ev) })
}

// itemWritten logs that key now holds ne (nil: deleted) in t. t.mu is held
// for writing.
func (p *persister) itemWritten(t *table, key []byte, ne *entry) {
	if ne != nil {
		p.log.Append(func(b []byte) []byte { return appendItemPut(b, t.id, ne) })
		return
	}
	p.log.Append(func(b []byte) []byte { return appendItemDeleted(b, t.id, key) })
}

// itemsDeleted logs the deletion of many keys of t. t.mu is held for
// writing.
func (p *persister) itemsDeleted(t *table, keys [][]byte) {
	for _, k := range keys {
		p.itemWritten(t, k, nil)
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
// grown past snapshotEvery (at once when soon is set).
func (p *persister) loop(soon bool) {
	defer close(p.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		if soon || p.log.SinceRotate() > snapshotEvery {
			soon = false
			if err := p.snapshot(); err != nil {
				p.e.log.Error("engine snapshot failed", zap.String("dir", p.dir), zap.Error(err))
			}
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		if err := p.sync(); err != nil && !errors.Is(err, wal.ErrClosed) {
			p.e.log.Error("engine: write-ahead log", zap.String("dir", p.dir), zap.Error(err))
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
				cursor = n.key
			}
			t.mu.RUnlock()
			for _, ent := range chunk {
				w.put(appendItemPut(w.scratch[:0], t.id, ent))
			}
			if n == nil {
				break
			}
		}
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

// notDurable is the error a request gets when the log could not be synced:
// a 503 once the engine is closed (a retry may reach a new engine on the
// same directory), otherwise a 500 naming the cause.
func notDurable(err error) error {
	if errors.Is(err, wal.ErrClosed) {
		return errEngineClosed
	}
	return &awserr.Error{Code: awserr.CodeInternalServerError, Status: 500,
		Message: "The engine could not make the request's changes durable: " + err.Error()}
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
// handlers write their own responses).
func (e *Engine) durableWriter(w http.ResponseWriter) http.ResponseWriter {
	if e.p == nil {
		return w
	}
	return &syncedWriter{ResponseWriter: w, p: e.p}
}

type syncedWriter struct {
	http.ResponseWriter
	p      *persister
	synced bool
}

func (w *syncedWriter) WriteHeader(status int) {
	if !w.synced {
		w.synced = true
		if err := w.p.sync(); err != nil {
			w.p.e.log.Error("engine: control request not durable", zap.Error(err))
			status = http.StatusInternalServerError
			if errors.Is(err, wal.ErrClosed) {
				status = http.StatusServiceUnavailable
			}
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *syncedWriter) Write(b []byte) (int, error) {
	if !w.synced {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}
