package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/progress"
)

// verifyReport is what `archiver verify` found: the archive's report
// and, with --table, the stream cross-check (printed as tables, or as
// JSON with --json).
type verifyReport struct {
	archive.Report
	// Coverage is what the archive's coverage manifests prove.
	Coverage *archive.CoverageReport `json:"coverage"`
	// Stream is the cross-check against the live stream (--table).
	Stream *archive.StreamReport `json:"stream,omitempty"`
	// TornTails are the torn tails file sinks cut off and kept (the first
	// archive.MaxListed; TornTailsTotal counts them): no finding.
	TornTails      []archive.TornTail `json:"tornTails"`
	TornTailsTotal int                `json:"tornTailsTotal"`
}

// print writes the report: the coverage verdict in one line, what the
// manifests prove per shard and what they could not, then what the
// archive holds.
func (r *verifyReport) print(w io.Writer) error {
	if _, err := io.WriteString(w, r.Coverage.Summary+"\n"); err != nil {
		return err
	}
	tables := coverageTables(r.Coverage)
	tables = append(tables, progress.KV("archive "+r.Archive,
		"objects", r.Objects, bytesLabel(r.Bytes, r.CompressedBytes), r.Bytes, "lines", r.Lines,
		"distinct events", r.Events, "duplicates", r.Duplicates, "undecodable lines", r.Undecodable,
		"objects not matching their key", len(r.Mismatches), "keys off the layout (skipped)", len(r.StrayKeys)))
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
	if len(r.TornTails) > 0 {
		t := progress.Table{Title: fmt.Sprintf("torn tails kept aside: %d (a writer killed mid-append left them; the file sink cut them off and their records were delivered again)", r.TornTailsTotal),
			Header: []string{"kept in", "bytes"}}
		for _, tt := range r.TornTails {
			t.Add(tt.Key, tt.Bytes)
		}
		tables = append(tables, t)
	}
	tables = append(tables, problemTable("objects whose key does not match their contents", r.Mismatches),
		problemTable("keys that do not follow the archive layout (skipped)", r.StrayKeys))
	if s := r.Stream; s != nil {
		tables = append(tables, progress.KV("stream of "+s.Table+": REMOVE records in the 24 h window",
			"records", s.Records, "in the archive", s.Archived, "missing", len(s.Missing),
			"pending (deleted within --grace)", len(s.Pending)))
		tables = append(tables, removeTable("missing from the archive", s.Missing),
			removeTable("not in the archive yet, deleted within --grace (may not be flushed yet)", s.Pending))
	}
	for _, t := range tables {
		if len(t.Rows) == 0 && t.Title != parts.Title { // the events table is shown even when empty
			continue
		}
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		if err := t.Print(w); err != nil {
			return err
		}
	}
	return nil
}

// bytesLabel names the bytes read: compressed only when every object
// read was.
func bytesLabel(total, compressed int64) string {
	switch {
	case compressed > 0 && compressed == total:
		return "bytes (compressed)"
	case compressed > 0:
		return "bytes (as stored, some compressed)"
	}
	return "bytes"
}

// removeTable lists stream records the archive lacks: the keys of their
// items first, the item to look for.
func removeTable(title string, rs []archive.StreamRemove) progress.Table {
	t := progress.Table{Title: title, Header: []string{"keys", "event ID", "deleted", "shard"}}
	for _, m := range rs {
		t.Add(keysText(m.Keys), quoteIfNeeded(m.EventID), m.Created.Format(time.RFC3339), quoteIfNeeded(m.Shard))
	}
	return t
}

// keysText renders a stream record's keys (DynamoDB JSON) for a terminal
// as tail does (keyText): name=value pairs, hostile values quoted so they
// cannot break the table; "-" when the record had none, the raw text
// quoted when it does not decode.
func keysText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "-"
	}
	item, err := event.UnmarshalItem(raw)
	if err != nil {
		return strconv.Quote(string(raw))
	}
	return keyText(event.ToDynamoDB(item))
}

func problemTable(title string, ps []archive.Problem) progress.Table {
	t := progress.Table{Title: title, Header: []string{"object", "problem"}}
	for _, p := range ps {
		t.Add(p.Object, p.Problem)
	}
	return t
}

// coverageTables are the coverage report's tables: one row per shard, the
// findings, and for each gap the stream records in it (verify --table).
func coverageTables(c *archive.CoverageReport) []progress.Table {
	if c.Verdict == archive.VerdictNone {
		return nil
	}
	shards := progress.Table{Title: "coverage by shard (from the manifests under _manifests/)",
		Header: []string{"stream", "Region", "table", "shard", "covered from", "to", "first record", "last record", "state",
			"records", "events", "dead-lettered", "objects", "lines", "pending"}}
	for _, s := range c.Shards {
		state := "open"
		if s.Ended {
			state = "ended"
		}
		switch {
		case s.Gaps == 1:
			state += ", 1 gap"
		case s.Gaps > 1:
			state += fmt.Sprintf(", %d gaps", s.Gaps)
		}
		shards.Add(streamLabel(s.Stream), orDash(s.Region), s.Table, s.Shard.Shard, startOr(s.Start), s.To,
			timeOrDash(s.FirstTime), timeOrDash(s.LastTime), state, s.Records, counts(s.Events), counts(s.DeadLettered),
			s.Objects, s.Lines, s.PendingLines)
	}
	findings := progress.Table{Title: fmt.Sprintf("coverage findings (%d)", c.FindingsTotal),
		Header: []string{"finding", "Region", "table", "shard", "detail"}}
	var gaps []progress.Table
	for _, f := range c.Findings {
		findings.Add(f.Kind, orDash(f.Region), orDash(f.Table), orDash(f.Shard), f.Detail)
		if len(f.InStream) == 0 {
			continue
		}
		t := progress.Table{Title: fmt.Sprintf("stream records in the gap after %s up to %s of shard %s: the keys of the items the archive should hold",
			f.From, f.To, f.Shard), Header: []string{"keys", "event ID", "deleted", "sequence number", "in the archive"}}
		for _, r := range f.InStream {
			t.Add(keysText(r.Keys), quoteIfNeeded(r.EventID), r.Created.Format(time.RFC3339), r.Sequence, yesNo(r.Archived))
		}
		gaps = append(gaps, t)
	}
	if len(c.OtherKeys) > 0 {
		t := progress.Table{Title: "files under _manifests/ that are not manifests (skipped)", Header: []string{"key"}}
		for _, k := range c.OtherKeys {
			t.Add(k)
		}
		gaps = append(gaps, t)
	}
	return append([]progress.Table{shards, findings}, gaps...)
}

// streamLabel is a stream ARN's label (the part after /stream/).
func streamLabel(arn string) string {
	if i := strings.LastIndex(arn, "/stream/"); i >= 0 {
		return arn[i+len("/stream/"):]
	}
	return arn
}

// counts renders counts by name, "expired 60, deleted 2", or "0".
func counts(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

func startOr(seq string) string {
	if seq == "" {
		return "shard start"
	}
	return "after " + seq
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
