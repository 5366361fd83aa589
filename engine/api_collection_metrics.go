package engine

import (
	"bytes"
	"math"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Item collection metrics (ReturnItemCollectionMetrics: SIZE).
//
// An item collection is every item of a table with one partition key value
// plus what the table's local secondary indexes project of them; DynamoDB
// caps it at 10 GB and reports its size only for tables with LSIs, as a
// range in whole gigabytes: [lower, lower+1], e.g. [0, 1] for any collection
// under 1 GB. Tables without LSIs get no ItemCollectionMetrics at all.
//
// The size is computed when a request asks for it, by walking the
// partition's contiguous run of keys in the table and in each LSI (storage
// keys start with the partition key's component, see keys.go). That costs
// nothing on writes that do not ask, and it stays right on every path that
// removes items, the TTL sweeper's chunked deletes included, which a
// counter maintained on the write path would have to follow. Only LSIs that
// project less than ALL decode their items to size the projection.

// bytesPerGB is the unit of SizeEstimateRangeGB.
const bytesPerGB = 1 << 30

// itemCollMetrics is one ItemCollectionMetrics on the wire.
type itemCollMetrics struct {
	ItemCollectionKey   attr.Item  `json:"ItemCollectionKey"`
	SizeEstimateRangeGB [2]float64 `json:"SizeEstimateRangeGB"`
}

// checkRICM validates a ReturnItemCollectionMetrics parameter.
func checkRICM(s string) error {
	switch s {
	case "", "NONE", "SIZE":
		return nil
	}
	return awserr.Validation("1 validation error detected: Value '%s' at 'returnItemCollectionMetrics' failed to satisfy constraint: Member must satisfy enum value set: [SIZE, NONE]", s)
}

// collectionMetrics returns the metrics of the item collection keyItem
// (an item or a key: only its partition key attribute is read) belongs to,
// or nil when mode is not SIZE or the table has no LSI. It takes the
// table's read lock.
func (t *table) collectionMetrics(mode string, keyItem attr.Item) (*itemCollMetrics, error) {
	if mode != "SIZE" || len(t.lsis) == 0 {
		return nil, nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.collectionMetricsLocked(keyItem)
}

// collectionMetricsLocked is collectionMetrics for a table with LSIs whose
// lock (read or write) the caller holds.
func (t *table) collectionMetricsLocked(keyItem attr.Item) (*itemCollMetrics, error) {
	hv := keyItem[t.key.Hash]
	n, err := t.collectionSizeLocked(appendComponent(nil, hv))
	if err != nil {
		return nil, err
	}
	lo := math.Floor(float64(n) / bytesPerGB)
	return &itemCollMetrics{
		ItemCollectionKey:   attr.Item{t.key.Hash: hv},
		SizeEstimateRangeGB: [2]float64{lo, lo + 1},
	}, nil
}

// collectionSizeLocked returns the bytes of the item collection whose
// storage keys (in the table and in every LSI) start with prefix: the
// items' sizes plus each LSI's projection of them.
func (t *table) collectionSizeLocked(prefix []byte) (int64, error) {
	end := prefixEnd(prefix)
	var n int64
	for nd := t.items.SeekGE(prefix); inRange(nd, end); nd = nd.Next() {
		n += int64(nd.val.size)
	}
	for _, ix := range t.lsis {
		for nd := ix.list.SeekGE(prefix); inRange(nd, end); nd = nd.Next() {
			if ix.projType == "ALL" {
				n += int64(nd.val.size)
				continue
			}
			it, err := decodeStored(nd.val)
			if err != nil {
				return 0, err
			}
			n += ix.projectedSize(t, nd.val, it)
		}
	}
	return n, nil
}

// inRange reports whether nd is a node below end (nil: no bound).
func inRange(nd *slNode, end []byte) bool {
	return nd != nil && (end == nil || bytes.Compare(nd.Key(), end) < 0)
}

// collectionSet gathers the distinct item collections a multi-item write
// touched, in first-touch order, for BatchWriteItem's and
// TransactWriteItems' per-table lists.
type collectionSet struct {
	seen map[string]bool
	keys []attr.Item // one partition key attribute each
}

// add notes the collection of keyItem (an item or a key of t).
func (s *collectionSet) add(t *table, keyItem attr.Item) {
	hv := keyItem[t.key.Hash]
	id := string(appendComponent(nil, hv))
	if s.seen[id] {
		return
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[id] = true
	s.keys = append(s.keys, attr.Item{t.key.Hash: hv})
}

// metricsLocked returns the metrics of every collection in s; t has LSIs
// and its lock is held.
func (s *collectionSet) metricsLocked(t *table) ([]*itemCollMetrics, error) {
	out := make([]*itemCollMetrics, 0, len(s.keys))
	for _, k := range s.keys {
		m, err := t.collectionMetricsLocked(k)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
