// Package budget is the archiver's one byte budget: a bound on bytes in
// flight that callers wait on, shared by the consumer's in-flight records,
// the shard readers' read-ahead and the sinks' buffers.
package budget

import (
	"context"
	"sync"
)

// Budget bounds a count of bytes. It has two ways in, for the two kinds of
// caller:
//
//   - Acquire / TryAcquire take n bytes once they fit. A request larger
//     than the whole budget is admitted when nothing else is held, so one
//     oversized batch is slow but never stuck.
//   - Wait / Add are for callers who learn the size only after the work (a
//     reader learns a response's size once it has it): Wait returns while
//     anything is left, and Add then counts what was taken, even past the
//     limit.
//
// Release gives bytes back and wakes every waiter. A Budget is safe for
// concurrent use; the zero value is not usable: use New.
type Budget struct {
	mu      sync.Mutex
	max     int64
	used    int64
	wake    chan struct{} // closed (and replaced) by a Release with waiters
	waiting bool
}

// New returns a budget of max bytes.
func New(max int64) *Budget {
	return &Budget{max: max, wake: make(chan struct{})}
}

// TryAcquire takes n and returns nil if n fits, or if nothing is held at
// all. Otherwise it takes nothing and returns a channel that is closed at
// the next Release: for callers that wait on other things too.
func (b *Budget) TryAcquire(n int64) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used != 0 && b.used+n > b.max {
		b.waiting = true
		return b.wake
	}
	b.used += n
	return nil
}

// Acquire takes n, waiting until it fits (see TryAcquire) or ctx ends.
// When it has to wait, it calls onWait once first (nil: nothing), so a
// caller can free what it holds itself, e.g. flush its own buffers.
func (b *Budget) Acquire(ctx context.Context, n int64, onWait func()) error {
	waited := false
	for {
		ch := b.TryAcquire(n)
		if ch == nil {
			return nil
		}
		if !waited && onWait != nil {
			onWait()
		}
		waited = true
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Wait returns once less than the whole budget is held, or ctx's error.
func (b *Budget) Wait(ctx context.Context) error {
	for {
		b.mu.Lock()
		if b.used < b.max {
			b.mu.Unlock()
			return nil
		}
		b.waiting = true
		ch := b.wake
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Add counts n bytes taken without waiting (after Wait).
func (b *Budget) Add(n int64) {
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// Release gives n bytes back and wakes the waiters.
func (b *Budget) Release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.waiting {
		b.waiting = false
		close(b.wake)
		b.wake = make(chan struct{})
	}
}

// Used is the bytes held now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
