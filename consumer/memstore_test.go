package consumer

import (
	"context"
	"fmt"
	"sync"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/event"
)

// durableSet is the set of (shard, sequence) of evs: what a recording
// sink made durable, given its Events.
func durableSet(evs []event.Event) map[string]bool {
	m := map[string]bool{}
	for _, e := range evs {
		m[e.ShardID+"/"+e.SequenceNumber] = true
	}
	return m
}

// memStore is an in-memory checkpoint.Store that can fail saves and checks
// every save against a caller's invariant.
type memStore struct {
	mu     sync.Mutex
	cps    map[string]map[string]checkpoint.Checkpoint
	saves  []string
	failFn func(arn, shard string, cp checkpoint.Checkpoint) error
	check  func(arn, shard string, cp checkpoint.Checkpoint) error
	errs   []error
}

func newMemStore() *memStore {
	return &memStore{cps: map[string]map[string]checkpoint.Checkpoint{}}
}

func (m *memStore) Load(ctx context.Context, arn string) (map[string]checkpoint.Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]checkpoint.Checkpoint{}
	for k, v := range m.cps[arn] {
		out[k] = v
	}
	return out, nil
}

func (m *memStore) Save(ctx context.Context, arn, shard string, cp checkpoint.Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failFn != nil {
		if err := m.failFn(arn, shard, cp); err != nil {
			return err
		}
	}
	if m.check != nil {
		if err := m.check(arn, shard, cp); err != nil {
			m.errs = append(m.errs, err)
		}
	}
	prev := m.cps[arn][shard]
	if prev.Finished {
		m.errs = append(m.errs, fmt.Errorf("save %+v over finished shard %s", cp, shard))
	}
	if event.CompareSequence(cp.SequenceNumber, prev.SequenceNumber) < 0 {
		m.errs = append(m.errs, fmt.Errorf("shard %s checkpoint went back from %s to %s", shard, prev.SequenceNumber, cp.SequenceNumber))
	}
	if m.cps[arn] == nil {
		m.cps[arn] = map[string]checkpoint.Checkpoint{}
	}
	m.cps[arn][shard] = cp
	m.saves = append(m.saves, fmt.Sprintf("%s=%s/%v", shard, cp.SequenceNumber, cp.Finished))
	return nil
}

func (m *memStore) Close() error { return nil }

func (m *memStore) get(arn, shard string) checkpoint.Checkpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cps[arn][shard]
}

func (m *memStore) problems() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.errs...)
}
