package archive

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

// StreamReport is the cross-check of an archive against the live stream
// (`archiver verify --table`).
type StreamReport struct {
	Table string `json:"table"`
	// Records counts the stream's REMOVE records of the archived kinds in
	// the selected time range; Archived those found in the archive.
	Records  int64 `json:"records"`
	Archived int64 `json:"archived"`
	// Missing are the records not in the archive deleted before the
	// grace period; Pending those deleted within it (the archiver may
	// not have flushed them yet).
	Missing []StreamRemove `json:"missing"`
	Pending []StreamRemove `json:"pending"`
}

// MissingCheck looks for the stream's REMOVE records (StreamRemoves) in
// the archive. A nil *MissingCheck checks nothing.
type MissingCheck struct {
	table   string
	cutoff  time.Time               // records deleted from then on are pending
	left    map[string]StreamRemove // not found yet
	records int64
}

// NewMissingCheck checks found, the table's stream records, against the
// archived events given to Event; records deleted from cutoff on are
// pending, not missing. A nil found checks nothing (nil).
func NewMissingCheck(table string, found map[string]StreamRemove, cutoff time.Time) *MissingCheck {
	if found == nil {
		return nil
	}
	return &MissingCheck{table: table, cutoff: cutoff, left: found, records: int64(len(found))}
}

// Event crosses an archived event off.
func (c *MissingCheck) Event(e *event.Event) {
	if c != nil && e.Table == c.table {
		delete(c.left, e.EventID)
	}
}

// Hook returns o with an OnLine that crosses off every line read,
// duplicates included, before calling o's own OnLine (o unchanged for a
// nil check). A stream record is archived when a line holds its event
// ID, and a line the reader counts as a duplicate can hold another event
// ID than the first of its identity: a global table's expiry archived
// by two Regions is one event of two records.
func (c *MissingCheck) Hook(o Options) Options {
	if c == nil {
		return o
	}
	next := o.OnLine
	o.OnLine = func(obj *Object, l *Line, dup bool) {
		c.Event(&l.Event)
		if next != nil {
			next(obj, l, dup)
		}
	}
	return o
}

// Archived reports whether the stream record with event ID id was
// found in the archive (false for a nil check).
func (c *MissingCheck) Archived(id string) bool {
	if c == nil {
		return false
	}
	_, left := c.left[id]
	return !left
}

// Result lists what was not crossed off, by deletion time; nil for a nil
// check.
func (c *MissingCheck) Result() *StreamReport {
	if c == nil {
		return nil
	}
	s := &StreamReport{Table: c.table, Records: c.records, Archived: c.records - int64(len(c.left)),
		Missing: []StreamRemove{}, Pending: []StreamRemove{}}
	for _, m := range c.left {
		if m.Created.Before(c.cutoff) {
			s.Missing = append(s.Missing, m)
		} else {
			s.Pending = append(s.Pending, m)
		}
	}
	for _, l := range [][]StreamRemove{s.Missing, s.Pending} {
		slices.SortFunc(l, func(a, b StreamRemove) int {
			return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.EventID, b.EventID))
		})
	}
	return s
}
