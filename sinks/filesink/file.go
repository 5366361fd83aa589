// Package filesink holds the sinks that write archive lines to the local
// machine: [Sink] (file://DIR: one file per table and hour, appended and
// fsynced, with coverage manifests; or with format=parquet, Parquet files
// in the S3 layout) and [Writer] (stdout://, or any
// io.Writer). Package sinks opens them by URL ([ParseStdout] reads a
// stdout:// URL's parameters; sinkurl a file:// URL's); their contract is
// package sinkapi's.
package filesink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/parquetline"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/internal/serial"
	"github.com/ttl-archiver/archiver/sinks/internal/sinkmetrics"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// queue is the serial worker the file and writer sinks embed: their
// Write, Flush and Close.
type queue = serial.Queue

// Sink appends archive lines (see [event.AppendLine]) to one file per
// table and hour of the event's creation time (UTC):
//
//	DIR/TABLE/YYYY-MM-DD/HH.jsonl
//
// A batch is acknowledged only after its lines were written and the file
// (and any directory it had to create) fsynced. Batches queued together
// share one fsync. Lines are rendered in Write, on the caller's goroutine;
// one worker appends (O_APPEND) and fsyncs, in the order batches were
// written. A failed append is cut back off the file, so a retry never
// leaves a torn line behind.
//
// One sink owns DIR: it holds an exclusive lock (flock) on
// DIR/_archiver/lock from New to Close, and a second sink on the
// same directory, in this process or another archiver, fails to open with
// an error matching [ErrDirectoryInUse]. A file whose last line lacks its
// '\n' (a writer killed mid-append, which never acknowledged that line)
// is cut back to its last whole line before anything is appended: the
// cut bytes are kept in DIR/_archiver/torn/ and a warning names both; the
// records they held are delivered again, so the archive holds whole lines
// only and no new line is ever glued onto a torn one.
//
// Below DIR nothing is followed: every folder and file is opened from
// DIR's descriptor one name at a time with O_NOFOLLOW, and a symbolic link
// at TABLE, DAY or HH.jsonl fails the append with an error naming it
// (permanent, see below). DIR itself may be a link. Files are created
// with [sinkurl.FileConfig.FileMode] (0640) and folders with
// [sinkurl.FileConfig.DirMode] (0750), set exactly; existing ones keep
// theirs.
//
// Failures are classified for the caller (see [sinkapi.ErrPermanent]):
// permission denied (EACCES, EPERM), a read-only file system (EROFS), a file where a
// directory belongs (ENOTDIR, EISDIR), a symbolic link or anything but a
// regular file where a file sink's folder or file belongs, and names too
// long are permanent; a
// full disk or quota (ENOSPC, EDQUOT), I/O errors and everything else are
// not (space may be freed; the batch is worth retrying). An event whose
// table name cannot be a directory name is rejected alone: its batch is
// acknowledged with a [*sinkapi.RejectedError] once the other events are
// durable.
//
// The sink records coverage manifests ([Sink.Record], package
// manifest) under DIR/_manifests/. Its files are shared by every shard
// and grow, so it keeps each file's SHA-256 running as it appends, and a
// manifest lists the files a shard appended to since its last one with
// their size after the shard's last append and the SHA-256 of that
// prefix. With manifests=false it hashes nothing, and package sinks' Open
// returns it without Record and RecordDue.
//
// With format=parquet ([sinkurl.FormatParquet]) it writes no lines and no
// manifests: each batch becomes whole Parquet files in the S3 sink's
// layout below DIR, renamed into place (see parquet.go); the lock, the
// modes and the rule that nothing below DIR is followed are the same.
type Sink struct {
	*queue
	dir   string
	root  *fileRoot
	log   *zap.Logger
	m     sinkmetrics.Sink
	files map[string]*os.File
	// segs collects, per file, the rendered runs one worker round
	// appends (kept between rounds for its capacity).
	segs map[string][][]byte
	// linesPool holds rendered batches' buffers for reuse.
	linesPool chan *fileLines
	// fsync makes f durable; tests replace it to inject failures.
	fsync func(f *os.File) error
	// rec tracks, per shard, the files appended to since the shard's
	// last manifest and records manifests (nil with manifests=false);
	// digests holds the running SHA-256 of the files appended to (the
	// worker's alone).
	rec     *recorder.Recorder
	digests map[string]*fileDigest
	now     func() time.Time
	// pq writes the Parquet files of format=parquet (nil otherwise).
	pq *parquetline.Encoder
}

// maxOpenFiles bounds the file handles a Sink keeps between batches.
const maxOpenFiles = 64

// ErrDirectoryInUse is matched (errors.Is) by the error of a file sink
// opened on a directory another file sink holds.
var ErrDirectoryInUse = errors.New("in use: another archiver's file sink holds it")

// errSymlink and errNotRegular are matched by the append errors of a
// symbolic link, or something that is not a regular file, where a file
// sink's folder or file belongs.
var (
	errSymlink    = errors.New("is a symbolic link, and the file sink follows none below its directory")
	errNotRegular = errors.New("is not a regular file")
)

// New opens a file sink writing under dir with the default modes
// (see [NewWith]).
func New(dir string, o sinkapi.Options) (*Sink, error) {
	return NewWith(sinkurl.FileConfig{Dir: dir}, o)
}

// NewWith opens a file sink on c.Dir, creating it (and its
// parents) with c.DirMode when missing, and takes the directory's lock: an
// error matching [ErrDirectoryInUse] when another sink holds it. Zero
// modes mean the defaults; a mode beyond 0777 or one that locks the owner
// out is an error naming it.
func NewWith(c sinkurl.FileConfig, o sinkapi.Options) (*Sink, error) {
	c.Manifests = o.Manifests(c.Manifests)
	c, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	root, err := openRoot(c.Dir, c.FileMode, c.DirMode)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		dir:   c.Dir,
		root:  root,
		log:   o.Log(),
		m:     sinkmetrics.New(o.Registerer, "file://"+c.Dir),
		files: map[string]*os.File{},
		segs:  map[string][][]byte{},
		// Room for a full queue plus the batches being rendered.
		linesPool: make(chan *fileLines, 128),
		fsync:     (*os.File).Sync,
		now:       time.Now,
	}
	if !c.Manifests.Off {
		s.rec = recorder.New(s.Name(), c.Manifests, recorder.Store{List: s.listManifests, Read: s.readManifest, Put: s.putManifest}, s.log, o.Registerer, func() time.Time { return s.now() })
		s.digests = map[string]*fileDigest{}
	}
	if c.Format == sinkurl.FormatParquet {
		s.pq = parquetline.NewEncoder()
		s.queue = serial.New(64, s.writeParquet, s.closeFiles)
		s.queue.Prepare = s.renderParquet
		return s, nil
	}
	s.queue = serial.New(64, s.write, s.closeFiles)
	s.queue.Prepare = s.render
	return s, nil
}

// Name is "file://DIR".
func (s *Sink) Name() string { return "file://" + s.dir }

// Path returns the file an event goes to.
func (s *Sink) Path(e *event.Event) (string, error) {
	if err := sinkapi.CheckTableName(e.Table); err != nil {
		return "", err
	}
	t := e.ApproximateCreationTime.UTC()
	return filepath.Join(s.dir, e.Table, t.Format("2006-01-02"), t.Format("15")+".jsonl"), nil
}

// fileLines is one batch rendered on the caller's goroutine: its archive
// lines, in order, cut into runs of consecutive events bound for the same
// file. rej lists the events that cannot be archived (nil for none); they
// have no line.
type fileLines struct {
	buf  []byte
	runs []fileRun
	rej  error
}

// fileRun is a run of lines for one file: buf[end of the run before:end],
// the lines of the batch's events first to last.
type fileRun struct {
	path        string
	end         int
	first, last int
}

// render is the Sink's prepare step: it runs in Write, on the caller's
// goroutine (callers write different shards in parallel), so that the
// worker only appends and fsyncs.
func (s *Sink) render(b sinkapi.Batch) any {
	fl := s.getLines()
	lastHour, lastTable := int64(0), ""
	for j := range b.Events {
		e := &b.Events[j]
		u := e.ApproximateCreationTime.Unix()
		hour := u / 3600
		if u%3600 < 0 {
			hour-- // floor for times before 1970
		}
		if len(fl.runs) == 0 || hour != lastHour || e.Table != lastTable {
			path, err := s.Path(e)
			if err != nil {
				fl.rej = sinkapi.AddRejected(fl.rej, j, fmt.Errorf("file sink: event %s: %w", e.EventID, err))
				continue
			}
			if len(fl.runs) == 0 || fl.runs[len(fl.runs)-1].path != path {
				fl.runs = append(fl.runs, fileRun{path: path, first: j})
			}
			lastHour, lastTable = hour, e.Table
		}
		fl.buf = event.AppendLine(fl.buf, e)
		run := &fl.runs[len(fl.runs)-1]
		run.end, run.last = len(fl.buf), j
	}
	return fl
}

// getLines returns an empty fileLines, reusing a released one when there
// is one.
func (s *Sink) getLines() *fileLines {
	select {
	case fl := <-s.linesPool:
		return fl
	default:
		return &fileLines{}
	}
}

// putLines releases fl for reuse (oversized buffers are left to the
// garbage collector, so one huge batch does not pin its memory).
func (s *Sink) putLines(fl *fileLines) {
	if cap(fl.buf) > 4<<20 {
		return
	}
	fl.buf, fl.runs, fl.rej = fl.buf[:0], fl.runs[:0], nil
	select {
	case s.linesPool <- fl:
	default:
	}
}

func (s *Sink) write(reqs []serial.Req) []error {
	errs := make([]error, len(reqs))
	touched := make([][]string, len(reqs))
	var order []string
	rendered := make([]*fileLines, 0, len(reqs))
	for i, r := range reqs {
		fl, _ := r.Prep.(*fileLines)
		if fl == nil {
			fl = s.render(r.Batch).(*fileLines)
		}
		rendered = append(rendered, fl)
		errs[i] = fl.rej
		start := 0
		for _, run := range fl.runs {
			segs := s.segs[run.path]
			if len(segs) == 0 {
				order = append(order, run.path)
			}
			if len(touched[i]) == 0 || touched[i][len(touched[i])-1] != run.path {
				touched[i] = append(touched[i], run.path)
			}
			// The rendered lines are written from where they are, one
			// write per run: no copy into a per-file buffer.
			s.segs[run.path] = append(segs, fl.buf[start:run.end])
			start = run.end
		}
	}
	failed, durable := s.appendAll(order)
	if s.rec != nil {
		s.trackRuns(reqs, rendered, durable)
	}
	for _, fl := range rendered {
		s.putLines(fl)
	}
	for i := range reqs {
		// A failed append outranks the rejection of single events.
		for _, p := range touched[i] {
			if err, ok := failed[p]; ok {
				errs[i] = err
				break
			}
		}
	}
	if len(s.segs) > maxOpenFiles {
		clear(s.segs)
	}
	return errs
}

// appendAll appends each path's collected runs (s.segs) and fsyncs it, in
// order. It returns the paths that failed, with their errors, and, when
// the sink records manifests, the durable size and SHA-256 of each path
// appended to.
func (s *Sink) appendAll(order []string) (map[string]error, map[string]manifest.Object) {
	failed := map[string]error{}
	var durable map[string]manifest.Object
	if s.rec != nil {
		durable = make(map[string]manifest.Object, len(order))
	}
	for _, path := range order {
		segs := s.segs[path]
		n, d, err := s.appendSync(path, segs)
		if err != nil {
			err = classifyFileError(err)
			failed[path] = err
			s.log.Error("file sink append failed", zap.String("path", path), zap.Error(err))
		} else {
			s.m.Bytes.Add(float64(n))
			s.m.Objects.Inc()
			if d != nil {
				durable[path] = d.object()
			}
		}
		clear(segs)
		s.segs[path] = segs[:0]
	}
	return failed, durable
}

// appendSync appends segs to path in order and fsyncs it, returning the
// bytes written and, when the sink records manifests, the file's running
// digest, which then covers them; on failure it truncates the file back
// to where it was (the end before the append: the directory lock keeps
// every other sink from appending meanwhile).
func (s *Sink) appendSync(path string, segs [][]byte) (int, *fileDigest, error) {
	f, err := s.open(path)
	if err != nil {
		return 0, nil, err
	}
	start, err := f.Seek(0, io.SeekEnd)
	if err == nil && s.rec != nil {
		err = s.digestTo(path, f, start)
	}
	if err != nil {
		s.drop(path)
		return 0, nil, fmt.Errorf("file sink: %w", err)
	}
	n := 0
	var werr error
	for _, seg := range segs {
		var w int
		w, werr = f.Write(seg)
		n += w
		if werr != nil {
			break
		}
	}
	if werr == nil {
		werr = s.fsync(f)
	}
	if werr != nil {
		if terr := f.Truncate(start); terr != nil {
			werr = errors.Join(werr, fmt.Errorf("truncating after failed append: %w", terr))
		}
		s.drop(path)
		return 0, nil, fmt.Errorf("file sink: %w", werr)
	}
	d := s.digests[path]
	if d != nil {
		for _, seg := range segs {
			d.h.Write(seg)
		}
		d.size += int64(n)
	}
	return n, d, nil
}

// open returns path's file, opened for appending (see [fileRoot.openFile])
// and with its torn tail cut off (see cutTornTail).
func (s *Sink) open(path string) (*os.File, error) {
	if f, ok := s.files[path]; ok {
		return f, nil
	}
	if len(s.files) >= maxOpenFiles {
		for p := range s.files {
			s.drop(p)
		}
	}
	rel, err := filepath.Rel(s.dir, path)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	f, created, err := s.root.openFile(filepath.ToSlash(rel), os.O_RDWR|os.O_APPEND)
	if err != nil {
		return nil, err
	}
	if !created {
		if err := s.cutTornTail(f, filepath.ToSlash(rel)); err != nil {
			f.Close()
			return nil, fmt.Errorf("file sink: %w", err)
		}
	}
	s.files[path] = f
	return f, nil
}

// cutTornTail cuts f back to just after its last '\n' when its last byte
// is not one: a writer was killed mid-append, and the bytes after that
// '\n' were never acknowledged, so their records are delivered again (no
// checkpoint passed them). The cut bytes are first kept, durable, in
// DIR/_archiver/torn/REL.OFFSET (see [tornKey]), and a warning names both,
// so nothing is destroyed and the archive holds whole lines only. Every
// manifest lists a prefix ending in an acknowledged '\n', so none covers
// the cut bytes.
func (s *Sink) cutTornTail(f *os.File, rel string) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	size := fi.Size()
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return fmt.Errorf("reading the last byte of %s: %w", f.Name(), err)
	}
	if last[0] == '\n' {
		return nil
	}
	end, err := lineEnd(f, size)
	if err != nil {
		return err
	}
	key := tornKey(rel, end)
	if err := s.keepTorn(key, io.NewSectionReader(f, end, size-end)); err != nil {
		return fmt.Errorf("keeping the torn tail of %s: %w", f.Name(), err)
	}
	if err := f.Truncate(end); err != nil {
		return fmt.Errorf("cutting the torn tail of %s: %w", f.Name(), err)
	}
	if err := s.fsync(f); err != nil {
		return fmt.Errorf("cutting the torn tail of %s: %w", f.Name(), err)
	}
	s.m.Repairs.Inc()
	s.log.Warn("file sink: the file ended in a torn line (a writer was stopped mid-append); cut it off and kept it aside, its records are delivered again",
		zap.String("path", f.Name()), zap.Int64("cut_at", end), zap.Int64("bytes", size-end),
		zap.String("kept_in", filepath.Join(s.dir, filepath.FromSlash(key))))
	return nil
}

// tornKey is where the torn tail of the file DIR/rel, cut at offset, is
// kept: below _archiver/, which archive readers skip.
func tornKey(rel string, offset int64) string {
	return sinkurl.TornDir + rel + "." + strconv.FormatInt(offset, 10)
}

// keepTorn writes r to DIR/key (replacing a copy an interrupted cut left)
// and fsyncs it.
func (s *Sink) keepTorn(key string, r io.Reader) error {
	t, _, err := s.root.openFile(key, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := io.Copy(t, r); err != nil {
		t.Close()
		return err
	}
	if err := s.fsync(t); err != nil {
		t.Close()
		return err
	}
	return t.Close()
}

// lineEnd returns the offset just after the last '\n' in f's first size
// bytes (0 when there is none), reading backwards from size.
func lineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, fmt.Errorf("reading %s for its last line: %w", f.Name(), err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// classifyFileError marks err permanent when the file system refuses the
// write for a reason that trying again never fixes: no permission (EACCES,
// EPERM), a read-only file system (EROFS), a file where a directory
// belongs or the other way round (ENOTDIR, EISDIR), a name too long. A
// full disk or quota (ENOSPC, EDQUOT) is not permanent: space may be
// freed. Nor are I/O errors, too many open files and the like.
func classifyFileError(err error) error {
	for _, errno := range permanentErrnos {
		if errors.Is(err, errno) {
			return sinkapi.Permanent(err)
		}
	}
	return err
}

var permanentErrnos = []error{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOTDIR, syscall.EISDIR, syscall.ENAMETOOLONG, errSymlink, errNotRegular}

func (s *Sink) drop(path string) {
	if f, ok := s.files[path]; ok {
		f.Close()
		delete(s.files, path)
	}
}

// closeFiles closes every file, then the directory and its lock: the next
// sink on DIR may open once every write of this one is done.
func (s *Sink) closeFiles() error {
	var errs []error
	for p, f := range s.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(s.files, p)
	}
	if err := s.root.close(); err != nil {
		errs = append(errs, fmt.Errorf("file sink: releasing %s: %w", s.dir, err))
	}
	return errors.Join(errs...)
}

// Writer writes one line per event to an io.Writer: the archive line, or
// with item=true the item as plain JSON ([event.PlainJSON]). An event is
// acknowledged once the writer accepted its bytes (and, if the writer has a
// Sync method that works, synced them). stdout:// is a Writer on
// os.Stdout.
type Writer struct {
	*queue
	name string
	w    io.Writer
	item bool
	buf  []byte
	m    sinkmetrics.Sink
}

// NewWriter returns a sink writing lines to w (os.Stdout when nil).
func NewWriter(name string, w io.Writer, item bool, o sinkapi.Options) *Writer {
	if w == nil {
		w = os.Stdout
	}
	s := &Writer{name: name, w: w, item: item, m: sinkmetrics.New(o.Registerer, name)}
	s.queue = serial.New(64, s.write, nil)
	return s
}

// Name is the name given to NewWriter ("stdout://" from package sinks'
// Open).
func (s *Writer) Name() string { return s.name }

func (s *Writer) write(reqs []serial.Req) []error {
	errs := make([]error, len(reqs))
	s.buf = s.buf[:0]
	for _, r := range reqs {
		for j := range r.Batch.Events {
			e := &r.Batch.Events[j]
			if s.item {
				s.buf = event.AppendPlainJSON(s.buf, e.Image())
				s.buf = append(s.buf, '\n')
			} else {
				s.buf = event.AppendLine(s.buf, e)
			}
		}
	}
	_, err := s.w.Write(s.buf)
	if err == nil {
		if sy, ok := s.w.(interface{ Sync() error }); ok {
			// Terminals and pipes cannot be synced; that is not a failure.
			if serr := sy.Sync(); serr != nil && !isUnsyncable(serr) {
				err = serr
			}
		}
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", s.name, err)
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	s.m.Bytes.Add(float64(len(s.buf)))
	s.m.Objects.Add(float64(len(reqs)))
	if cap(s.buf) > 16<<20 {
		s.buf = nil
	}
	return errs
}

// Flush returns once every batch written before it was acknowledged.
func (s *Writer) Flush(ctx context.Context) error { return s.queue.Flush(ctx) }
