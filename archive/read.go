package archive

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/budget"
	"github.com/ttl-archiver/archiver/sinks"
)

// Line is one event read from an archive and where it was read.
type Line struct {
	// Object is the key of the object holding the line.
	Object string
	// Line is the line's number in the object (1-based, counting every
	// line of the decompressed body).
	Line  int
	Event event.Event
}

// Stats counts what an Events call read.
type Stats struct {
	// Objects and Bytes (compressed) are what was downloaded and read.
	Objects, Bytes int64
	// Lines counts the non-empty lines read.
	Lines int64
	// Events counts the events passed to fn: distinct and selected.
	Events int64
	// Duplicates counts lines whose identity came earlier in the same
	// table and hour (a re-archived tail, an overlapping object).
	Duplicates int64
	// Undecodable counts lines that do not decode (and bodies that could
	// not be decompressed, one each).
	Undecodable int64
	// Skipped counts distinct events outside the selection (another
	// kind or table in a shared file, a time outside [Since, Until) in a
	// selected hour).
	Skipped int64
}

// maxLine bounds one archive line: an archive line holds at most two
// 400 KB items in DynamoDB JSON; anything longer is not one the sinks
// wrote, and counts as undecodable.
const maxLine = 16 << 20

// Events reads the objects of sel and calls fn with every distinct event
// that sel selects, on the calling goroutine, one at a time. fn returning
// an error stops the read, and Events returns that error.
//
// Identity and de-duplication: an event's identity is its
// Metadata.eventID, plus, for a dead letter, the failing sink
// (DeadLetter.sink), as the S3 sink resolves conflicts; a line without an
// event ID is identified by its bytes. The first line of an identity is
// passed on, later ones are counted as duplicates, across every object of
// a table and hour, the overlapping objects a re-delivered tail makes and
// the .HASH12. objects of a key conflict included. An event's table and
// creation hour are its partition, so a duplicate never lies in another
// one; memory for de-duplication is therefore proportional to the
// distinct event IDs of one table and hour, held until the read moves on.
//
// Order: objects are read by hour, then table. Within a table's hour,
// the S3 layout's objects of one shard whose SHARD-FIRSTSEQ-LASTSEQ
// ranges overlap (the kinds of one shard, a re-archived tail, a conflict's
// distinct key) form a group whose lines are merged by sequence number;
// groups are read in order of their first sequence number (a child
// shard's numbers are above its parent's), and a file sink's file is read
// line by line as written. So, for each item (key), events come in the
// order of their creation hour and then their sequence number, which is
// the order the stream recorded them and, for REMOVEs, the order the item
// was deleted in. Between different items no order is promised.
//
// Memory: up to Options.Parallel objects are downloaded at once, and
// compressed bodies downloaded and not yet read are bounded by
// Options.MaxBufferBytes (one overlapping group larger than that is read
// alone); lines are decompressed and decoded one at a time.
//
// Undecodable lines are counted in Stats.Undecodable and reported to
// Options.OnBadLine; the read goes on. A failure to list or download
// (after retries) ends it with an error.
func (a *Archive) Events(ctx context.Context, sel Selection, fn func(Line) error) (Stats, error) {
	objs, err := a.Objects(ctx, sel)
	if err != nil {
		return Stats{}, err
	}
	groups := plan(objs)
	a.prog.start(objs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := budget.New(a.o.MaxBufferBytes)
	jobs, wait := a.fetch(ctx, groups, b)
	defer func() {
		cancel()
		for range jobs {
		}
		wait()
	}()
	r := &reader{a: a, sel: &sel, fn: fn}
	for j := range jobs {
		select {
		case <-j.done:
		case <-ctx.Done():
			return r.stats, ctx.Err()
		}
		if j.err != nil {
			return r.stats, j.err
		}
		err := r.group(j)
		b.Release(j.g.size)
		if err != nil {
			return r.stats, err
		}
	}
	return r.stats, ctx.Err()
}

// group is objects read together: one object, or objects of one shard
// and hour whose sequence ranges overlap (their lines are merged).
type group struct {
	objs []Object
	size int64
}

// plan groups objs and orders the groups (see Events): by hour, table,
// first sequence number, key.
func plan(objs []Object) []group {
	sorted := slices.Clone(objs)
	slices.SortFunc(sorted, func(x, y Object) int {
		return cmp.Or(x.Hour.Compare(y.Hour), strings.Compare(x.Table, y.Table), strings.Compare(x.Shard, y.Shard),
			event.CompareSequence(x.FirstSeq, y.FirstSeq), strings.Compare(x.Key, y.Key))
	})
	var out []group
	var last string // the highest LastSeq of the open group
	for _, o := range sorted {
		if n := len(out); n > 0 && o.Shard != "" {
			p := &out[n-1].objs[0]
			if p.Shard == o.Shard && p.Table == o.Table && p.Hour.Equal(o.Hour) && event.CompareSequence(o.FirstSeq, last) <= 0 {
				out[n-1].objs = append(out[n-1].objs, o)
				out[n-1].size += o.Size
				if event.CompareSequence(o.LastSeq, last) > 0 {
					last = o.LastSeq
				}
				continue
			}
		}
		out = append(out, group{objs: []Object{o}, size: o.Size})
		last = o.LastSeq
	}
	slices.SortStableFunc(out, func(x, y group) int {
		a, b := &x.objs[0], &y.objs[0]
		return cmp.Or(a.Hour.Compare(b.Hour), strings.Compare(a.Table, b.Table),
			event.CompareSequence(a.FirstSeq, b.FirstSeq), strings.Compare(a.Key, b.Key))
	})
	return out
}

// job is one group being downloaded; done closes once every body is in
// (or one failed: err).
type job struct {
	g      group
	bodies [][]byte
	encs   []string
	left   atomic.Int32
	mu     sync.Mutex
	err    error
	done   chan struct{}
}

func (j *job) finish(i int, body []byte, enc string, err error) {
	j.mu.Lock()
	j.bodies[i], j.encs[i] = body, enc
	if err != nil && j.err == nil {
		j.err = err
	}
	j.mu.Unlock()
	if j.left.Add(-1) == 0 {
		close(j.done)
	}
}

// fetch downloads the groups in order with Options.Parallel workers, each
// group only once b admits its size, and sends every group's job in order
// as soon as its downloads start. The channel closes when every group was
// sent or ctx ended; wait returns once every goroutine ended.
func (a *Archive) fetch(ctx context.Context, groups []group, b *budget.Budget) (<-chan *job, func()) {
	type task struct {
		j *job
		i int
	}
	jobs := make(chan *job, a.o.Parallel)
	tasks := make(chan task)
	var wg sync.WaitGroup
	for range a.o.Parallel {
		wg.Go(func() {
			for t := range tasks {
				o := &t.j.g.objs[t.i]
				body, enc, err := a.st.get(ctx, o.Key, o.Size)
				if err != nil {
					err = fmt.Errorf("archive %s: reading %s: %w", a.url, o.Key, err)
				}
				t.j.finish(t.i, body, enc, err)
			}
		})
	}
	wg.Go(func() {
		defer close(jobs)
		defer close(tasks)
		for _, g := range groups {
			if b.Acquire(ctx, g.size, nil) != nil {
				return
			}
			j := &job{g: g, bodies: make([][]byte, len(g.objs)), encs: make([]string, len(g.objs)), done: make(chan struct{})}
			j.left.Store(int32(len(g.objs)))
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
			for i := range g.objs {
				select {
				case tasks <- task{j, i}:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	return jobs, wg.Wait
}

// reader passes the lines of downloaded groups on, de-duplicated and
// filtered.
type reader struct {
	a     *Archive
	sel   *Selection
	fn    func(Line) error
	stats Stats
	// scope is the table and hour whose identities seen holds.
	scopeTable string
	scopeHour  time.Time
	seen       map[string]struct{}
	buf        []byte
}

// group reads one downloaded group, merging its objects' lines by
// sequence number.
func (r *reader) group(j *job) error {
	first := &j.g.objs[0]
	if r.seen == nil || first.Table != r.scopeTable || !first.Hour.Equal(r.scopeHour) {
		r.scopeTable, r.scopeHour, r.seen = first.Table, first.Hour, map[string]struct{}{}
	}
	var srcs sourceHeap
	defer func() {
		for _, s := range srcs {
			s.close()
		}
	}()
	for i := range j.g.objs {
		o := &j.g.objs[i]
		r.stats.Objects++
		r.stats.Bytes += o.Size
		s := &source{r: r, obj: o, idx: i}
		if s.open(j.bodies[i], j.encs[i]) && s.next() {
			srcs = append(srcs, s)
		} else {
			s.close()
		}
		j.bodies[i] = nil
	}
	heap.Init(&srcs)
	for len(srcs) > 0 {
		s := srcs[0]
		if err := r.emit(s); err != nil {
			return err
		}
		if s.next() {
			heap.Fix(&srcs, 0)
		} else {
			s.close()
			heap.Pop(&srcs)
		}
	}
	for i := range j.g.objs {
		r.a.prog.objectsDone.Add(1)
		r.a.prog.bytesDone.Add(j.g.objs[i].Size)
	}
	return nil
}

// emit passes a source's current line on unless its identity came before
// or the selection leaves it out.
func (r *reader) emit(s *source) error {
	_, dup := r.seen[s.id]
	if r.a.o.OnLine != nil {
		r.a.o.OnLine(s.obj, &s.cur, dup)
	}
	if dup {
		r.stats.Duplicates++
		return nil
	}
	r.seen[s.id] = struct{}{}
	l := s.cur
	e := &l.Event
	if !r.sel.wantsTable(e.Table) || !r.sel.wantsKind(e.Kind) || !r.sel.wantsTime(e.ApproximateCreationTime) {
		r.stats.Skipped++
		return nil
	}
	r.stats.Events++
	r.a.prog.events.Add(1)
	return r.fn(l)
}

func (r *reader) bad(obj string, line int, err error) {
	r.stats.Undecodable++
	if r.a.o.OnBadLine != nil {
		r.a.o.OnBadLine(obj, line, err)
	}
}

// Identity returns an event's identity in an archive: its event ID, and
// for a dead letter also the failing sink ("" when the event has no ID).
func Identity(e *event.Event) string {
	if e.EventID == "" {
		return ""
	}
	id := "event:" + e.EventID
	if e.DeadLetter != nil {
		id += "\x00dead-letter:" + e.DeadLetter.Sink
	}
	return id
}

// source is one object's lines, decoded one ahead.
type source struct {
	r       *reader
	obj     *Object
	idx     int
	br      *bufio.Reader
	closeFn func()
	line    int
	cur     Line
	id      string
}

// open starts decompressing body; false (reported as a bad line 1) when
// the body's compression is broken.
func (s *source) open(body []byte, enc string) bool {
	zr, closeFn, err := sinks.Decompress(bytes.NewReader(body), enc, s.obj.Key)
	if err != nil {
		s.r.bad(s.obj.Key, 1, err)
		return false
	}
	s.closeFn = closeFn
	s.br = bufio.NewReaderSize(zr, 256<<10)
	return true
}

func (s *source) close() {
	if s.closeFn != nil {
		s.closeFn()
		s.closeFn = nil
	}
}

// next decodes the object's next line into cur, reporting lines that do
// not decode; false at the end (or at a body that breaks off).
func (s *source) next() bool {
	for {
		line, tooLong, err := readLine(s.br, s.r.buf[:0])
		s.r.buf = line[:0]
		if err == io.EOF && len(line) == 0 && !tooLong {
			return false
		}
		s.line++
		if err != nil && err != io.EOF {
			s.r.bad(s.obj.Key, s.line, fmt.Errorf("reading the body: %w", err))
			return false
		}
		switch {
		case tooLong:
			s.r.stats.Lines++
			s.r.bad(s.obj.Key, s.line, fmt.Errorf("line longer than %d bytes", maxLine))
		case len(bytes.TrimSpace(line)) == 0:
			// An empty line holds nothing; it is not counted.
		default:
			s.r.stats.Lines++
			if s.decode(line) {
				return true
			}
		}
		if err == io.EOF {
			return false
		}
	}
}

// decode makes line the current one; false (reported) when it does not
// decode.
func (s *source) decode(line []byte) bool {
	e, ok := fastDecodeLine(line)
	if !ok {
		var err error
		if e, err = event.DecodeLine(line); err != nil {
			s.r.bad(s.obj.Key, s.line, err)
			return false
		}
	}
	s.cur = Line{Object: s.obj.Key, Line: s.line, Event: e}
	s.id = Identity(&e)
	if s.id == "" {
		sum := sha256.Sum256(bytes.TrimSpace(line))
		s.id = "line:" + hex.EncodeToString(sum[:])
	}
	return true
}

// readLine reads one line (without its newline) into buf. A line longer
// than maxLine is consumed and reported as tooLong (its bytes dropped).
func readLine(br *bufio.Reader, buf []byte) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(frag) > maxLine+1 {
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		return buf, tooLong, err
	}
}

// sourceHeap orders sources by their current line's sequence number, then
// by position in the group.
type sourceHeap []*source

func (h sourceHeap) Len() int { return len(h) }
func (h sourceHeap) Less(i, j int) bool {
	if c := event.CompareSequence(h[i].cur.Event.SequenceNumber, h[j].cur.Event.SequenceNumber); c != 0 {
		return c < 0
	}
	return h[i].idx < h[j].idx
}
func (h sourceHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sourceHeap) Push(x any)   { *h = append(*h, x.(*source)) }
func (h *sourceHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}
