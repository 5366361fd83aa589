package stream

import (
	"encoding/json"
	"slices"
	"time"
)

// View is a stream as the engine's web console shows it: its shards with
// their lineage and their latest records. It is read outside the Streams
// API, so it takes no throttle, omission or iterator of a test's.
type View struct {
	StreamARN string      `json:"streamArn"`
	Label     string      `json:"streamLabel"`
	Status    string      `json:"streamStatus"`
	ViewType  string      `json:"streamViewType"`
	Shards    []ShardView `json:"shards"`
}

// ShardView is one live shard of a View.
type ShardView struct {
	ShardID string     `json:"shardId"`
	Parent  string     `json:"parentShardId,omitempty"` // may name a shard trimmed away
	Start   string     `json:"startingSequenceNumber"`
	End     string     `json:"endingSequenceNumber,omitempty"` // "" while open
	Created time.Time  `json:"created"`
	Closed  *time.Time `json:"closed,omitempty"`
	Count   int        `json:"recordCount"` // records ever appended
	Kept    int        `json:"recordsKept"` // records not trimmed
	// Records are the shard's latest records, oldest first, each as
	// GetRecords renders it.
	Records []json.RawMessage `json:"records"`
}

// View returns the stream's live shards in creation order, each with at
// most maxRecords of its latest records, and all of them together at most
// maxBytes of record JSON: the newest shards take theirs first, so an old
// shard may show fewer or none (Kept still counts them). Like
// DescribeStream it first applies age-based rollover and retention.
func (s *Stream) View(maxRecords, maxBytes int) View {
	now := s.reg.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maintainLocked(now)
	v := View{StreamARN: s.arn, Label: s.label, Status: s.status, ViewType: s.viewType, Shards: make([]ShardView, len(s.shards))}
	budget := maxBytes
	for i := len(s.shards) - 1; i >= 0; i-- {
		sh := s.shards[i]
		sv := ShardView{ShardID: sh.id, Parent: sh.parent, Start: formatSeq(sh.start), Created: sh.created.UTC(),
			Count: sh.count, Kept: sh.recs.Len(), Records: []json.RawMessage{}}
		if sh.closed() {
			sv.End = formatSeq(sh.end)
			c := sh.closedAt.UTC()
			sv.Closed = &c
		}
		for j := sh.recs.Len() - 1; j >= max(0, sh.recs.Len()-maxRecords); j-- { // newest first, while the budget lasts
			b := s.appendRecord(nil, sh.recs.at(j), s.events)
			if budget -= len(b); budget < 0 {
				break
			}
			sv.Records = append(sv.Records, b)
		}
		slices.Reverse(sv.Records)
		v.Shards[i] = sv
	}
	return v
}
