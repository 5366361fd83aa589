package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Inject appends a record of the caller's choosing to one open shard of the
// stream, whatever shard its key would hash to: the control API uses it to
// plant poison records. Keys, and New and Old when not nil, must be JSON
// objects; they are kept as given (compacted), whatever the stream's view
// type, and need not be valid DynamoDB JSON. EventName is kept verbatim and
// Service adds the TTL delete's userIdentity. Size is SizeBytes (the JSON's
// length when negative). Inject returns the record's sequence number.
func (r *Registry) Inject(arn, shardID string, c EncodedChange) (string, error) {
	s, err := r.stream(arn)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	var kEnd, nEnd int
	for _, p := range []struct {
		name string
		b    []byte
		end  *int
	}{{"Keys", c.Keys, &kEnd}, {"NewImage", c.New, &nEnd}, {"OldImage", c.Old, nil}} {
		if p.b != nil || p.name == "Keys" {
			t := bytes.TrimSpace(p.b)
			if len(t) < 2 || t[0] != '{' || !json.Valid(t) {
				return "", fmt.Errorf("inject into %s of %s: %s is not a JSON object", shardID, arn, p.name)
			}
			if err := json.Compact(&b, t); err != nil {
				return "", fmt.Errorf("inject into %s of %s: %s: %v", shardID, arn, p.name, err)
			}
		}
		if p.end != nil {
			*p.end = b.Len()
		}
	}
	size := c.Size
	if size < 0 {
		size = b.Len()
	}
	now := r.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status != StatusEnabled {
		return "", fmt.Errorf("inject into %s of %s: stream is %s", shardID, arn, s.status)
	}
	ord, ok := s.ordByID[shardID]
	sh := s.byOrd[ord]
	if !ok || sh == nil {
		return "", fmt.Errorf("inject into %s of %s: %w", shardID, arn, ErrNotFound)
	}
	if sh.closed() {
		return "", fmt.Errorf("inject into %s of %s: shard is closed", shardID, arn)
	}
	s.lastSeq++
	rec := record{
		seq:  s.lastSeq,
		size: uint32(size), svc: c.Service, ev: s.eventIndexLocked(c.EventName), at: now.UnixNano(),
	}
	data := b.Bytes()
	rec.setCopies(data[:kEnd], data[kEnd:nEnd], data[nEnd:])
	if last := sh.recs.last(); last != nil && last.at > rec.at {
		rec.at = last.at
	}
	added := sh.recs.push(rec)
	sh.count++
	s.journalRecord(sh, added, c.EventName, b.Bytes()[:kEnd])
	return string(appendSeq(nil, rec.seq)), nil
}
