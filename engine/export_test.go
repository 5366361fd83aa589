package engine

import (
	"context"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// Test-only access to internals, for engine_test.

// LockTableForTest takes the named table's write lock and returns its
// release, so a test can hold a request inside the engine (a transaction
// waits for it after registering its ClientRequestToken).
func (e *Engine) LockTableForTest(name string) (unlock func()) {
	t, err := e.lookup(context.Background(), name)
	if err != nil {
		panic(err)
	}
	t.mu.Lock()
	return t.mu.Unlock
}

// CollectionSizeForTest returns the bytes of the item collection of the
// string partition key pk: what SizeEstimateRangeGB is derived from.
func (e *Engine) CollectionSizeForTest(name, pk string) int64 {
	t, err := e.lookup(context.Background(), name)
	if err != nil {
		panic(err)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, err := t.collectionSizeLocked(appendComponent(nil, attr.Value{T: attr.S, S: pk}))
	if err != nil {
		panic(err)
	}
	return n
}
