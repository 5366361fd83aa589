package main

import (
	"io"
	"time"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/internal/progress"
)

// verifyReport is what `archiver verify` found: the archive's report
// and, with --table, the stream cross-check (printed as tables, or as
// JSON with --json).
type verifyReport struct {
	archive.Report
	// Stream is the cross-check against the live stream (--table).
	Stream *archive.StreamReport `json:"stream,omitempty"`
}

// print writes the report as tables.
func (r *verifyReport) print(w io.Writer) error {
	tables := []progress.Table{progress.KV("archive "+r.Archive,
		"objects", r.Objects, bytesLabel(r.Bytes, r.CompressedBytes), r.Bytes, "lines", r.Lines,
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
			"records", s.Records, "in the archive", s.Archived, "missing", len(s.Missing),
			"pending (deleted within --grace)", len(s.Pending)))
		tables = append(tables, removeTable("missing from the archive", s.Missing),
			removeTable("not in the archive yet, deleted within --grace (may not be flushed yet)", s.Pending))
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

func removeTable(title string, rs []archive.StreamRemove) progress.Table {
	t := progress.Table{Title: title, Header: []string{"event ID", "deleted", "shard"}}
	for _, m := range rs {
		t.Add(m.EventID, m.Created.Format(time.RFC3339), m.Shard)
	}
	return t
}

func problemTable(title string, ps []archive.Problem) progress.Table {
	t := progress.Table{Title: title, Header: []string{"object", "problem"}}
	for _, p := range ps {
		t.Add(p.Object, p.Problem)
	}
	return t
}
