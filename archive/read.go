package archive

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/budget"
	"github.com/ttl-archiver/archiver/parquetline"
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
	// Objects and Bytes are what was downloaded and read, bytes as stored.
	Objects, Bytes int64
	// CompressedBytes is the part of Bytes in compressed objects (.gz,
	// .zst, .parquet).
	CompressedBytes int64
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
// (An object whose key contradicts its lines, which archiver verify
// lists, is de-duplicated within the partition its key names.)
//
// Order: objects are read by hour, then table, then Region (the S3 key
// names it; a key written before keys named it comes first). Within a
// table's hour and Region, the S3 layout's objects of one shard whose
// SHARD-FIRSTSEQ-LASTSEQ ranges overlap (the kinds of one shard, a
// re-archived tail, a conflict's distinct key) form a group whose lines
// are merged by sequence number; groups are read in order of their first
// sequence number (a child shard's numbers are above its parent's), and a
// file sink's file is read line by line as written. So, for each item (key), events come in the
// order of their creation hour and then their sequence number, which is
// the order the stream recorded them and, for REMOVEs, the order the item
// was deleted in; two Regions' streams share no order, so a global
// table's item has its Regions' events in that order within each Region
// only. Between different items no order is promised.
//
// Memory: up to Options.Parallel objects are downloaded at once, and
// compressed bodies downloaded and not yet read are bounded by
// Options.MaxBufferBytes (one overlapping group larger than that is read
// alone). The next groups are decompressed and decoded ahead on other
// goroutines, each object a few hundred lines at a time, so decoded lines
// in memory are bounded too (see decodeDepth).
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
	if a.o.OnObject != nil && a.o.HashObject != nil {
		for i := range groups {
			g := &groups[i]
			g.hash = make([]hashReq, len(g.objs))
			for k := range g.objs {
				g.hash[k].prefixes, g.hash[k].hash = a.o.HashObject(&g.objs[k])
			}
		}
	}
	a.prog.start(objs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := budget.New(a.o.MaxBufferBytes)
	jobs, waitFetch := a.fetch(ctx, groups, b)
	ready, waitDecode := decodeAhead(ctx, jobs, a.o.SkipImages)
	defer func() {
		cancel()
		for range ready {
		}
		waitDecode()
		waitFetch()
	}()
	r := &reader{a: a, sel: &sel, fn: fn}
	for j := range ready {
		if j.err != nil {
			return r.stats, j.err
		}
		err := r.group(ctx, j)
		b.Release(j.g.size)
		if err != nil {
			return r.stats, err
		}
	}
	return r.stats, ctx.Err()
}

// group is objects read together: one object, or objects of one shard
// and hour whose sequence ranges overlap (their lines are merged).
//
// crossRegion says that the group's partition (table and hour) may hold
// two Regions' records of one expiry: its keys name more than one Region
// (a key written before keys named it counts as one more), or it has a
// file sink's file, whose name says nothing of Regions. Its expiries are
// then identified by the ID they have in every Region (event.IDHasher, a
// SHA-256 of the line's head, about 0.3 us a line); a partition of one
// Region's keys cannot hold another Region's copy, and its lines keep
// their event IDs' identity, which costs nothing.
type group struct {
	objs        []Object
	size        int64
	crossRegion bool
	// hash says, by object, whether to hash it and its prefixes
	// (Options.HashObject); nil when none is.
	hash []hashReq
}

// hashReq is whether to hash an object's stored bytes, and which of
// their prefixes.
type hashReq struct {
	hash     bool
	prefixes []int64
}

// plan groups objs and orders the groups (see Events): by hour, table,
// Region, first sequence number, key.
func plan(objs []Object) []group {
	sorted := slices.Clone(objs)
	slices.SortFunc(sorted, func(x, y Object) int {
		return cmp.Or(x.Hour.Compare(y.Hour), strings.Compare(x.Table, y.Table), strings.Compare(x.Region, y.Region),
			strings.Compare(x.Shard, y.Shard), event.CompareSequence(x.FirstSeq, y.FirstSeq), strings.Compare(x.Key, y.Key))
	})
	var out []group
	var last string // the highest LastSeq of the open group
	for _, o := range sorted {
		if n := len(out); n > 0 && o.Shard != "" {
			p := &out[n-1].objs[0]
			if p.Shard == o.Shard && p.Region == o.Region && p.Table == o.Table && p.Hour.Equal(o.Hour) && event.CompareSequence(o.FirstSeq, last) <= 0 {
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
	markCrossRegion(out)
	slices.SortStableFunc(out, func(x, y group) int {
		a, b := &x.objs[0], &y.objs[0]
		return cmp.Or(a.Hour.Compare(b.Hour), strings.Compare(a.Table, b.Table), strings.Compare(a.Region, b.Region),
			event.CompareSequence(a.FirstSeq, b.FirstSeq), strings.Compare(a.Key, b.Key))
	})
	return out
}

// markCrossRegion sets crossRegion on the groups whose partition (table
// and hour) holds objects of more than one Region, or a file sink's
// file. groups are in plan's first order: by hour, table and Region.
func markCrossRegion(groups []group) {
	for i := 0; i < len(groups); {
		first := &groups[i].objs[0]
		j, cross := i, false
		for ; j < len(groups) && groups[j].objs[0].Table == first.Table && groups[j].objs[0].Hour.Equal(first.Hour); j++ {
			for k := range groups[j].objs {
				if o := &groups[j].objs[k]; o.Kind == "" || o.Region != first.Region {
					cross = true
				}
			}
		}
		for ; i < j; i++ {
			groups[i].crossRegion = cross
		}
	}
}

// job is one group being downloaded; done closes once every body is in
// (or one failed: err).
type job struct {
	g      group
	bodies [][]byte
	encs   []string
	// digests are the objects' digests, when Options.OnObject wants them.
	digests []Digest
	left    atomic.Int32
	mu      sync.Mutex
	err     error
	done    chan struct{}
	// dec holds each object's decoded lines, in chunks (see decodeAhead),
	// and free takes back the chunks read, for the decoder to fill again.
	dec, free []chan chunk
}

func (j *job) finish(i int, body []byte, enc string, d Digest, err error) {
	j.mu.Lock()
	j.bodies[i], j.encs[i], j.digests[i] = body, enc, d
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
				d := Digest{Size: int64(len(body))}
				switch {
				case err != nil:
					err = fmt.Errorf("archive %s: reading %s: %w", a.url, o.Key, err)
				case t.j.g.hash != nil && t.j.g.hash[t.i].hash:
					// The stored bytes, hashed here on the downloading
					// worker: no second request, and in parallel.
					d = digestOf(body, t.j.g.hash[t.i].prefixes)
				}
				t.j.finish(t.i, body, enc, d, err)
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
			j := &job{g: g, bodies: make([][]byte, len(g.objs)), encs: make([]string, len(g.objs)), digests: make([]Digest, len(g.objs)),
				done: make(chan struct{})}
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
	seen       identitySet
}

// group reads one downloaded group, merging its objects' lines by
// sequence number.
func (r *reader) group(ctx context.Context, j *job) error {
	first := &j.g.objs[0]
	if first.Table != r.scopeTable || !first.Hour.Equal(r.scopeHour) {
		r.scopeTable, r.scopeHour = first.Table, first.Hour
		r.seen.reset()
	}
	var srcs sourceHeap
	for i := range j.g.objs {
		o := &j.g.objs[i]
		r.stats.Objects++
		r.stats.Bytes += o.Size
		if strings.HasSuffix(o.Key, ".gz") || strings.HasSuffix(o.Key, ".zst") || strings.HasSuffix(o.Key, parquetline.Ext) {
			r.stats.CompressedBytes += o.Size
		}
		if r.a.o.OnObject != nil {
			r.a.o.OnObject(o, j.digests[i])
		}
		s := &source{ctx: ctx, r: r, obj: o, idx: i, ch: j.dec[i], free: j.free[i]}
		if s.next() {
			srcs = append(srcs, s)
		}
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
			heap.Pop(&srcs)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
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
	dup := !r.seen.add(&s.cur.id)
	if r.a.o.OnLine != nil {
		r.a.o.OnLine(s.obj, &s.cur.line, dup)
	}
	if dup {
		r.stats.Duplicates++
		return nil
	}
	e := &s.cur.line.Event
	if !r.sel.wantsTable(e.Table) || !r.sel.wantsKind(e.Kind) || !r.sel.wantsTime(e.ApproximateCreationTime) {
		r.stats.Skipped++
		return nil
	}
	r.stats.Events++
	r.a.prog.events.Add(1)
	return r.fn(s.cur.line)
}

func (r *reader) bad(obj string, line int, err error) {
	r.stats.Undecodable++
	if r.a.o.OnBadLine != nil {
		r.a.o.OnBadLine(obj, line, err)
	}
}

// Identity returns an event's identity in an archive: the ID its expiry
// has in every Region, for an expiry with its old image (event.MessageID:
// a global table's Regions archive one expiry each), else its event ID,
// and for a dead letter the event ID, a NUL and the failing sink, so that
// dead letters of one event from two sinks stay apart ("" when the event
// has no ID).
func Identity(e *event.Event) string {
	if e.HasExpiryID() {
		return event.MessageID(e)
	}
	if e.EventID == "" || e.DeadLetter == nil {
		return e.EventID
	}
	return e.EventID + "\x00" + e.DeadLetter.Sink
}

// source is one object's decoded lines, as its decoder sends them.
type source struct {
	ctx   context.Context
	r     *reader
	obj   *Object
	idx   int
	ch    <-chan chunk
	free  chan<- chunk
	chunk chunk // what is left of whole
	whole chunk
	// cur is the current line, in whole: whole goes back to the decoder
	// only once next moved past its last line.
	cur *decoded
}

// next makes the object's next line current, reporting and counting the
// lines that did not decode on the way; false at the end.
func (s *source) next() bool {
	for {
		for len(s.chunk) == 0 {
			if s.whole != nil {
				select {
				case s.free <- s.whole[:0]:
				default:
				}
				s.whole = nil
			}
			var ok bool
			select {
			case s.whole, ok = <-s.ch:
				if !ok {
					return false
				}
				s.chunk = s.whole
			case <-s.ctx.Done():
				return false
			}
		}
		it := &s.chunk[0]
		s.chunk = s.chunk[1:]
		if it.counted {
			s.r.stats.Lines++
		}
		if it.err != nil {
			s.r.bad(s.obj.Key, it.line.Line, it.err)
			continue
		}
		s.cur = it
		return true
	}
}

// sourceHeap orders sources by their current line's sequence number, then
// by position in the group.
type sourceHeap []*source

func (h sourceHeap) Len() int { return len(h) }
func (h sourceHeap) Less(i, j int) bool {
	if c := event.CompareSequence(h[i].cur.line.Event.SequenceNumber, h[j].cur.line.Event.SequenceNumber); c != 0 {
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
