package archive

import (
	"context"
	"fmt"
	"hash/maphash"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
)

// The kinds of a [CoverageFinding] besides manifest.Check's (gap,
// trimmed, chain, parent).
const (
	// FindManifest: a file under _manifests/ that is not a manifest, or
	// a manifest stored elsewhere than the archiver puts it.
	FindManifest = "manifest"
	// FindMissing: an object a manifest lists is not in the archive.
	FindMissing = "missing"
	// FindAltered: an object a manifest lists has another size or
	// SHA-256 than the manifest says.
	FindAltered = "altered"
	// FindOutside: lines of an object whose sequence numbers no manifest
	// covers (a gap, before a shard's first range, after its end), or
	// that lie in a covered range in an object no manifest of the shard
	// lists while no listed object holds their event.
	FindOutside = "outside"
)

// Coverage checks an archive against its coverage manifests (package
// manifest) while the archive is read: manifest.Check's proof over the
// manifests; every object a manifest lists, against the size and SHA-256
// of the bytes the read downloaded (a file sink's growing file: of the
// prefix the manifest saw); and every line's stream, shard and sequence
// number against the ranges its shard's manifests cover.
//
// Use: NewCoverage; pass Hook's Options to Open (after the Verifier's
// Hook, whose hooks it calls on); Load the manifests; read with Events,
// with the Selection given to NewCoverage; then Finish. Its memory is the
// manifests, one small record per object read and per shard, and one run
// of lines of one sequence number. A manifest's objects outside the
// selection's partitions (--since, --until, --kind), which the read does
// not reach, are kept as a 64-bit hash of their key each, for counting: of
// such a manifest, only its place in its shard's chain is held. With a
// Since, a shard whose records all precede it is read at its last manifest
// only (see [Coverage.WholeChains]).
type Coverage struct {
	sel    Selection
	root   string // what keys read start with before the part relative to the archive's root
	set    ManifestSet
	res    manifest.Result
	shards map[shardKey]*shardCov
	order  []*shardCov // as res.Shards
	// listed are the objects manifests list, by key as read; objs the
	// objects read, by key.
	listed  map[string]*listedObject
	objs    map[string]*objCov
	outside map[outsideKey]*CoverageFinding
	// The last object and shard a line fell in, which the next most
	// likely falls in again.
	lastObj   *objCov
	lastShard *shardCov // nil: lastKey has no manifest
	lastKey   shardKey
	lastKnown bool
	run       seqRun
	// unrecorded counts lines of shards that have no manifest.
	unrecorded int64
	// notRead holds the listed objects outside the selection's
	// partitions, by a hash of their key (seed): not read, only counted.
	seed    maphash.Seed
	notRead map[uint64]struct{}
	// whole: read every manifest even with a window (WholeChains).
	whole bool
}

type shardKey struct{ stream, shard string }

// shardCov is one shard's proof and what its lines said.
type shardCov struct {
	sh          manifest.Shard
	first, last time.Time        // creation times of its first and last covered records
	newest      *manifest.Stored // the manifest with the highest To
	objects     map[string]bool
	notRead     map[uint64]struct{} // hashes of listed objects not read, as Coverage.notRead
	idx         int                 // the covered range the last line fell in
	lines       int64
	pending     int64
	before      int64 // lines before recording began (Begun)
	// ends: the shard was read at its end only (manifest.Result.Outside):
	// none of its lines is expected, and each is a finding.
	ends bool
}

// listedObject is an object some manifests list: each listing, and the
// shards whose manifests list it.
type listedObject struct {
	entries []listing
	shards  []*shardCov
	stray   bool // listed, and its key is off the archive layout
}

type listing struct {
	s *manifest.Stored
	o *manifest.Object // in s.M.Objects, which nothing changes after load
}

// objCov is one object read: its digest and what its lines said.
type objCov struct {
	key    string
	listed *listedObject // nil: no manifest lists it
	digest Digest
	read   bool
	// Lines: copies of events a listed object holds too, pending (after
	// the newest manifest), outside coverage (findings).
	copies, pending, outside int64
}

// listedFor reports whether a manifest of sc lists the object.
func (o *objCov) listedFor(sc *shardCov) bool {
	if o.listed == nil {
		return false
	}
	for _, s := range o.listed.shards {
		if s == sc {
			return true
		}
	}
	return false
}

type outsideKey struct {
	obj      *objCov
	sc       *shardCov
	from, to string
	// covered: the range is covered, by manifests that do not list the
	// object, while no object they list holds the lines' events.
	covered bool
	// window: the shard was read at its end only (shardCov.ends).
	window bool
}

// NewCoverage returns a Coverage of the events sel selects: manifests of
// sel's tables, and objects in its partitions (listed objects outside
// them are not read, and counted as such).
func NewCoverage(sel Selection) *Coverage {
	return &Coverage{sel: sel, shards: map[shardKey]*shardCov{}, listed: map[string]*listedObject{},
		objs: map[string]*objCov{}, outside: map[outsideKey]*CoverageFinding{},
		seed: maphash.MakeSeed(), notRead: map[uint64]struct{}{}}
}

// WholeChains makes Load read every manifest of the selected tables even
// when the selection has a Since, so the chains of the shards before it
// are checked too; by default those are read at their end only (see
// manifest.Stored.EndOnly). Call it before Load.
func (c *Coverage) WholeChains() { c.whole = true }

// Hook returns o with the Coverage's OnObject and DigestPrefixes set, and
// OnLine and OnBadKey that call o's own after the Coverage's.
func (c *Coverage) Hook(o Options) Options {
	nextLine, nextKey := o.OnLine, o.OnBadKey
	o.OnLine = func(obj *Object, l *Line, dup bool) {
		c.line(obj, l)
		if nextLine != nil {
			nextLine(obj, l, dup)
		}
	}
	o.OnBadKey = func(key string, err error) {
		if lo := c.listed[key]; lo != nil {
			lo.stray = true
		}
		if nextKey != nil {
			nextKey(key, err)
		}
	}
	o.OnObject, o.HashObject = c.object, c.hashObject
	return o
}

// Load reads the archive's manifests (as Archive.Manifests does, but only
// those in the selected tables' folders) and proves what they cover
// (manifest.Check). It must be called before Events.
func (c *Coverage) Load(ctx context.Context, a *Archive) error {
	// Another table's manifests cost verify --table neither memory nor
	// requests.
	f := manifestFilter{keep: c.wantsManifest, trim: c.trim}
	if !c.whole && !c.sel.Since.IsZero() {
		f.reaches = c.reaches
	}
	set, notRead, err := a.manifestsWhere(ctx, f)
	if err != nil {
		return err
	}
	c.load(set, notRead, a.st.root())
	return nil
}

// windowMargin widens the selection's window, whole hours, when a
// shard's last manifest decides whether its records may reach it: a
// shard's records come in creation-time order, give or take the clock's
// rounding.
const windowMargin = time.Hour

// reaches is manifestFilter.reaches: whether a shard whose last manifests
// (by To, with the conflict copies sharing it) are these may hold records
// at or after the selection's Since. Its records were created up to the
// latest record those ranges hold; an ended shard's empty last range
// shares its To with the range before it, which holds them. When none
// holds a record the shard is read whole: a manifest's writing time is
// the writer's clock, which may be off. Only Since skips a shard: that
// last manifest is anchored by digest, named by its child's first (see
// manifestFilter.reaches), and its records are later than all its
// ancestors'; a shard's first record time has no such anchor, so shards
// after Until are read whole.
func (c *Coverage) reaches(last []manifest.Stored) bool {
	if c.sel.Since.IsZero() {
		return true
	}
	var hi time.Time
	for _, s := range last {
		if s.M.LastTime.After(hi) {
			hi = s.M.LastTime
		}
	}
	return hi.IsZero() || !hi.Before(c.sel.Since.Truncate(time.Hour).Add(-windowMargin))
}

// trim drops from a manifest the objects the read will not reach (their
// partitions lie outside the selection) and returns their keys' hashes.
// Objects whose keys do not follow the layout stay: they are findings.
func (c *Coverage) trim(s *manifest.Stored) []uint64 {
	var gone []uint64
	kept := s.M.Objects[:0]
	for _, o := range s.M.Objects {
		if p, err := ParseKey(o.Key); err == nil && !skipDir(o.Key) && !c.sel.wantsObject(&p) {
			gone = append(gone, maphash.String(c.seed, o.Key))
		} else {
			kept = append(kept, o)
		}
	}
	clear(s.M.Objects[len(kept):]) // what the backing array still held of the others
	if len(kept) == 0 {
		kept = nil
	}
	s.M.Objects = kept
	return gone
}

// load proves what the manifests of set cover, those of the selected
// tables, and indexes the objects they list; notRead (nil, or one per
// manifest of set) holds what trim returned for each; root is what keys
// read start with before the part relative to the archive's root.
func (c *Coverage) load(set ManifestSet, notRead [][]uint64, root string) {
	c.root = root
	stored := set.Stored[:0:0]
	var gone [][]uint64
	for i, s := range set.Stored {
		if c.sel.wantsTable(s.M.Table) {
			stored = append(stored, s)
			if notRead != nil {
				gone = append(gone, notRead[i])
			}
		}
	}
	set.Stored = stored
	bad := set.Bad[:0:0]
	for _, b := range set.Bad {
		if c.wantsManifest(strings.TrimPrefix(b.Object, c.root)) {
			bad = append(bad, b)
		}
	}
	set.Bad = bad
	c.set = set
	c.res = manifest.Check(stored)
	// The counts by kind and reason are summed into c.res's shards; each
	// manifest's own maps, a few hundred bytes each, are not read again.
	for i := range stored {
		stored[i].M.Events, stored[i].M.DeadLettered = nil, nil
	}
	for i := range c.res.Shards {
		sh := c.res.Shards[i]
		sc := &shardCov{sh: sh, objects: map[string]bool{}}
		c.shards[shardKey{sh.Stream, sh.Shard}] = sc
		c.order = append(c.order, sc)
	}
	for _, sh := range c.res.Outside {
		c.shards[shardKey{sh.Stream, sh.Shard}] = &shardCov{sh: sh, objects: map[string]bool{}, ends: true}
	}
	for i := range c.set.Stored {
		s := &c.set.Stored[i]
		sc := c.shards[shardKey{s.M.Stream, s.M.Shard}]
		sc.times(&s.M)
		if sc.newest == nil || event.CompareSequence(s.M.To, sc.newest.M.To) >= 0 {
			sc.newest = s
		}
		if gone != nil {
			c.notReadBy(sc, gone[i])
		}
		c.index(sc, s)
	}
}

// notReadBy counts the hashes of objects a manifest of sc lists that the
// read will not reach.
func (c *Coverage) notReadBy(sc *shardCov, hashes []uint64) {
	if len(hashes) > 0 && sc.notRead == nil {
		sc.notRead = map[uint64]struct{}{}
	}
	for _, h := range hashes {
		c.notRead[h] = struct{}{}
		sc.notRead[h] = struct{}{}
	}
}

// index records the objects s, a manifest of sc, lists.
func (c *Coverage) index(sc *shardCov, s *manifest.Stored) {
	for j := range s.M.Objects {
		o := &s.M.Objects[j]
		key := c.root + o.Key
		lo := c.listed[key]
		if lo == nil {
			lo = &listedObject{}
			c.listed[key] = lo
		}
		lo.entries = append(lo.entries, listing{s, o})
		if !sc.objects[key] {
			sc.objects[key] = true
			lo.shards = append(lo.shards, sc)
		}
	}
}

// wantsManifest reports whether the manifest at rel (relative to the
// archive's root) is in a selected table's folder, or in none that
// unescapes (then its problem is reported whatever the selection).
func (c *Coverage) wantsManifest(rel string) bool {
	t, ok := manifestTable(rel)
	return !ok || c.sel.wantsTable(t)
}

// manifestTable is the table a manifest's key names (false when it names
// none that unescapes).
func manifestTable(rel string) (string, bool) {
	seg, _, _ := strings.Cut(strings.TrimPrefix(rel, manifest.Dir), "/")
	esc, ok := strings.CutPrefix(seg, "table=")
	if !ok {
		return "", false
	}
	t, err := url.PathUnescape(esc)
	return t, err == nil
}

// times widens the shard's first and last covered record times by m's.
func (sc *shardCov) times(m *manifest.Manifest) {
	if !m.FirstTime.IsZero() && (sc.first.IsZero() || m.FirstTime.Before(sc.first)) {
		sc.first = m.FirstTime
	}
	if m.LastTime.After(sc.last) {
		sc.last = m.LastTime
	}
}

// hashObject is Options.HashObject: an object a manifest lists is
// hashed, and for a file sink's file (it grows; an S3 object never does)
// the prefixes its manifests saw; others are not.
func (c *Coverage) hashObject(o *Object) ([]int64, bool) {
	lo := c.listed[o.Key]
	if lo == nil || o.Kind != "" {
		return nil, lo != nil
	}
	out := make([]int64, 0, len(lo.entries))
	for _, e := range lo.entries {
		out = append(out, e.o.Bytes)
	}
	return out, true
}

// object is Options.OnObject: it keeps the object's digest.
func (c *Coverage) object(o *Object, d Digest) {
	oc := c.obj(o)
	oc.digest, oc.read = d, true
}

// obj returns the record of an object read.
func (c *Coverage) obj(o *Object) *objCov {
	if oc := c.lastObj; oc != nil && oc.key == o.Key {
		return oc
	}
	oc := c.objs[o.Key]
	if oc == nil {
		oc = &objCov{key: o.Key, listed: c.listed[o.Key]}
		c.objs[o.Key] = oc
	}
	c.lastObj = oc
	return oc
}

// shard returns the record of the line's shard, nil when no manifest
// records it.
func (c *Coverage) shard(e *event.Event) *shardCov {
	if c.lastKnown && c.lastKey.shard == e.ShardID && c.lastKey.stream == e.StreamARN {
		return c.lastShard
	}
	k := shardKey{e.StreamARN, e.ShardID}
	c.lastShard, c.lastKey, c.lastKnown = c.shards[k], k, true
	return c.lastShard
}

// Where a sequence number lies in its shard's coverage.
type place uint8

const (
	placeCovered place = iota // in a range a manifest covers
	placePending              // after the newest manifest of an open shard
	placeBefore               // before recording began (an archive older than its manifests)
	placeOutside              // in a gap, before the shard's first range, or after its end
)

// locate says where seq lies, and the range: the covered one, or the
// uncovered one it lies in ((from, to], to "" for after an ended shard's
// end).
func (sc *shardCov) locate(seq string) (p place, from, to string) {
	cov := sc.sh.Covered
	if i := sc.idx; i < len(cov) && inRange(seq, cov[i]) {
		return placeCovered, cov[i][0], cov[i][1]
	}
	i := sort.Search(len(cov), func(i int) bool { return event.CompareSequence(cov[i][1], seq) >= 0 })
	switch {
	case i == len(cov) && !sc.sh.Ended:
		return placePending, sc.sh.To, ""
	case i == len(cov):
		return placeOutside, sc.sh.To, ""
	case inRange(seq, cov[i]):
		sc.idx = i
		return placeCovered, cov[i][0], cov[i][1]
	case i == 0 && sc.sh.Begun:
		return placeBefore, "", cov[0][0]
	case i == 0:
		return placeOutside, "", cov[0][0]
	}
	return placeOutside, cov[i-1][1], cov[i][0]
}

// inRange reports whether seq lies in (r[0], r[1]], r[0] "" being the
// shard's start.
func inRange(seq string, r [2]string) bool {
	return (r[0] == "" || event.CompareSequence(seq, r[0]) > 0) && event.CompareSequence(seq, r[1]) <= 0
}

// line is Options.OnLine: it places one line (duplicates included) in its
// shard's coverage.
func (c *Coverage) line(o *Object, l *Line) {
	if len(c.shards) == 0 {
		return // no manifest: nothing to place lines in
	}
	oc := c.obj(o)
	e := &l.Event
	sc := c.shard(e)
	if sc == nil || !event.ValidSequence(e.SequenceNumber) {
		c.unrecorded++
		return
	}
	sc.lines++
	if sc.ends {
		c.outsideLines(outsideKey{obj: oc, sc: sc, window: true}, l.Line, l.Line, 1)
		return
	}
	if c.run.sc != sc || c.run.seq != e.SequenceNumber {
		c.endRun()
		c.run.sc, c.run.seq = sc, e.SequenceNumber
	}
	p, from, to := sc.locate(e.SequenceNumber)
	switch p {
	case placeCovered:
		if oc.listedFor(sc) {
			c.run.listed |= kindBit(e.Kind)
		} else {
			c.run.from, c.run.to = from, to
			c.run.add(oc, kindBit(e.Kind), l.Line)
		}
	case placePending:
		sc.pending++
		oc.pending++
	case placeBefore:
		sc.before++
	default:
		c.outsideLines(outsideKey{obj: oc, sc: sc, from: from, to: to}, l.Line, l.Line, 1)
	}
}

// seqRun is the lines of one shard's sequence number read so far (they
// come together: the reader merges one shard's overlapping objects by
// sequence number): the kinds listed objects hold, and the lines of
// objects no manifest of the shard lists, which are leftover copies when
// a listed object holds their event too, and outside coverage when none
// does.
type seqRun struct {
	sc       *shardCov
	seq      string
	from, to string // the covered range, for unlisted
	listed   uint8
	unlisted []unlistedLines
}

// unlistedLines are consecutive lines of one kind of one unlisted object.
type unlistedLines struct {
	oc          *objCov
	kind        uint8
	first, last int
	n           int64
}

func (r *seqRun) add(oc *objCov, kind uint8, line int) {
	if n := len(r.unlisted); n > 0 && r.unlisted[n-1].oc == oc && r.unlisted[n-1].kind == kind {
		u := &r.unlisted[n-1]
		u.last, u.n = line, u.n+1
		return
	}
	r.unlisted = append(r.unlisted, unlistedLines{oc: oc, kind: kind, first: line, last: line, n: 1})
}

// endRun settles the run's unlisted lines.
func (c *Coverage) endRun() {
	r := &c.run
	for _, u := range r.unlisted {
		if r.listed&u.kind != 0 {
			u.oc.copies += u.n
		} else {
			c.outsideLines(outsideKey{obj: u.oc, sc: r.sc, from: r.from, to: r.to, covered: true}, u.first, u.last, u.n)
		}
	}
	r.unlisted, r.listed = r.unlisted[:0], 0
}

// outsideLines records n lines (first to last) of an object outside
// coverage: one finding per object, shard and range.
func (c *Coverage) outsideLines(k outsideKey, first, last int, n int64) {
	k.obj.outside += n
	f := c.outside[k]
	if f == nil {
		sh := &k.sc.sh
		f = &CoverageFinding{Finding: manifest.Finding{Kind: FindOutside, Stream: sh.Stream, Region: sh.Region, Table: sh.Table,
			Shard: sh.Shard, From: k.from, To: k.to}, Object: k.obj.key, Line: first}
		switch {
		case k.covered:
			f.Detail = "unlisted"
		case k.window:
			f.Detail = "window"
		}
		c.outside[k] = f
	}
	f.Line, f.LastLine = min(f.Line, first), max(f.LastLine, last)
	f.Lines += n
}

// kindBit is a kind as a bit of seqRun.listed.
func kindBit(k event.Kind) uint8 {
	switch k {
	case event.Expired:
		return 1
	case event.Deleted:
		return 2
	case event.Inserted:
		return 4
	case event.Modified:
		return 8
	}
	return 16
}

// describe says where a range lies, for a finding's detail: "(from, to]",
// from "" being the shard's start and to "" past its end.
func describe(from, to string) string {
	switch {
	case to == "":
		return fmt.Sprintf("after %s, the shard's end", from)
	case from == "":
		return fmt.Sprintf("up to %s, from the shard's start", to)
	}
	return fmt.Sprintf("(%s, %s]", from, to)
}
