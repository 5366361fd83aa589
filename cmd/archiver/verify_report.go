package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/progress"
)

// verifyReport is what `archiver verify` found (printed as tables, or as
// JSON with --json).
type verifyReport struct {
	Archive string `json:"archive"`
	Objects int64  `json:"objects"`
	// Bytes are compressed bytes read.
	Bytes int64 `json:"bytes"`
	Lines int64 `json:"lines"`
	// Events counts distinct event identities (event ID, plus the sink of
	// a dead letter) in the selection.
	Events      int64 `json:"distinctEvents"`
	Duplicates  int64 `json:"duplicates"`
	Undecodable int64 `json:"undecodableLines"`
	// BadLines lists where the undecodable lines are (the first
	// maxListed of them).
	BadLines []verifyLine `json:"badLines"`
	// Partitions counts events per table, kind and UTC day of deletion.
	Partitions []verifyPartition `json:"partitions"`
	// Mismatches are objects whose key does not match their lines.
	Mismatches []verifyProblem `json:"mismatches"`
	// StrayKeys are keys that do not follow the archive layout (skipped).
	StrayKeys []verifyProblem `json:"strayKeys"`
	// Stream is the cross-check against the live stream (--table).
	Stream *verifyStream `json:"stream,omitempty"`
}

type verifyLine struct {
	Object string `json:"object"`
	Line   int    `json:"line"`
	Error  string `json:"error"`
}

type verifyPartition struct {
	Table string     `json:"table"`
	Kind  event.Kind `json:"kind"`
	Day   string     `json:"day"`
	// Events counts distinct events; First and Last are the earliest and
	// latest deletion (creation) times among them.
	Events int64     `json:"events"`
	First  time.Time `json:"firstDeletion"`
	Last   time.Time `json:"lastDeletion"`
}

type verifyProblem struct {
	Object  string `json:"object"`
	Problem string `json:"problem"`
}

type verifyStream struct {
	Table string `json:"table"`
	// Records counts the stream's REMOVE records of the archived kinds in
	// the selected time range; Archived those found in the archive.
	Records  int64          `json:"records"`
	Archived int64          `json:"archived"`
	Missing  []streamRemove `json:"missing"`
}

// maxListed bounds the bad lines and problems a report lists (all are
// counted).
const maxListed = 1000

type partKey struct {
	table string
	kind  event.Kind
	day   string
}

// objCheck is what one object's lines said, against its key.
type objCheck struct {
	o         archive.Object
	low, high string // lowest and highest sequence number seen
	problem   string // the first mismatch found
}

// verifier collects the report while the archive is read.
type verifier struct {
	rep     verifyReport
	parts   map[partKey]*verifyPartition
	objs    map[string]*objCheck
	stream  map[string]streamRemove
	records int64
}

func newVerifier(cfg *verifyConfig, inStream map[string]streamRemove) *verifier {
	v := &verifier{parts: map[partKey]*verifyPartition{}, objs: map[string]*objCheck{}, stream: inStream}
	if inStream != nil {
		v.rep.Stream = &verifyStream{Table: cfg.Table}
		v.records = int64(len(inStream))
	}
	return v
}

func (v *verifier) badLine(obj string, line int, err error) {
	if len(v.rep.BadLines) < maxListed {
		v.rep.BadLines = append(v.rep.BadLines, verifyLine{Object: obj, Line: line, Error: err.Error()})
	}
}

func (v *verifier) badKey(key string, err error) {
	if len(v.rep.StrayKeys) < maxListed {
		v.rep.StrayKeys = append(v.rep.StrayKeys, verifyProblem{Object: key, Problem: err.Error()})
	}
}

// line checks every decoded line (duplicates too) against its object's
// key.
func (v *verifier) line(o *archive.Object, l *archive.Line, _ bool) {
	c := v.objs[o.Key]
	if c == nil {
		c = &objCheck{o: *o}
		v.objs[o.Key] = c
	}
	seq := l.Event.SequenceNumber
	if c.low == "" || event.CompareSequence(seq, c.low) < 0 {
		c.low = seq
	}
	if c.high == "" || event.CompareSequence(seq, c.high) > 0 {
		c.high = seq
	}
	if c.problem == "" {
		if p := o.Mismatch(&l.Event); p != "" {
			c.problem = fmt.Sprintf("line %d: %s", l.Line, p)
		}
	}
}

// event counts one distinct event of the selection.
func (v *verifier) event(e *event.Event) {
	k := partKey{e.Table, e.Kind, e.ApproximateCreationTime.UTC().Format("2006-01-02")}
	p := v.parts[k]
	if p == nil {
		p = &verifyPartition{Table: k.table, Kind: k.kind, Day: k.day, First: e.ApproximateCreationTime.UTC(), Last: e.ApproximateCreationTime.UTC()}
		v.parts[k] = p
	}
	p.Events++
	if t := e.ApproximateCreationTime.UTC(); t.Before(p.First) {
		p.First = t
	} else if t.After(p.Last) {
		p.Last = t
	}
	if v.stream != nil && e.Table == v.rep.Stream.Table {
		delete(v.stream, e.EventID)
	}
}

// finish completes the report from the read's stats.
func (v *verifier) finish(st archive.Stats) *verifyReport {
	r := &v.rep
	r.Objects, r.Bytes, r.Lines, r.Events, r.Duplicates, r.Undecodable = st.Objects, st.Bytes, st.Lines, st.Events, st.Duplicates, st.Undecodable
	for _, p := range v.parts {
		r.Partitions = append(r.Partitions, *p)
	}
	slices.SortFunc(r.Partitions, func(a, b verifyPartition) int {
		return cmp.Or(strings.Compare(a.Table, b.Table), strings.Compare(string(a.Kind), string(b.Kind)), strings.Compare(a.Day, b.Day))
	})
	for _, c := range v.objs {
		if c.problem == "" && c.o.FirstSeq != "" && (c.low != c.o.FirstSeq || c.high != c.o.LastSeq) {
			c.problem = fmt.Sprintf("holds sequence numbers %s-%s, the key says %s-%s", c.low, c.high, c.o.FirstSeq, c.o.LastSeq)
		}
		if c.problem != "" {
			r.Mismatches = append(r.Mismatches, verifyProblem{Object: c.o.Key, Problem: c.problem})
		}
	}
	slices.SortFunc(r.Mismatches, func(a, b verifyProblem) int { return strings.Compare(a.Object, b.Object) })
	r.Mismatches = r.Mismatches[:min(len(r.Mismatches), maxListed)]
	if s := r.Stream; s != nil {
		s.Records, s.Archived = v.records, v.records-int64(len(v.stream))
		s.Missing = make([]streamRemove, 0, len(v.stream))
		for _, m := range v.stream {
			s.Missing = append(s.Missing, m)
		}
		slices.SortFunc(s.Missing, func(a, b streamRemove) int {
			return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.EventID, b.EventID))
		})
	}
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

// print writes the report as tables.
func (r *verifyReport) print(w io.Writer) error {
	tables := []progress.Table{progress.KV("archive "+r.Archive,
		"objects", r.Objects, "bytes (compressed)", r.Bytes, "lines", r.Lines,
		"distinct events", r.Events, "duplicates", r.Duplicates, "undecodable lines", r.Undecodable,
		"objects not matching their key", len(r.Mismatches), "keys off the layout (skipped)", len(r.StrayKeys))}
	parts := progress.Table{Title: "events by table, kind and day (UTC)", Header: []string{"table", "kind", "day", "events", "first deletion", "last deletion"}}
	for _, p := range r.Partitions {
		parts.Add(p.Table, p.Kind, p.Day, p.Events, p.First.Format(time.RFC3339), p.Last.Format(time.RFC3339))
	}
	tables = append(tables, parts)
	if len(r.BadLines) > 0 {
		t := progress.Table{Title: "lines that do not decode", Header: []string{"object", "line", "error"}}
		for _, b := range r.BadLines {
			t.Add(b.Object, b.Line, b.Error)
		}
		tables = append(tables, t)
	}
	tables = append(tables, problemTable("objects whose key does not match their contents", r.Mismatches),
		problemTable("keys that do not follow the archive layout (skipped)", r.StrayKeys))
	if s := r.Stream; s != nil {
		tables = append(tables, progress.KV("stream of "+s.Table+": REMOVE records in the 24 h window",
			"records", s.Records, "in the archive", s.Archived, "missing", len(s.Missing)))
		if len(s.Missing) > 0 {
			t := progress.Table{Title: "missing from the archive", Header: []string{"event ID", "deleted", "shard"}}
			for _, m := range s.Missing {
				t.Add(m.EventID, m.Created.Format(time.RFC3339), m.Shard)
			}
			tables = append(tables, t)
		}
	}
	for i, t := range tables {
		if t.Title != "" && len(t.Rows) == 0 && i > 1 {
			continue
		}
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := t.Print(w); err != nil {
			return err
		}
	}
	return nil
}

func problemTable(title string, ps []verifyProblem) progress.Table {
	t := progress.Table{Title: title, Header: []string{"object", "problem"}}
	for _, p := range ps {
		t.Add(p.Object, p.Problem)
	}
	return t
}
