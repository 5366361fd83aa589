// Package wal is the engine's write-ahead log: numbered segment files of
// framed entries, appended from many goroutines and made durable by group
// commit (one fsync covers every entry appended before it started).
//
// Each entry is framed as a 4-byte little-endian payload length, a 4-byte
// CRC-32C (Castagnoli) of the payload, then the payload. A crash can leave
// the last entry of the newest segment incomplete (a torn tail): Replay
// detects it by its length or checksum, drops it and truncates the file
// there. A bad entry anywhere else is corruption and an error naming the
// file and offset.
//
// Segments are named wal-NNNNNNNNNNNNNNNN.log after their number. Rotate
// closes the current segment and starts the next, so that a snapshot can
// name the first segment it does not cover and Remove can delete the ones
// before it.
//
// A full disk is found before an entry is taken, not after: where the file
// system can reserve space (Linux fallocate), the log reserves it ahead of
// its entries, and TryAppend refuses what the reservation cannot cover, so
// its caller changes nothing. A write or fsync that fails anyway is not
// final: the segment is cut back to its last durable entry, the entries
// stay queued and a later flush writes them again; meanwhile TryAppend
// refuses new entries.
package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HeaderSize is the size of an entry's frame header (length, then CRC).
const HeaderSize = 8

// MaxEntry bounds one entry's payload; a length above it is corruption.
const MaxEntry = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of p, as frames carry it.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// SegmentName is the file name of segment n.
func SegmentName(n uint64) string { return fmt.Sprintf("wal-%016d.log", n) }

// ErrClosed is returned by Sync and Rotate after Close.
var ErrClosed = errors.New("wal: log is closed")

// errUnsupported is allocate's answer on a file system that cannot reserve
// space.
var errUnsupported = errors.New("wal: the file system cannot reserve space")

const (
	// allocStep is how far ahead of its entries the log reserves space,
	// so that it asks the file system about once per allocStep bytes.
	allocStep = 1 << 20
	// allocHeadroom is the reserved space TryAppend leaves free
	// for Append, whose entries take no reservation of their own.
	allocHeadroom = 64 << 10
	// retryEvery is how soon Sync writes again after a failed write: a
	// failing disk is retried, not hammered.
	retryEvery = 50 * time.Millisecond
)

// Log is an open log appending to its newest segment. All methods are safe
// for concurrent use.
type Log struct {
	dir string

	mu      sync.Mutex    // guards the fields below; held during I/O only to reserve space
	buf     []byte        // entries appended but not yet written
	pos     atomic.Uint64 // bytes appended since Create (the position of the end of buf); written under mu
	since   int64         // bytes appended since the last Rotate
	closed  bool
	segLen  int64 // bytes of the current segment, written or in buf
	alloc   int64 // bytes of the current segment whose disk space is reserved
	noAlloc bool  // the file system cannot reserve space
	failed  error // the last flush's failure; nil once a flush succeeds

	syncMu  sync.Mutex // held by the one goroutine writing and syncing
	f       *os.File   // current segment (syncMu to use, mu too to replace)
	seg     uint64     // its number (syncMu)
	off     int64      // bytes of the current segment written and fsynced (syncMu)
	spare   []byte     // the other buffer (syncMu)
	lastTry time.Time  // when a flush last failed (syncMu)
	durable atomic.Uint64
}

// Create starts segment seg in dir (which must exist) and returns a log
// appending to it. The segment must not exist yet.
func Create(dir string, seg uint64) (*Log, error) {
	f, err := os.OpenFile(filepath.Join(dir, SegmentName(seg)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if err := SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &Log{dir: dir, f: f, seg: seg}, nil
}

// Append adds one entry whose payload enc appends to the slice it is given
// (and returns), and returns the log position just past the entry: Sync
// with it to wait until the entry is durable. enc runs under the log's
// mutex: it must only encode. Append never refuses: its entry goes into
// the headroom TryAppend leaves, or past the reserved space.
func (l *Log) Append(enc func([]byte) []byte) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takeLocked(l.encodeLocked(enc))
}

// TryAppend is Append for an entry that must be refused, with nothing
// appended, when the log cannot promise to write it: when disk space for
// it cannot be reserved (a full disk), or while the log cannot write the
// entries before it. The error names the segment and the cause.
func (l *Log) TryAppend(enc func([]byte) []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refusedLocked(); err != nil {
		return 0, err
	}
	n := l.encodeLocked(enc)
	if err := l.reserveLocked(); err != nil {
		l.buf = l.buf[:len(l.buf)-int(n)]
		l.segLen -= n
		return 0, err
	}
	return l.takeLocked(n), nil
}

// Failed returns why the last flush failed, or nil when it succeeded:
// while it is set, TryAppend refuses.
func (l *Log) Failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// encodeLocked frames one entry at the end of buf and returns its size.
// l.mu is held.
func (l *Log) encodeLocked(enc func([]byte) []byte) int64 {
	start := len(l.buf)
	l.buf = append(l.buf, make([]byte, HeaderSize)...)
	l.buf = enc(l.buf)
	p := l.buf[start+HeaderSize:]
	binary.LittleEndian.PutUint32(l.buf[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(l.buf[start+4:], Checksum(p))
	n := int64(len(l.buf) - start)
	l.segLen += n
	return n
}

// takeLocked accepts the n bytes encodeLocked framed and returns the
// position past them. l.mu is held.
func (l *Log) takeLocked(n int64) uint64 {
	pos := l.pos.Load() + uint64(n)
	l.pos.Store(pos)
	l.since += n
	return pos
}

// refusedLocked returns why new entries are refused: the last flush
// failed. l.mu is held.
func (l *Log) refusedLocked() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return fmt.Errorf("wal: the log takes no entries until it has written the ones it holds: %w", l.failed)
	}
	return nil
}

// reserveLocked makes sure the disk space reserved for the current segment
// covers everything appended and the headroom, asking the file system for allocStep more when it does not. l.mu is
// held.
func (l *Log) reserveLocked() error {
	need := l.segLen + allocHeadroom
	if l.noAlloc || need <= l.alloc {
		return nil
	}
	err := allocate(l.f, l.alloc, need+allocStep-l.alloc)
	if err == nil {
		l.alloc = need + allocStep
		return nil
	}
	if errors.Is(err, errUnsupported) {
		l.noAlloc = true
		return nil
	}
	if allocate(l.f, l.alloc, need-l.alloc) == nil { // nearly full: take only what is needed
		l.alloc = need
		return nil
	}
	return fmt.Errorf("wal: reserve disk space for the log: %w", err)
}

// Pos returns the position just past the last entry appended.
func (l *Log) Pos() uint64 { return l.pos.Load() }

// Durable reports whether every entry up to pos is on disk.
func (l *Log) Durable(pos uint64) bool { return l.durable.Load() >= pos }

// SinceRotate returns the bytes appended since the last Rotate (or Create).
func (l *Log) SinceRotate() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.since
}

// Sync waits until every entry up to pos is written and fsynced. Callers
// that arrive while another Sync is writing wait for it and then, if still
// needed, write everything appended meanwhile with one fsync: group commit.
// After a failed write, Sync returns that failure without writing again
// until retryEvery has passed.
func (l *Log) Sync(pos uint64) error {
	if l.durable.Load() >= pos {
		return nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.durable.Load() >= pos {
		return nil
	}
	if !l.lastTry.IsZero() && time.Since(l.lastTry) < retryEvery {
		if err := l.Failed(); err != nil {
			return err
		}
	}
	return l.flushLocked()
}

// flushLocked writes and fsyncs everything appended so far. l.syncMu is
// held. When the write or the fsync fails, the segment is cut back to its
// last durable entry and the entries go back in front of the buffer, to be
// written again by a later flush: nothing is dropped, and no torn entry is
// left in the middle of the log (the next write starts where the last
// durable entry ends and covers whatever a failed one left there).
func (l *Log) flushLocked() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	buf, end := l.buf, l.pos.Load()
	l.buf = l.spare[:0]
	l.mu.Unlock()
	if len(buf) > 0 {
		if err := l.writeLocked(buf); err != nil {
			l.mu.Lock()
			l.buf = append(buf, l.buf...)
			l.failed = err
			l.mu.Unlock()
			l.spare = nil
			l.lastTry = time.Now()
			return err
		}
	}
	if cap(buf) <= 16<<20 {
		l.spare = buf[:0]
	} else {
		l.spare = nil
	}
	l.durable.Store(end)
	if !l.lastTry.IsZero() {
		l.lastTry = time.Time{}
		l.mu.Lock()
		l.failed = nil
		l.mu.Unlock()
	}
	return nil
}

// writeLocked writes buf at the end of the segment's durable entries and
// fsyncs it. l.syncMu is held.
func (l *Log) writeLocked(buf []byte) error {
	_, err := l.f.WriteAt(buf, l.off)
	if err != nil {
		err = fmt.Errorf("wal: write %s: %w", l.f.Name(), err)
	} else if err = l.f.Sync(); err != nil {
		err = fmt.Errorf("wal: fsync %s: %w", l.f.Name(), err)
	}
	if err != nil {
		// Best effort: the next write starts at l.off whatever is left.
		l.f.Truncate(l.off)
		return err
	}
	l.off += int64(len(buf))
	return nil
}

// Rotate makes everything appended so far durable in the current segment,
// then starts the next one and returns its number: every entry appended
// before Rotate is in a segment below it.
func (l *Log) Rotate() (uint64, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.flushLocked(); err != nil {
		return 0, err
	}
	next := l.seg + 1
	f, err := os.OpenFile(filepath.Join(l.dir, SegmentName(next)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	if err := SyncDir(l.dir); err != nil {
		f.Close()
		return 0, err
	}
	// Entries appended since the flush above go to the new segment.
	l.mu.Lock()
	old, oldOff := l.f, l.off
	l.f, l.seg, l.off = f, next, 0
	l.since = int64(len(l.buf))
	l.segLen, l.alloc = l.since, 0
	l.mu.Unlock()
	old.Truncate(oldOff) // give back the space reserved past the end
	if err := old.Close(); err != nil {
		return 0, fmt.Errorf("wal: close %s: %w", old.Name(), err)
	}
	return next, nil
}

// Close makes everything appended durable and closes the segment. Later
// Syncs return ErrClosed.
func (l *Log) Close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	err := l.flushLocked()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	if err == nil {
		l.f.Truncate(l.off) // give back the space reserved past the end
	}
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("wal: close: %w", cerr)
	}
	return err
}

// Segments lists the numbers of the segments in dir, ascending.
func Segments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	var out []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "wal-") || !strings.HasSuffix(name, ".log") {
			continue
		}
		n, err := strconv.ParseUint(name[4:len(name)-4], 10, 64)
		if err != nil || SegmentName(n) != name {
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Remove deletes the segments numbered below seg.
func Remove(dir string, seg uint64) error {
	segs, err := Segments(dir)
	if err != nil {
		return err
	}
	for _, n := range segs {
		if n >= seg {
			break
		}
		if err := os.Remove(filepath.Join(dir, SegmentName(n))); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
	}
	return SyncDir(dir)
}

// Replay calls fn with the payload of every entry of the segments numbered
// from seg on, in order; the payload is only valid during the call. A torn
// last entry of the newest segment is dropped and cut off the file. It
// returns the newest segment's number (seg-1 when there is none).
func Replay(dir string, seg uint64, fn func(payload []byte) error) (uint64, error) {
	segs, err := Segments(dir)
	if err != nil {
		return 0, err
	}
	last := seg - 1
	for i, n := range segs {
		if n < seg {
			continue
		}
		if n != last+1 {
			return 0, fmt.Errorf("wal: segment %s is missing in %s (found %s)", SegmentName(last+1), dir, SegmentName(n))
		}
		newest := i == len(segs)-1
		if err := replayFile(filepath.Join(dir, SegmentName(n)), newest, fn); err != nil {
			return 0, err
		}
		last = n
	}
	return last, nil
}

// replayFile reads one segment. When newest, a bad entry with nothing but
// zeros after it, or one running past the end of the file, is a torn tail:
// the file is truncated before it.
func replayFile(path string, newest bool, fn func([]byte) error) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	end, rerr := ReadFrames(bufio.NewReaderSize(f, 1<<20), st.Size(), fn)
	if rerr == nil {
		return nil
	}
	var bad *BadFrameError
	if !errors.As(rerr, &bad) {
		return fmt.Errorf("wal: %s: entry at offset %d: %w", path, end, rerr)
	}
	if !newest || !(bad.Tail || zerosFrom(f, end)) {
		return fmt.Errorf("wal: %s: corrupt entry at offset %d (%s); the log cannot be replayed past it", path, end, bad.Reason)
	}
	if err := f.Truncate(end); err != nil {
		return fmt.Errorf("wal: cut the torn tail of %s at offset %d: %w", path, end, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}

// zerosFrom reports whether the file holds only zero bytes from off on.
func zerosFrom(f *os.File, off int64) bool {
	r := bufio.NewReader(io.NewSectionReader(f, off, 1<<62))
	for {
		b, err := r.ReadByte()
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		if b != 0 {
			return false
		}
	}
}

// BadFrameError says why the frame at the offset ReadFrames returned could
// not be read.
type BadFrameError struct {
	Reason string
	Tail   bool // nothing follows the frame: it ends at or runs past the end of the input
}

func (e *BadFrameError) Error() string { return e.Reason }

// ReadFrames calls fn with each frame's payload read from r, which holds
// size bytes. It returns the offset just past the last good frame, and a
// *BadFrameError when a frame is short, empty or fails its checksum, or fn's
// error. The payload is only valid during the call.
func ReadFrames(r io.Reader, size int64, fn func([]byte) error) (int64, error) {
	var off int64
	var hdr [HeaderSize]byte
	var buf []byte
	for off < size {
		if size-off < HeaderSize {
			return off, &BadFrameError{Reason: "short frame header", Tail: true}
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return off, err
		}
		n := int64(binary.LittleEndian.Uint32(hdr[:4]))
		if n > MaxEntry {
			return off, &BadFrameError{Reason: fmt.Sprintf("entry length %d is too large", n), Tail: off+HeaderSize+n >= size}
		}
		if off+HeaderSize+n > size {
			return off, &BadFrameError{Reason: fmt.Sprintf("entry of %d bytes runs past the end", n), Tail: true}
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return off, err
		}
		if n == 0 {
			return off, &BadFrameError{Reason: "empty entry", Tail: off+HeaderSize >= size}
		}
		if Checksum(buf) != binary.LittleEndian.Uint32(hdr[4:]) {
			return off, &BadFrameError{Reason: "checksum mismatch", Tail: off+HeaderSize+n == size}
		}
		if err := fn(buf); err != nil {
			return off, err
		}
		off += HeaderSize + n
	}
	return off, nil
}

// AppendFrame appends one framed entry with payload p to b.
func AppendFrame(b, p []byte) []byte {
	var hdr [HeaderSize]byte
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(hdr[4:], Checksum(p))
	return append(append(b, hdr[:]...), p...)
}

// SyncDir fsyncs a directory, making file creations, renames and removals
// in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: fsync %s: %w", dir, err)
	}
	return nil
}
