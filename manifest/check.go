package manifest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

// Stored is one manifest as found in an archive: its key, the digest of
// its stored bytes and its content.
type Stored struct {
	Key    string
	Digest string
	M      Manifest
	// EndOnly: of its shard's manifests only the last (by To, with its
	// conflict copies) was read, because a windowed read found all of the
	// shard's records before its window. [Check] proves nothing of such a
	// shard (see Result.Outside); the manifest still serves as the
	// predecessor its child's first manifest names by digest, and tells
	// whether the shard ended.
	EndOnly bool
}

// The kinds of a [Finding].
const (
	// FindGap: no manifest covers a range between two that do.
	FindGap = "gap"
	// FindTrimmed: records were trimmed from the stream before the
	// archiver read them: the shard's first records, before it first read
	// the shard (From ""), or records after From.
	FindTrimmed = "trimmed"
	// FindSkipped: the archiver started reading the shard at LATEST
	// (--start latest): the records before the first one read were
	// skipped on purpose.
	FindSkipped = "skipped"
	// FindChain: a manifest names a previous manifest that is not there
	// with that digest: it was removed or edited.
	FindChain = "chain"
	// FindParent: a shard's parent was not recorded to its end, though
	// the child was read.
	FindParent = "parent"
)

// Finding is one thing [Check] could not prove, in one shard: a missing
// range (From, To], with the creation times around it where known.
type Finding struct {
	Kind   string    `json:"kind"`
	Stream string    `json:"stream"`
	Region string    `json:"region,omitempty"`
	Table  string    `json:"table"`
	Shard  string    `json:"shard"`
	From   string    `json:"from,omitempty"`
	To     string    `json:"to,omitempty"`
	After  time.Time `json:"after,omitzero"`  // the last record before the gap
	Before time.Time `json:"before,omitzero"` // the first record after it
	Detail string    `json:"detail"`
}

// Shard is what the manifests prove about one shard: its records were
// read from Start (exclusive; "" = the shard's start) through To, without
// a gap when Gaps is zero; Ended when it was read to its end.
type Shard struct {
	Stream    string           `json:"stream"`
	Region    string           `json:"region,omitempty"`
	Table     string           `json:"table"`
	Shard     string           `json:"shard"`
	Parent    string           `json:"parent,omitempty"`
	Start     string           `json:"start"`
	To        string           `json:"to"`
	Ended     bool             `json:"ended"`
	Manifests int              `json:"manifests"`
	Records   int64            `json:"records"`
	Events    map[string]int64 `json:"events"`
	// DeadLettered counts dead-lettered events by reason.
	DeadLettered map[string]int64 `json:"deadLettered,omitempty"`
	// Covered are the ranges proven, merged: [from, to] pairs, from
	// exclusive ("" = the shard's start).
	Covered [][2]string `json:"covered"`
	Gaps    int         `json:"gaps"`
	// Begun: the first range does not start at the shard's start and
	// names no previous manifest: the archive was written before it
	// recorded manifests ("no coverage information" before Start).
	Begun bool `json:"begunMidShard,omitempty"`
}

// Result is what [Check] proves.
type Result struct {
	Shards   []Shard   `json:"shards"`
	Findings []Finding `json:"findings"`
	// Outside are the shards whose manifests are all EndOnly: read at
	// their end only, not checked. Start and To are the From and To of
	// their last range; Manifests counts the manifests read.
	Outside []Shard `json:"outside,omitempty"`
}

// Check proves from an archive's manifests alone that each shard was read
// contiguously: from its start (or from where recording began, for an
// archive older than its manifests) to its end, or to its newest manifest
// while it is open; that every manifest's predecessor is there with the
// digest it names; and that a shard's parent was recorded to its end. It
// returns what each shard's manifests cover and every finding. Objects
// and lines are the reader's to check against the manifests. A shard whose
// manifests are all EndOnly is not checked: it is in Result.Outside.
func Check(all []Stored) Result {
	byDigest := map[string]*Stored{}
	shards := map[[2]string][]*Stored{}
	for i := range all {
		s := &all[i]
		byDigest[s.Digest] = s
		k := [2]string{s.M.Stream, s.M.Shard}
		shards[k] = append(shards[k], s)
	}
	keys := slices.Collect(maps.Keys(shards))
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	var res Result
	for _, k := range keys {
		ms := shards[k]
		slices.SortFunc(ms, func(a, b *Stored) int {
			return cmp.Or(event.CompareSequence(a.M.To, b.M.To), compareFrom(a.M.From, b.M.From), cmp.Compare(a.Key, b.Key))
		})
		if !slices.ContainsFunc(ms, func(s *Stored) bool { return !s.EndOnly }) {
			res.Outside = append(res.Outside, endsOf(ms))
			continue
		}
		sh, fs := checkShard(ms, byDigest)
		res.Shards = append(res.Shards, sh)
		res.Findings = append(res.Findings, fs...)
	}
	res.Findings = append(res.Findings, checkParents(res.Shards, shards)...)
	return res
}

// endsOf is what a shard read at its end only says of itself, unproven.
func endsOf(ms []*Stored) Shard {
	first, last := ms[0].M, ms[len(ms)-1].M
	return Shard{Stream: first.Stream, Region: first.Region, Table: first.Table, Shard: first.Shard, Parent: first.Parent,
		Start: earliestFrom(ms), To: last.To, Ended: slices.ContainsFunc(ms, func(s *Stored) bool { return s.M.Ended }),
		Manifests: len(ms), Events: map[string]int64{}}
}

// compareFrom orders From values, the shard's start ("") first.
func compareFrom(a, b string) int {
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

// checkShard walks one shard's manifests, sorted by To.
func checkShard(ms []*Stored, byDigest map[string]*Stored) (Shard, []Finding) {
	first := ms[0].M
	sh := Shard{Stream: first.Stream, Region: first.Region, Table: first.Table, Shard: first.Shard, Parent: first.Parent,
		Start: earliestFrom(ms), Events: map[string]int64{}}
	var fs []Finding
	find := func(kind, from, to string, after, before time.Time, detail string) {
		fs = append(fs, Finding{Kind: kind, Stream: sh.Stream, Region: sh.Region, Table: sh.Table, Shard: sh.Shard,
			From: from, To: to, After: after, Before: before, Detail: detail})
	}
	end, endTime := "", time.Time{}
	unread := map[[2]string]bool{} // (From, First) of the Trimmed told
	for i, s := range ms {
		m := s.M
		if t := m.Trimmed; t != nil && !unread[[2]string{m.From, t.First}] {
			unread[[2]string{m.From, t.First}] = true
			kind, detail := trimmedFinding(m.From, t)
			find(kind, m.From, t.First, time.Time{}, t.Time, detail)
		}
		sh.Manifests++
		sh.Records += m.Records
		add(sh.Events, m.Events)
		if len(m.DeadLettered) > 0 {
			if sh.DeadLettered == nil {
				sh.DeadLettered = map[string]int64{}
			}
			add(sh.DeadLettered, m.DeadLettered)
		}
		sh.Ended = sh.Ended || m.Ended
		switch {
		case i == 0:
			sh.Covered = [][2]string{{m.From, m.To}}
			sh.Begun = m.From != "" && m.Prev == ""
		case compareFrom(m.From, end) > 0:
			sh.Gaps++
			find(FindGap, end, m.From, endTime, m.FirstTime,
				fmt.Sprintf("no manifest covers the records after %s up to %s", end, m.From))
			sh.Covered = append(sh.Covered, [2]string{m.From, m.To})
		default:
			last := &sh.Covered[len(sh.Covered)-1]
			if event.CompareSequence(m.To, last[1]) > 0 {
				last[1] = m.To
			}
		}
		if event.CompareSequence(m.To, end) > 0 || end == "" {
			end, endTime = m.To, m.LastTime
		}
		if d := checkPrev(s, ms, byDigest); d != "" {
			find(FindChain, m.From, m.To, time.Time{}, m.FirstTime, d)
		}
	}
	sh.To = end
	return sh, fs
}

// trimmedFinding is the kind and the detail of a finding about records a
// range did not read (Manifest.Trimmed).
func trimmedFinding(from string, t *Trimmed) (kind, detail string) {
	switch {
	case t.Skipped:
		return FindSkipped, fmt.Sprintf("records before %s were not read: the archiver started reading the shard at LATEST (--start latest)", t.First)
	case from == "":
		return FindTrimmed, "records before the first one read had been trimmed from the stream before the archiver first read the shard"
	}
	return FindTrimmed, fmt.Sprintf("records after %s before %s were trimmed from the stream before the archiver read them", from, t.First)
}

// earliestFrom is the From of the range that begins first.
func earliestFrom(ms []*Stored) string {
	f := ms[0].M.From
	for _, s := range ms[1:] {
		if compareFrom(s.M.From, f) < 0 {
			f = s.M.From
		}
	}
	return f
}

// checkPrev checks that s's predecessor is there with the digest s names:
// a manifest of its shard ending at its From, or for a range at the
// shard's start its parent's last. It returns what is wrong, or "".
func checkPrev(s *Stored, shard []*Stored, byDigest map[string]*Stored) string {
	m := s.M
	if m.Prev == "" {
		if m.From != "" && hasTo(shard, m.From) {
			return fmt.Sprintf("the range after %s names no previous manifest, though one ends there", m.From)
		}
		return ""
	}
	p, ok := byDigest[m.Prev]
	switch {
	case !ok && m.From == "":
		return fmt.Sprintf("the last manifest of its parent shard %s (SHA-256 %.12s…) is missing or was edited", m.Parent, m.Prev)
	case !ok:
		return fmt.Sprintf("the manifest of the range ending at %s (SHA-256 %.12s…) is missing or was edited", m.From, m.Prev)
	case m.From == "" && (p.M.Shard != m.Parent || p.M.Stream != m.Stream || !p.M.Ended):
		return fmt.Sprintf("its previous manifest is not its parent %s's last (it is %s)", m.Parent, p.Key)
	case m.From != "" && (p.M.Shard != m.Shard || p.M.Stream != m.Stream || p.M.To != m.From):
		return fmt.Sprintf("its previous manifest does not end at %s (it is %s)", m.From, p.Key)
	}
	return ""
}

func hasTo(ms []*Stored, to string) bool {
	for _, s := range ms {
		if s.M.To == to {
			return true
		}
	}
	return false
}

// checkParents finds children whose parent has manifests but none that
// ended: the child was read before its parent was read to its end. A
// parent read at its end only (EndOnly) is judged by its last manifest.
func checkParents(shards []Shard, byShard map[[2]string][]*Stored) []Finding {
	var fs []Finding
	for _, sh := range shards {
		if sh.Parent == "" {
			continue
		}
		parent, ok := byShard[[2]string{sh.Stream, sh.Parent}]
		if !ok || slices.ContainsFunc(parent, func(s *Stored) bool { return s.M.Ended }) {
			continue
		}
		fs = append(fs, Finding{Kind: FindParent, Stream: sh.Stream, Region: sh.Region, Table: sh.Table, Shard: sh.Parent,
			Detail: fmt.Sprintf("parent of %s: recorded, but never to its end", sh.Shard)})
	}
	return fs
}

func add(dst, src map[string]int64) {
	for k, n := range src {
		dst[k] += n
	}
}
