package restore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// journal is the --resume file: a header line, then the event ID of every
// archived event the restore finished with (written, skipped because the
// item exists, or without an image), one a line.
//
// Durability: sync records are fsynced before record returns (used with
// --overwrite, where a repeated PutItem would write again); other records
// are fsynced in batches (every journalBatch records, every second and at
// the end), since a repeated conditional PutItem cannot write twice. A
// torn last line (a kill mid-write) is cut off on open.
type journal struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	done   map[string]bool
	head   journalHeader
	dirty  int // records written since the last fsync
	closed bool
}

// journalHeader pins what must not change between a run and its resume.
type journalHeader struct {
	Table string `json:"table"`
	// Start is when the first run began: the TTL of restored items is
	// counted from it, so a resumed run writes the same values.
	Start time.Time `json:"start"`
}

const journalBatch = 512

// openJournal opens or creates the resume file at path for table.
func openJournal(path, table string, now time.Time) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	j := &journal{f: f, done: map[string]bool{}}
	if err := j.load(table, now); err != nil {
		f.Close()
		return nil, fmt.Errorf("--resume %s: %w", path, err)
	}
	j.w = bufio.NewWriter(f)
	return j, nil
}

func (j *journal) load(table string, now time.Time) error {
	data, err := io.ReadAll(j.f)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		j.head = journalHeader{Table: table, Start: now.UTC().Truncate(time.Second)}
		h, _ := json.Marshal(j.head)
		if _, err := j.f.Write(append(h, '\n')); err != nil {
			return err
		}
		return j.f.Sync()
	}
	// Only whole lines count: a kill can leave a torn last one.
	whole := data[:bytes.LastIndexByte(data, '\n')+1]
	lines := bytes.Split(bytes.TrimSuffix(whole, []byte("\n")), []byte("\n"))
	if len(whole) == 0 || json.Unmarshal(lines[0], &j.head) != nil || j.head.Start.IsZero() {
		return errors.New("not a resume file of archiver restore (its first line is not the header)")
	}
	if j.head.Table != table {
		return fmt.Errorf("records a restore into table %q, not %q: use another file", j.head.Table, table)
	}
	for _, l := range lines[1:] {
		if len(l) > 0 {
			j.done[string(l)] = true
		}
	}
	if err := j.f.Truncate(int64(len(whole))); err != nil {
		return err
	}
	_, err = j.f.Seek(int64(len(whole)), io.SeekStart)
	return err
}

// has reports whether the event was finished by an earlier run.
func (j *journal) has(id string) bool {
	if j == nil {
		return false
	}
	return j.done[id]
}

// record notes id as finished; with sync it is durable when record returns.
func (j *journal) record(id string, sync bool) error {
	if j == nil || id == "" {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("resume file closed")
	}
	j.w.WriteString(id)
	j.w.WriteByte('\n')
	j.dirty++
	if sync || j.dirty >= journalBatch {
		return j.syncLocked()
	}
	return nil
}

// sync makes every record so far durable.
func (j *journal) sync() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || j.dirty == 0 {
		return nil
	}
	return j.syncLocked()
}

func (j *journal) syncLocked() error {
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("--resume: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("--resume: %w", err)
	}
	j.dirty = 0
	return nil
}

func (j *journal) close() error {
	if j == nil {
		return nil
	}
	err := j.sync()
	j.mu.Lock()
	was := j.closed
	j.closed = true
	j.mu.Unlock()
	if was {
		return err
	}
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}
