package archive

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

// Report is what a [Verifier] found in an archive: what `archiver verify`
// prints (as tables, or as this JSON).
type Report struct {
	Archive string `json:"archive"`
	Objects int64  `json:"objects"`
	// Bytes are the bytes read as stored; CompressedBytes the part of
	// them in compressed objects.
	Bytes           int64 `json:"bytes"`
	CompressedBytes int64 `json:"compressedBytes"`
	// Lines counts non-empty lines.
	Lines int64 `json:"lines"`
	// Events counts distinct identities (event ID, or for an expiry with
	// its old image the ID it has in every Region; plus the sink of a
	// dead letter) in the selection.
	Events      int64 `json:"distinctEvents"`
	Duplicates  int64 `json:"duplicates"`
	Undecodable int64 `json:"undecodableLines"`
	// BadLines says where the undecodable lines are (the first
	// MaxListed).
	BadLines []BadLine `json:"badLines"`
	// Partitions counts events per table, kind and UTC day of deletion.
	Partitions []Partition `json:"partitions"`
	// Mismatches are objects whose lines contradict their key (the first
	// MaxListed, by key).
	Mismatches []Problem `json:"mismatches"`
	// StrayKeys are keys off the archive layout, skipped (the first
	// MaxListed).
	StrayKeys []Problem `json:"strayKeys"`
}

// BadLine is a line that does not decode.
type BadLine struct {
	Object string `json:"object"`
	Line   int    `json:"line"`
	Error  string `json:"error"`
}

// Partition is the distinct events of one table, kind and UTC day, and
// their earliest and latest deletion (creation) time.
type Partition struct {
	Table  string     `json:"table"`
	Kind   event.Kind `json:"kind"`
	Day    string     `json:"day"`
	Events int64      `json:"events"`
	First  time.Time  `json:"firstDeletion"`
	Last   time.Time  `json:"lastDeletion"`
}

// Problem is something wrong with one object.
type Problem struct {
	Object  string `json:"object"`
	Problem string `json:"problem"`
}

// MaxListed bounds the bad lines and problems a Report lists; all are
// counted.
const MaxListed = 1000

// Verifier builds a Report while an archive is read: pass its hooks to
// Open (Hook), call Event for every event Events yields, then Finish.
// Its memory is one small record per object and per partition.
type Verifier struct {
	rep   Report
	parts map[partKey]*Partition
	objs  map[string]*objCheck
	// The last object and partition, which the next line most likely
	// falls in again (a map lookup spared).
	lastObj  *objCheck
	lastKey  partKey
	lastPart *Partition
}

type partKey struct {
	table string
	kind  event.Kind
	day   int // days since the epoch (UTC)
}

// objCheck is what one object's lines said, against its key.
type objCheck struct {
	o         Object
	low, high string // lowest and highest sequence number seen
	problem   string // the first mismatch found
}

// NewVerifier returns an empty Verifier.
func NewVerifier() *Verifier {
	return &Verifier{parts: map[partKey]*Partition{}, objs: map[string]*objCheck{}}
}

// Hook returns o with the Verifier's OnBadLine, OnBadKey and OnLine set
// (replacing o's).
func (v *Verifier) Hook(o Options) Options {
	o.OnBadLine, o.OnBadKey, o.OnLine = v.badLine, v.badKey, v.line
	return o
}

func (v *Verifier) badLine(obj string, line int, err error) {
	if len(v.rep.BadLines) < MaxListed {
		v.rep.BadLines = append(v.rep.BadLines, BadLine{Object: obj, Line: line, Error: err.Error()})
	}
}

func (v *Verifier) badKey(key string, err error) {
	if len(v.rep.StrayKeys) < MaxListed {
		v.rep.StrayKeys = append(v.rep.StrayKeys, Problem{Object: key, Problem: err.Error()})
	}
}

// line checks every decoded line (duplicates too) against its object's
// key.
func (v *Verifier) line(o *Object, l *Line, _ bool) {
	c := v.lastObj
	if c == nil || c.o.Key != o.Key {
		if c = v.objs[o.Key]; c == nil {
			c = &objCheck{o: *o}
			v.objs[o.Key] = c
		}
		v.lastObj = c
	}
	switch seq := l.Event.SequenceNumber; {
	case c.high == "":
		c.low, c.high = seq, seq
	case event.CompareSequence(seq, c.high) > 0: // the usual case: lines in order
		c.high = seq
	case event.CompareSequence(seq, c.low) < 0:
		c.low = seq
	}
	if c.problem == "" {
		if p := o.Mismatch(&l.Event); p != "" {
			c.problem = fmt.Sprintf("line %d: %s", l.Line, p)
		}
	}
}

// Event counts one event Events yielded.
func (v *Verifier) Event(e *event.Event) {
	t := e.ApproximateCreationTime.UTC()
	k := partKey{e.Table, e.Kind, int(t.Unix() / 86400)}
	if t.Unix() < 0 && t.Unix()%86400 != 0 {
		k.day-- // floor before 1970
	}
	p := v.lastPart
	if p == nil || k != v.lastKey {
		if p = v.parts[k]; p == nil {
			p = &Partition{Table: k.table, Kind: k.kind, Day: t.Format("2006-01-02"), First: t, Last: t}
			v.parts[k] = p
		}
		v.lastKey, v.lastPart = k, p
	}
	p.Events++
	if t.Before(p.First) {
		p.First = t
	} else if t.After(p.Last) {
		p.Last = t
	}
}

// Finish completes the report of the archive at url from the read's
// stats: an object of the S3 layout whose lines span other sequence
// numbers than its key names is a mismatch too.
func (v *Verifier) Finish(url string, st Stats) *Report {
	r := &v.rep
	r.Archive = url
	r.Objects, r.Bytes, r.CompressedBytes, r.Lines = st.Objects, st.Bytes, st.CompressedBytes, st.Lines
	r.Events, r.Duplicates, r.Undecodable = st.Events, st.Duplicates, st.Undecodable
	for _, p := range v.parts {
		r.Partitions = append(r.Partitions, *p)
	}
	slices.SortFunc(r.Partitions, func(a, b Partition) int {
		return cmp.Or(strings.Compare(a.Table, b.Table), strings.Compare(string(a.Kind), string(b.Kind)), strings.Compare(a.Day, b.Day))
	})
	for _, c := range v.objs {
		if c.problem == "" && c.o.FirstSeq != "" && (c.low != c.o.FirstSeq || c.high != c.o.LastSeq) {
			c.problem = fmt.Sprintf("holds sequence numbers %s-%s, the key says %s-%s", c.low, c.high, c.o.FirstSeq, c.o.LastSeq)
		}
		if c.problem != "" {
			r.Mismatches = append(r.Mismatches, Problem{Object: c.o.Key, Problem: c.problem})
		}
	}
	slices.SortFunc(r.Mismatches, func(a, b Problem) int { return strings.Compare(a.Object, b.Object) })
	r.Mismatches = r.Mismatches[:min(len(r.Mismatches), MaxListed)]
	r.BadLines = orEmpty(r.BadLines)
	r.Partitions = orEmpty(r.Partitions)
	r.Mismatches = orEmpty(r.Mismatches)
	r.StrayKeys = orEmpty(r.StrayKeys)
	return r
}

// orEmpty makes a nil list an empty one, so JSON shows [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
