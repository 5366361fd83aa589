// Package manifest is the archive's proof of completeness: coverage
// manifests, what `archiver run` records in an archive as it reads each
// shard, and [Check], which proves from them alone, long after the stream
// is gone, that each shard lineage was read without a gap.
//
// A manifest records one range of one shard: every stream record of the
// shard after From up to and including To was read, and every event of
// it acknowledged by every sink (or dead-lettered), before the range was
// recorded, which happens before the shard's checkpoint passes To. It says
// how many records the range held, the events the archive took by kind,
// the events dead-lettered by reason, and every object of the archive that
// holds its events, with its size and SHA-256. It carries the SHA-256 of
// the manifest before it in the shard's lineage ([Manifest.Prev]): the
// previous range of the shard, or for a shard's first range its parent's
// last. A manifest removed or edited therefore breaks the chain at the
// manifest after it, and a data object removed or edited no longer
// matches the manifest that lists it.
//
// Manifests live in the archive beside the data, under _manifests/ (see
// [Key]), one JSON object each (see [Encode]). The package imports only
// the record model (event) and the standard library: the sinks write
// manifests and the archive reader checks them.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

// Version is the version of the manifest format this package writes.
const Version = 1

// Dir is the folder of manifests under an archive's root (an S3 prefix or a
// file sink's directory).
const Dir = "_manifests/"

// Range is what the consumer knows of one stretch of a shard it read:
// every record after From up to and including To was read, and every
// event of them acknowledged by every sink that took it, or by the
// dead-letter sink. A recorder turns it into a [Manifest] with its own
// objects.
type Range struct {
	StreamARN string
	Region    string
	Table     string
	ShardID   string
	// ParentShardID is the shard's parent ("" for none or unknown).
	ParentShardID string
	// From is the last sequence number of the previous range; "" when the
	// range begins at the shard's start (its first record, or the first
	// record still in the stream: see Trimmed).
	From string
	// To is the sequence number of the range's last record (From when the
	// range holds no record: a shard that ended without more records).
	To string
	// FirstTime and LastTime are the creation times of the range's first
	// and last record (zero when it holds none).
	FirstTime, LastTime time.Time
	// Records counts the stream records of the range, those no sink
	// wanted included.
	Records int64
	// Events counts, by kind, the events the recorder's sink was given.
	Events map[event.Kind]int64
	// DeadLettered counts the range's events dead-lettered, by reason
	// (event.ReasonPermanent, ...).
	DeadLettered map[string]int64
	// Ended: the shard was read to its end; this is its last range.
	Ended bool
	// Trimmed, when set, says that records of the range were not read:
	// with From "", those at the shard's start, trimmed from the stream
	// before the archiver first read it (or, Skipped, passed over by a
	// LATEST start); with From set, those after From, trimmed before the
	// archiver reached them. Either way the records read begin at First.
	Trimmed *Trimmed
}

// Trimmed is where reading went on after records it did not read: the
// first record read, and its creation time (First is the range's To, and
// Time zero, when none was read after them: the shard ended).
type Trimmed struct {
	First string    `json:"first"`
	Time  time.Time `json:"time"`
	// Skipped: the records were not trimmed but skipped on purpose: the
	// archiver started reading the shard at LATEST (--start latest), so
	// what it held before was never meant to be read.
	Skipped bool `json:"skipped,omitempty"`
}

// Object is one object of the archive holding events of a range: its key
// (relative to the archive's root), its size as stored and the SHA-256 of
// those bytes. A file sink's files grow: Bytes is the size when the
// manifest was written, and SHA256 that of the file's first Bytes bytes.
// First and Last are the sequence numbers of the shard's first and last
// events in it ("" when unknown).
type Object struct {
	Key    string `json:"key"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	First  string `json:"first,omitempty"`
	Last   string `json:"last,omitempty"`
}

// Manifest is one range of one shard as written to the archive.
type Manifest struct {
	Version   int       `json:"version"`
	Stream    string    `json:"stream"`
	Region    string    `json:"region,omitempty"`
	Table     string    `json:"table"`
	Shard     string    `json:"shard"`
	Parent    string    `json:"parent,omitempty"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	FirstTime time.Time `json:"firstRecordTime,omitzero"`
	LastTime  time.Time `json:"lastRecordTime,omitzero"`
	Records   int64     `json:"records"`
	// Events counts the events of the range the archive took, by kind.
	Events       map[string]int64 `json:"events"`
	DeadLettered map[string]int64 `json:"deadLettered,omitempty"`
	Ended        bool             `json:"ended,omitempty"`
	Trimmed      *Trimmed         `json:"trimmed,omitempty"`
	// Objects are the archive's objects holding the range's events, by
	// key.
	Objects []Object `json:"objects"`
	// Prev is the hex SHA-256 of the manifest before this one in the
	// shard's lineage: the range ending at From, or, for a shard's first
	// range, its parent's last; "" when there is none (a shard without a
	// parent, or the first range recorded of an archive written before
	// manifests existed).
	Prev string `json:"prev"`
	// Written is when the manifest was written; Writer names the worker.
	Written time.Time `json:"written"`
	Writer  string    `json:"writer,omitempty"`
}

// New is the manifest of r with the recorder's objects and the digest of
// the previous manifest.
func New(r Range, objects []Object, prev, writer string, now time.Time) Manifest {
	m := Manifest{Version: Version, Stream: r.StreamARN, Region: r.Region, Table: r.Table, Shard: r.ShardID,
		Parent: r.ParentShardID, From: r.From, To: r.To, FirstTime: r.FirstTime.UTC(), LastTime: r.LastTime.UTC(),
		Records: r.Records, Events: map[string]int64{}, Ended: r.Ended, Trimmed: r.Trimmed,
		Objects: objects, Prev: prev, Written: now.UTC(), Writer: writer}
	for k, n := range r.Events {
		if n > 0 {
			m.Events[string(k)] = n
		}
	}
	for reason, n := range r.DeadLettered {
		if n > 0 {
			if m.DeadLettered == nil {
				m.DeadLettered = map[string]int64{}
			}
			m.DeadLettered[reason] = n
		}
	}
	if m.Objects == nil {
		m.Objects = []Object{}
	}
	sort.Slice(m.Objects, func(i, j int) bool { return m.Objects[i].Key < m.Objects[j].Key })
	return m
}

// Encode renders m as its stored bytes: one JSON object and a newline.
// The same manifest always renders to the same bytes (maps sorted, times
// in UTC).
func Encode(m Manifest) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic("manifest: encoding a Manifest cannot fail: " + err.Error()) // only strings, numbers, times, maps of strings
	}
	return append(b, '\n')
}

// Digest is the hex SHA-256 of a manifest's stored bytes: what the next
// manifest of its lineage names as Prev.
func Digest(stored []byte) string {
	sum := sha256.Sum256(stored)
	return hex.EncodeToString(sum[:])
}

// maxBytes bounds a manifest read back: one holds a range's objects, a few
// hundred bytes each; a longer file is not one the archiver wrote.
const maxBytes = 16 << 20

// Decode reads a stored manifest, checking every field, so that a file
// someone else wrote (or edited) is an error naming the field, never a
// panic or a manifest that proves something it does not.
func Decode(r io.Reader) (Manifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("manifest: reading: %w", err)
	}
	if len(data) > maxBytes {
		return Manifest{}, fmt.Errorf("manifest: longer than %d bytes", maxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("manifest: not a manifest: %w", err)
	}
	if dec.More() {
		return Manifest{}, errors.New("manifest: more than one JSON object")
	}
	return m, m.validate()
}

// Validate checks m's fields as [Decode] does: a recorder refuses to
// store a manifest its readers would refuse.
func (m Manifest) Validate() error { return m.validate() }

// validate checks a decoded manifest's fields.
func (m *Manifest) validate() error {
	switch {
	case m.Version != Version:
		return fmt.Errorf("manifest: version: %d is not %d", m.Version, Version)
	case !strings.HasPrefix(m.Stream, "arn:") || !strings.Contains(m.Stream, "/stream/"):
		return fmt.Errorf("manifest: stream: %q is not a stream ARN", m.Stream)
	case m.Table == "" || m.Shard == "":
		return errors.New("manifest: table and shard are required")
	case m.From != "" && !event.ValidSequence(m.From):
		return fmt.Errorf("manifest: from: %q is not a sequence number", m.From)
	case !event.ValidSequence(m.To):
		return fmt.Errorf("manifest: to: %q is not a sequence number", m.To)
	case m.From != "" && event.CompareSequence(m.From, m.To) > 0:
		return fmt.Errorf("manifest: from %s is after to %s", m.From, m.To)
	case m.Records < 0:
		return fmt.Errorf("manifest: records: %d is negative", m.Records)
	case m.Prev != "" && !isDigest(m.Prev):
		return fmt.Errorf("manifest: prev: %q is not a hex SHA-256", m.Prev)
	case m.Trimmed != nil && !event.ValidSequence(m.Trimmed.First):
		return fmt.Errorf("manifest: trimmed.first: %q is not a sequence number", m.Trimmed.First)
	case m.Trimmed != nil && (event.CompareSequence(m.Trimmed.First, m.To) > 0 ||
		m.From != "" && event.CompareSequence(m.Trimmed.First, m.From) <= 0):
		return fmt.Errorf("manifest: trimmed.first: %s is not in the range (%s, %s]", m.Trimmed.First, m.From, m.To)
	}
	for k, n := range m.Events {
		if !event.Kind(k).Valid() || n < 0 {
			return fmt.Errorf("manifest: events: %q: %d is not a count of a kind", k, n)
		}
	}
	for i, o := range m.Objects {
		if err := o.validate(); err != nil {
			return fmt.Errorf("manifest: objects[%d]: %w", i, err)
		}
	}
	return nil
}

func (o Object) validate() error {
	switch {
	case o.Key == "" || strings.HasPrefix(o.Key, "/") || strings.Contains(o.Key, ".."):
		return fmt.Errorf("key: %q is not a key relative to the archive", o.Key)
	case o.Bytes < 0:
		return fmt.Errorf("bytes: %d is negative", o.Bytes)
	case !isDigest(o.SHA256):
		return fmt.Errorf("sha256: %q is not a hex SHA-256", o.SHA256)
	case o.First != "" && !event.ValidSequence(o.First), o.Last != "" && !event.ValidSequence(o.Last):
		return errors.New("first, last: not sequence numbers")
	}
	return nil
}

func isDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}
