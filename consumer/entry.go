package consumer

import (
	"time"
)

// entry is one batch handed to process, in its shard's queue until every
// sink that got some of its events acknowledged them (pending reaches 0).
type entry struct {
	last    string
	pending int
	bytes   int
	records int
	first   time.Time // creation time of the entry's first record
	lastAt  time.Time // creation time of its last record
	// What its range records (coverage.go): its events by kind
	// (kindOrder), those dead-lettered by reason (reasonOrder) and, by
	// lane, those of the lane's sink that went to the dead-letter sink
	// (nil: none did). Counted once per batch, never per record here.
	kinds [4]int32
	dead  [3]int32
	moved [][4]int32
	// firstSeq is its first sequence number, kept only for the first
	// batch after records that were not read (manifest.Trimmed.First).
	firstSeq string
}
