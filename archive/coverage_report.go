package archive

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
)

// The verdicts of a [CoverageReport].
const (
	VerdictComplete   = "complete"
	VerdictIncomplete = "incomplete"
	VerdictNone       = "none" // no manifests: no coverage information
)

// CoverageReport is what a [Coverage] proved of an archive: `archiver
// verify`'s verdict, its table per shard and its findings.
type CoverageReport struct {
	// Verdict is VerdictComplete, VerdictIncomplete (a finding) or
	// VerdictNone (the archive holds no manifests); Summary says it in
	// one line.
	Verdict string `json:"verdict"`
	Summary string `json:"summary"`
	// Manifests counts the manifests that decode; Lineages the shard
	// lineages they record (a shard with its descendants).
	Manifests int `json:"manifests"`
	Lineages  int `json:"lineages"`
	// ObjectsListed counts the distinct objects the manifests list;
	// ObjectsVerified those found with the size and SHA-256 every
	// listing says; ObjectsNotRead those outside the selection's
	// partitions (--since, --until), not read and not checked.
	ObjectsListed   int `json:"objectsListed"`
	ObjectsVerified int `json:"objectsVerified"`
	ObjectsNotRead  int `json:"objectsNotRead"`
	// ShardsOutside counts the shards whose records all lie before
	// --since by their last manifest, which alone was read
	// (ManifestsNotRead counts the others): they are not in Shards, and
	// their chains are not checked.
	ShardsOutside    int `json:"shardsOutsideWindow"`
	ManifestsNotRead int `json:"manifestsNotRead"`
	// PendingLines are lines after their open shard's newest manifest
	// (not recorded yet), in PendingObjects objects no manifest lists.
	PendingLines   int64 `json:"pendingLines"`
	PendingObjects int   `json:"pendingObjects"`
	// LeftoverCopies counts objects no manifest lists whose every event
	// in a covered range a listed object holds too (a range re-read
	// after a crash and cut into other objects).
	LeftoverCopies int `json:"leftoverCopies"`
	// UnrecordedLines are lines no manifest can speak for: of shards
	// without manifests, or before the range where recording began.
	UnrecordedLines int64 `json:"unrecordedLines"`
	// Shards are what the manifests prove per shard, by stream and shard.
	Shards []CoverageShard `json:"shards"`
	// Findings are what could not be proven (the first MaxListed);
	// FindingsTotal counts them all.
	Findings      []CoverageFinding `json:"findings"`
	FindingsTotal int               `json:"findingsTotal"`
	// OtherKeys are files under _manifests/ that are not .json (skipped).
	OtherKeys []string `json:"otherKeys"`
}

// CoverageShard is one shard's proof (manifest.Check's), the creation
// times of its first and last covered records, the objects its manifests
// list, and its lines read.
type CoverageShard struct {
	manifest.Shard
	FirstTime    time.Time `json:"firstRecordTime,omitzero"`
	LastTime     time.Time `json:"lastRecordTime,omitzero"`
	Objects      int       `json:"objects"`
	Lines        int64     `json:"lines"`
	PendingLines int64     `json:"pendingLines"`
	// NewestManifest is the key of the shard's manifest with the highest
	// To, and NewestDigest its SHA-256: what the next manifest will name,
	// and what to keep elsewhere to anchor the chain (docs/VERIFY.md).
	NewestManifest string `json:"newestManifest"`
	NewestDigest   string `json:"newestDigest"`
	// NewestWritten and NewestWriter are when, and by which worker (run's
	// --worker-id, the ECS task ID or HOSTNAME-PID), the newest manifest
	// says it was written: a shard whose proof stops early names the task
	// that last proved it.
	NewestWritten time.Time `json:"newestWritten,omitzero"`
	NewestWriter  string    `json:"newestWriter,omitempty"`
}

// CoverageFinding is one thing the archive's manifests could not prove,
// in one shard (manifest.Finding), with the manifest, object and lines
// concerned.
type CoverageFinding struct {
	manifest.Finding
	// Manifest is the key of the manifest concerned: the one listing a
	// missing or altered object, or one that is not a manifest.
	Manifest string `json:"manifest,omitempty"`
	// Object is the key of the object concerned; Line and LastLine its
	// first and last line outside coverage, Lines how many there are.
	Object   string `json:"object,omitempty"`
	Line     int    `json:"line,omitempty"`
	LastLine int    `json:"lastLine,omitempty"`
	Lines    int64  `json:"lines,omitempty"`
	// InStream are the stream's REMOVE records in a gap (verify --table,
	// while the stream still holds them): what the archive should hold.
	InStream []GapRecord `json:"inStream,omitempty"`
}

// GapRecord is a stream record in a gap, and whether the archive holds
// its event all the same.
type GapRecord struct {
	StreamRemove
	Archived bool `json:"archived"`
}

// Holds reports whether a stream record lies in the finding's shard and
// range.
func (f *CoverageFinding) Holds(r *StreamRemove) bool {
	return r.Stream == f.Stream && r.Shard == f.Shard && event.ValidSequence(r.Sequence) &&
		(f.From == "" || event.CompareSequence(r.Sequence, f.From) > 0) && (f.To == "" || event.CompareSequence(r.Sequence, f.To) <= 0)
}

// Finish completes the report once Events has read the archive.
func (c *Coverage) Finish() *CoverageReport {
	c.endRun()
	r := &CoverageReport{Manifests: len(c.set.Stored), ObjectsListed: len(c.listed) + len(c.notRead), ObjectsNotRead: len(c.notRead),
		UnrecordedLines: c.unrecorded, OtherKeys: orEmpty(c.set.Other), ShardsOutside: len(c.res.Outside), ManifestsNotRead: c.set.NotRead}
	var fs []CoverageFinding
	for _, f := range c.res.Findings {
		fs = append(fs, CoverageFinding{Finding: f})
	}
	for _, b := range c.set.Bad {
		fs = append(fs, CoverageFinding{Finding: manifest.Finding{Kind: FindManifest, Detail: b.Problem}, Manifest: b.Object})
	}
	fs = append(fs, c.checkObjects(r)...)
	for _, f := range c.outside {
		fs = append(fs, *f)
	}
	c.countObjects(r)
	for _, sc := range c.order {
		r.UnrecordedLines += sc.before
		r.PendingLines += sc.pending
		r.Shards = append(r.Shards, CoverageShard{Shard: sc.sh, FirstTime: sc.first, LastTime: sc.last,
			Objects: len(sc.objects) + len(sc.notRead), Lines: sc.lines, PendingLines: sc.pending, NewestManifest: sc.newest.Key, NewestDigest: sc.newest.Digest,
			NewestWritten: sc.newest.M.Written, NewestWriter: sc.newest.M.Writer})
	}
	r.Shards = orEmpty(r.Shards)
	r.Lineages = lineages(r.Shards)
	for i := range fs {
		fs[i].Detail = detail(&fs[i])
	}
	slices.SortFunc(fs, compareFindings)
	r.FindingsTotal = len(fs)
	r.Verdict, r.Summary = c.verdict(r, fs)
	r.Findings = orEmpty(fs[:min(len(fs), MaxListed)])
	return r
}

// checkObjects checks every object the manifests list against what the
// read found, counting those verified and not read.
func (c *Coverage) checkObjects(r *CoverageReport) []CoverageFinding {
	var fs []CoverageFinding
	for key, lo := range c.listed {
		oc := c.objs[key]
		if oc == nil || !oc.read {
			o, err := ParseKey(strings.TrimPrefix(key, c.root))
			switch {
			case err != nil || skipDir(strings.TrimPrefix(key, c.root)):
				lo.stray = true // not an object the reader reads
			case !c.sel.wantsObject(&o):
				r.ObjectsNotRead++
				continue
			}
		}
		bad := 0
		for _, e := range lo.entries {
			if d := objectProblem(oc, lo, &e); d != "" {
				bad++
				m := &e.s.M
				kind := FindAltered
				if oc == nil || !oc.read {
					kind = FindMissing
				}
				fs = append(fs, CoverageFinding{Finding: manifest.Finding{Kind: kind, Stream: m.Stream, Region: m.Region, Table: m.Table,
					Shard: m.Shard, From: m.From, To: m.To, Detail: d}, Manifest: e.s.Key, Object: key})
			}
		}
		if bad == 0 {
			r.ObjectsVerified++
		}
	}
	return fs
}

// objectProblem says how an object read (oc; nil or unread: not found)
// differs from one manifest's listing of it, "" when it does not.
func objectProblem(oc *objCov, lo *listedObject, e *listing) string {
	switch {
	case lo.stray:
		return "its key does not follow the archive layout: not an object the archiver writes"
	case oc == nil || !oc.read:
		return "not in the archive"
	}
	d, o := &oc.digest, e.o
	switch {
	case o.Bytes == d.Size && o.SHA256 == d.SHA256:
		return ""
	case o.Bytes == d.Size:
		return fmt.Sprintf("its SHA-256 is %.12s…, the manifest says %.12s…", d.SHA256, o.SHA256)
	case o.Bytes < d.Size && d.Prefixes != nil:
		if p, ok := d.Prefixes[o.Bytes]; ok && p == o.SHA256 {
			return ""
		} else if ok {
			return fmt.Sprintf("the SHA-256 of its first %d bytes is %.12s…, the manifest says %.12s…", o.Bytes, p, o.SHA256)
		}
	}
	return fmt.Sprintf("%d bytes, the manifest says %d", d.Size, o.Bytes)
}

// countObjects counts the unlisted objects read: leftover copies and
// objects of pending lines only.
func (c *Coverage) countObjects(r *CoverageReport) {
	for _, oc := range c.objs {
		switch {
		case oc.listed != nil || oc.outside > 0:
		case oc.copies > 0:
			r.LeftoverCopies++
		case oc.pending > 0:
			r.PendingObjects++
		}
	}
}

// lineages counts the shards without a parent among them.
func lineages(shards []CoverageShard) int {
	have := map[shardKey]bool{}
	for _, s := range shards {
		have[shardKey{s.Stream, s.Shard.Shard}] = true
	}
	n := 0
	for _, s := range shards {
		if s.Parent == "" || !have[shardKey{s.Stream, s.Parent}] {
			n++
		}
	}
	return n
}

// findingRank orders a shard's findings: its manifests' first, then its
// objects', then its lines'.
var findingRank = map[string]int{manifest.FindTrimmed: 0, manifest.FindGap: 1, manifest.FindChain: 2, manifest.FindParent: 3,
	FindManifest: 4, FindMissing: 5, FindAltered: 6, FindOutside: 7}

func compareFindings(a, b CoverageFinding) int {
	return cmp.Or(strings.Compare(a.Table, b.Table), strings.Compare(a.Region, b.Region), strings.Compare(a.Stream, b.Stream),
		strings.Compare(a.Shard, b.Shard), cmp.Compare(findingRank[a.Kind], findingRank[b.Kind]), compareSeqOrStart(a.From, b.From),
		strings.Compare(a.Manifest, b.Manifest), strings.Compare(a.Object, b.Object), cmp.Compare(a.Line, b.Line))
}

// compareSeqOrStart orders sequence numbers, "" (the shard's start)
// first.
func compareSeqOrStart(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return -1
	case b == "":
		return 1
	}
	return event.CompareSequence(a, b)
}

// detail is a finding's sentence.
func detail(f *CoverageFinding) string {
	switch f.Kind {
	case manifest.FindTrimmed:
		return fmt.Sprintf("records before %s, created before %s, were trimmed before the archiver first read the shard", f.To, timeOrUnknown(f.Before))
	case manifest.FindGap:
		return fmt.Sprintf("no manifest covers the records after %s up to %s, created between %s and %s", f.From, f.To,
			timeOrUnknown(f.After), timeOrUnknown(f.Before))
	case FindMissing, FindAltered:
		return fmt.Sprintf("%s: %s (listed by %s, range %s)", f.Object, f.Detail, f.Manifest, describe(f.From, f.To))
	case FindOutside:
		return fmt.Sprintf("%s: %s outside coverage: %s", f.Object, linesText(f), outsideWhy(f))
	case FindManifest:
		return fmt.Sprintf("%s: %s", f.Manifest, f.Detail)
	}
	return f.Detail
}

func linesText(f *CoverageFinding) string {
	if f.Lines == 1 {
		return fmt.Sprintf("line %d", f.Line)
	}
	return fmt.Sprintf("%d lines from line %d to %d", f.Lines, f.Line, f.LastLine)
}

// outsideWhy says why lines lie outside coverage, by their range (a
// Detail of "unlisted": a covered range whose manifests do not list the
// object).
func outsideWhy(f *CoverageFinding) string {
	switch {
	case f.Detail == "window":
		return "its shard was read at its end only, which put every record of it before --since; verify with --whole-chains checks these lines"
	case f.Detail == "unlisted":
		return fmt.Sprintf("in the range %s, whose manifests do not list this object, and no object they list holds these events",
			describe(f.From, f.To))
	case f.To == "":
		return fmt.Sprintf("after %s, where the shard ended", f.From)
	case f.From == "":
		return fmt.Sprintf("no manifest covers the shard's records up to %s", f.To)
	}
	return fmt.Sprintf("in the gap after %s up to %s, which no manifest covers", f.From, f.To)
}

// outsideNote says how many shards before --since were read at their end
// only, and how many of their manifests were not read.
func outsideNote(r *CoverageReport) string {
	return fmt.Sprintf("%s before --since read at their end only, %s not read",
		plural(r.ShardsOutside, "shard"), plural(r.ManifestsNotRead, "manifest"))
}

func timeOrUnknown(t time.Time) string {
	if t.IsZero() {
		return "(unknown)"
	}
	return t.UTC().Format(time.RFC3339)
}

// verdict is the report's verdict and its one-line summary.
func (c *Coverage) verdict(r *CoverageReport, fs []CoverageFinding) (string, string) {
	if r.Manifests == 0 && r.FindingsTotal == 0 {
		what := "this archive holds no manifests"
		if len(c.sel.Tables) > 0 {
			what = "this archive holds no manifests of " + strings.Join(c.sel.Tables, ", ")
		}
		return VerdictNone, "no coverage information: " + what + " (written before archiver run recorded them)"
	}
	shards := fmt.Sprintf("%s in %s", plural(len(r.Shards), "shard"), plural(r.Lineages, "lineage"))
	if r.FindingsTotal > 0 {
		byKind := map[string]int{}
		affected := map[shardKey]bool{}
		for _, f := range fs {
			byKind[f.Kind]++
			affected[shardKey{f.Stream, f.Shard}] = true
		}
		var parts []string
		for _, k := range slices.SortedFunc(maps.Keys(byKind), func(a, b string) int { return cmp.Compare(findingRank[a], findingRank[b]) }) {
			parts = append(parts, fmt.Sprintf("%d %s", byKind[k], k))
		}
		s := fmt.Sprintf("INCOMPLETE: %s (%s); %s, %d of %d listed objects verified",
			plural(r.FindingsTotal, "finding"), strings.Join(parts, ", "), shards, r.ObjectsVerified, r.ObjectsListed)
		if r.ShardsOutside > 0 {
			s += "; " + outsideNote(r)
		}
		return VerdictIncomplete, s
	}
	s := fmt.Sprintf("complete: %s covered, %s verified", shards, plural(r.ObjectsVerified, "object"))
	var notes []string
	if r.PendingLines > 0 {
		notes = append(notes, fmt.Sprintf("%s pending after the newest manifests", plural64(r.PendingLines, "line")))
	}
	if r.LeftoverCopies > 0 {
		notes = append(notes, plural(r.LeftoverCopies, "leftover copy", "leftover copies"))
	}
	if r.UnrecordedLines > 0 {
		notes = append(notes, fmt.Sprintf("%s without coverage information (written before recording began)", plural64(r.UnrecordedLines, "line")))
	}
	if r.ObjectsNotRead > 0 {
		notes = append(notes, fmt.Sprintf("%s outside --since/--until not read", plural(r.ObjectsNotRead, "listed object")))
	}
	if r.ShardsOutside > 0 {
		notes = append(notes, outsideNote(r))
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
	}
	return VerdictComplete, s
}

// plural is "1 shard", "2 shards" (or the plural form given).
func plural(n int, one string, many ...string) string {
	if n == 1 {
		return "1 " + one
	}
	if len(many) > 0 {
		return fmt.Sprintf("%d %s", n, many[0])
	}
	return fmt.Sprintf("%d %ss", n, one)
}

func plural64(n int64, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}
