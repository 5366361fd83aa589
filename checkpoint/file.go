package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

// fileFormatVersion is the version written into checkpoint files without
// sweep cursors. Version 2 added finishedAt; version 1 files are still read
// (their finished shards count as finished when the file was opened).
// Version 3 added the sweep section (the cursors of `archiver sweep`); it is
// written only when the file holds one, so a file without stays readable
// by archivers that predate it.
const (
	fileFormatVersion      = 2
	fileFormatVersionSweep = 3
)

// FileStore keeps the checkpoints of every stream of one archiver in a
// single JSON file. It is meant for one worker: OpenFile takes an exclusive
// lock (flock) on PATH.lock, so a second archiver (or a second OpenFile in
// the same process) pointed at the same file fails with an error matching
// ErrLocked until Close.
//
// Every Save replaces the whole file atomically: the new content is written
// to a temporary file in the same directory, fsynced, renamed over the old
// file, and the directory is fsynced. A crash at any moment leaves either the
// old or the new file, never a torn one. Concurrent Saves are grouped: one
// write carries every change made before it started.
//
// A finished shard's checkpoint is dropped PruneFinishedAfter (default
// [DefaultPruneFinishedAfter]) after it was marked finished, as the
// DynamoDB store does, so that the file, which every Save rewrites, does
// not grow with every shard the stream ever had. By then the shard is long
// gone from the stream (DynamoDB keeps records 24 hours), and a child's
// checkpoint alone tells the walker that its parents were finished.
//
// The file also keeps the cursor of each table `archiver sweep` sweeps
// ([FileStore.SweepCursor]; the sweeper's store over it is sweep/state's):
// the file lock makes the one process using the file the table's only
// sweeper.
//
// FileStore is safe for concurrent use.
type FileStore struct {
	path    string
	lock    *os.File
	pruneD  time.Duration
	now     func() time.Time
	mu      sync.Mutex
	streams map[string]map[string]fileEntry
	sweeps  map[string]time.Time // table → sweep cursor
	gen     uint64               // incremented by every change in memory
	closed  bool

	// closedCtx is cancelled by Close (see Closed).
	closedCtx   context.Context
	closeCancel context.CancelCauseFunc

	// write serialises file writes; it is a channel so waiting honours ctx.
	write   chan struct{}
	written uint64 // highest gen known to be on disk; guarded by write

	// beforeRename, when set (tests only), runs after the temporary file is
	// written and synced and before it replaces the checkpoint file.
	beforeRename func(tmp string) error
	// wrapWriter, when set (tests only), wraps the temporary file's writer.
	wrapWriter func(io.Writer) io.Writer
}

var _ Store = (*FileStore)(nil)

// errFileStoreClosed is the cause of Closed's cancellation.
var errFileStoreClosed = errors.New("checkpoint: file store closed")

// fileData is the on-disk form of a FileStore.
type fileData struct {
	Version int                               `json:"version"`
	Streams map[string]map[string]fileShardCP `json:"streams"`
	// Sweep holds each swept table's cursor (version 3).
	Sweep map[string]fileSweepCursor `json:"sweep,omitempty"`
}

type fileSweepCursor struct {
	// Window is the cursor (RFC 3339, UTC, to the millisecond).
	Window string `json:"window"`
}

// fileContent is a checkpoint file's content in memory.
type fileContent struct {
	streams map[string]map[string]fileEntry
	sweeps  map[string]time.Time
}

type fileShardCP struct {
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	Finished       bool   `json:"finished,omitempty"`
	// FinishedAt is when the shard was first saved finished (RFC 3339).
	FinishedAt string `json:"finishedAt,omitempty"`
}

// fileEntry is one shard's checkpoint in memory.
type fileEntry struct {
	cp         Checkpoint
	finishedAt time.Time // zero unless cp.Finished
}

// FileOptions configures [OpenFileWith].
type FileOptions struct {
	// PruneFinishedAfter is how long a finished shard's checkpoint is kept
	// after the shard was first saved finished (default
	// DefaultPruneFinishedAfter); negative: forever.
	PruneFinishedAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// OpenFile opens (or prepares to create) the checkpoint file at path and
// locks it for this process. The file itself is created by the first Save;
// its directory must exist. Leftover temporary files of an interrupted Save
// are removed. The error matches ErrLocked when another holder has the lock,
// and names the path when the file cannot be read or is not a valid
// checkpoint file.
func OpenFile(path string) (*FileStore, error) {
	return OpenFileWith(path, FileOptions{})
}

// OpenFileWith is [OpenFile] with options.
func OpenFileWith(path string, o FileOptions) (*FileStore, error) {
	if o.PruneFinishedAfter == 0 {
		o.PruneFinishedAfter = DefaultPruneFinishedAfter
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if path == "" {
		return nil, errors.New("checkpoint: file store path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: file store path %q: %w", path, err)
	}
	lockPath := abs + ".lock"
	lf, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open lock file %s: %w", lockPath, err)
	}
	if err := flock(lf); err != nil {
		lf.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("checkpoint file %s (lock %s): %w", abs, lockPath, ErrLocked)
		}
		return nil, fmt.Errorf("checkpoint: lock %s: %w", lockPath, err)
	}
	s := &FileStore{
		path:    abs,
		lock:    lf,
		pruneD:  o.PruneFinishedAfter,
		now:     o.Now,
		streams: map[string]map[string]fileEntry{},
		sweeps:  map[string]time.Time{},
		write:   make(chan struct{}, 1),
	}
	s.closedCtx, s.closeCancel = context.WithCancelCause(context.Background())
	s.removeTemps()
	b, err := os.ReadFile(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		s.unlock()
		return nil, fmt.Errorf("checkpoint: read %s: %w", abs, err)
	}
	content, err := decodeFile(b, s.now())
	if err != nil {
		s.unlock()
		return nil, fmt.Errorf("checkpoint: file %s: %w", abs, err)
	}
	s.streams, s.sweeps = content.streams, content.sweeps
	s.prune()
	return s, nil
}

// decodeFile parses a checkpoint file's content. Finished shards without
// finishedAt (version 1) are taken as finished at opened.
func decodeFile(b []byte, opened time.Time) (fileContent, error) {
	var d fileData
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return fileContent{}, fmt.Errorf("not a valid checkpoint file: %w", err)
	}
	if dec.More() {
		return fileContent{}, errors.New("not a valid checkpoint file: trailing data after the JSON object")
	}
	if d.Version < 1 || d.Version > fileFormatVersionSweep {
		return fileContent{}, fmt.Errorf("field version: unsupported value %d (want 1 to %d)", d.Version, fileFormatVersionSweep)
	}
	streams, err := decodeStreams(d.Streams, opened)
	if err != nil {
		return fileContent{}, err
	}
	sweeps, err := decodeSweeps(d.Version, d.Sweep)
	if err != nil {
		return fileContent{}, err
	}
	return fileContent{streams: streams, sweeps: sweeps}, nil
}

// decodeStreams checks and converts the streams section.
func decodeStreams(streams map[string]map[string]fileShardCP, opened time.Time) (map[string]map[string]fileEntry, error) {
	out := make(map[string]map[string]fileEntry, len(streams))
	for arn, shards := range streams {
		if arn == "" {
			return nil, errors.New("field streams: empty stream ARN")
		}
		m := make(map[string]fileEntry, len(shards))
		for id, cp := range shards {
			if id == "" {
				return nil, fmt.Errorf("field streams[%q]: empty shard ID", arn)
			}
			if cp.SequenceNumber != "" && !event.ValidSequence(cp.SequenceNumber) {
				return nil, fmt.Errorf("field streams[%q][%q].sequenceNumber: %q is not a decimal sequence number", arn, id, cp.SequenceNumber)
			}
			e := fileEntry{cp: Checkpoint{SequenceNumber: cp.SequenceNumber, Finished: cp.Finished}}
			switch {
			case cp.FinishedAt != "" && !cp.Finished:
				return nil, fmt.Errorf("field streams[%q][%q].finishedAt: set on a shard that is not finished", arn, id)
			case cp.FinishedAt != "":
				t, err := time.Parse(time.RFC3339Nano, cp.FinishedAt)
				if err != nil {
					return nil, fmt.Errorf("field streams[%q][%q].finishedAt: %q is not an RFC 3339 time", arn, id, cp.FinishedAt)
				}
				e.finishedAt = t
			case cp.Finished:
				e.finishedAt = opened
			}
			m[id] = e
		}
		out[arn] = m
	}
	return out, nil
}

// encodeFile renders checkpoints in the file format (deterministically).
func encodeFile(c fileContent) ([]byte, error) {
	d := fileData{Version: fileFormatVersion, Streams: make(map[string]map[string]fileShardCP, len(c.streams))}
	if len(c.sweeps) > 0 {
		d.Version = fileFormatVersionSweep
		d.Sweep = encodeSweeps(c.sweeps)
	}
	for arn, shards := range c.streams {
		m := make(map[string]fileShardCP, len(shards))
		for id, e := range shards {
			fc := fileShardCP{SequenceNumber: e.cp.SequenceNumber, Finished: e.cp.Finished}
			if e.cp.Finished {
				fc.FinishedAt = e.finishedAt.UTC().Format(time.RFC3339Nano)
			}
			m[id] = fc
		}
		d.Streams[arn] = m
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Path returns the absolute path of the checkpoint file.
func (s *FileStore) Path() string { return s.path }

// Load returns a copy of every checkpoint stored for the stream (an empty
// map when there is none).
func (s *FileStore) Load(ctx context.Context, streamARN string) (map[string]Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("checkpoint: file store %s is closed", s.path)
	}
	out := make(map[string]Checkpoint, len(s.streams[streamARN]))
	for id, e := range s.streams[streamARN] {
		out[id] = e.cp
	}
	return out, nil
}

// Save records cp for the shard and returns once it is durable on disk. A
// failed Save leaves the previous file in place; the change stays in memory
// and is written by the next successful Save.
func (s *FileStore) Save(ctx context.Context, streamARN, shardID string, cp Checkpoint) error {
	if streamARN == "" || shardID == "" {
		return errors.New("checkpoint: Save needs a stream ARN and a shard ID")
	}
	if cp.SequenceNumber != "" && !event.ValidSequence(cp.SequenceNumber) {
		return fmt.Errorf("checkpoint: Save %s: sequence number %q is not decimal", shardID, cp.SequenceNumber)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("checkpoint: file store %s is closed", s.path)
	}
	m := s.streams[streamARN]
	if m == nil {
		m = map[string]fileEntry{}
		s.streams[streamARN] = m
	}
	e := fileEntry{cp: cp}
	if cp.Finished {
		e.finishedAt = s.now()
		if old, ok := m[shardID]; ok && old.cp.Finished {
			e.finishedAt = old.finishedAt
		}
	}
	m[shardID] = e
	s.prune()
	s.gen++
	mine := s.gen
	s.mu.Unlock()
	return s.persist(ctx, mine)
}

// persist returns once the file holds every change up to generation mine:
// it writes the file unless a write that started after that change
// already carried it.
func (s *FileStore) persist(ctx context.Context, mine uint64) error {
	select {
	case s.write <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.write }()
	if s.written >= mine {
		return nil // a write that started after our change carried it
	}
	s.mu.Lock()
	gen := s.gen
	b, err := encodeFile(fileContent{streams: s.streams, sweeps: s.sweeps})
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("checkpoint: encode %s: %w", s.path, err)
	}
	if err := s.replace(b); err != nil {
		return err
	}
	s.written = gen
	return nil
}

// prune drops finished checkpoints older than pruneD, and streams left
// with none. s.mu is held (or s is not shared yet).
func (s *FileStore) prune() {
	if s.pruneD < 0 {
		return
	}
	cutoff := s.now().Add(-s.pruneD)
	for arn, m := range s.streams {
		for id, e := range m {
			if e.cp.Finished && e.finishedAt.Before(cutoff) {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(s.streams, arn)
		}
	}
}

// replace writes b to the checkpoint file atomically and durably.
func (s *FileStore) replace(b []byte) (err error) {
	dir, base := filepath.Split(s.path)
	tmp, err := os.CreateTemp(dir, base+".tmp-*")
	if err != nil {
		return fmt.Errorf("checkpoint: create temporary file beside %s: %w", s.path, err)
	}
	tmpName := tmp.Name()
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	var w io.Writer = tmp
	if s.wrapWriter != nil {
		w = s.wrapWriter(w)
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("checkpoint: write %s: %w", tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("checkpoint: fsync %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("checkpoint: close %s: %w", tmpName, err)
	}
	if s.beforeRename != nil {
		if err := s.beforeRename(tmpName); err != nil {
			return err
		}
	}
	if err := os.Rename(tmpName, s.path); err != nil {
		return fmt.Errorf("checkpoint: replace %s: %w", s.path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint: fsync directory %s: %w", dir, err)
	}
	return nil
}

// removeTemps deletes temporary files left by a Save that crashed before
// its rename. Only the lock holder calls it.
func (s *FileStore) removeTemps() {
	dir, base := filepath.Split(s.path)
	matches, _ := filepath.Glob(filepath.Join(dir, globEscape(base)+".tmp-*"))
	sort.Strings(matches)
	for _, m := range matches {
		os.Remove(m)
	}
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Close releases the lock. Later Load and Save calls fail. Close is
// idempotent.
func (s *FileStore) Close() error {
	s.write <- struct{}{} // let a running write finish first
	defer func() { <-s.write }()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.closeCancel(errFileStoreClosed)
	return s.unlock()
}

func (s *FileStore) unlock() error {
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close() // closing the descriptor releases the flock
	s.lock = nil
	if err != nil {
		return fmt.Errorf("checkpoint: release lock of %s: %w", s.path, err)
	}
	return nil
}
