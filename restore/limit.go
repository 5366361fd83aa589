package restore

import (
	"context"
	"sync"
	"time"
)

// limiter is a token bucket: at most rate acquisitions per second on
// average, with a burst of a tenth of a second's worth (at least one).
// Wait honours its context.
type limiter struct {
	mu       sync.Mutex
	interval time.Duration // between two tokens
	burst    time.Duration // how far next may lag behind now
	next     time.Time     // when the next token is due
}

// newLimiter returns a limiter of rate per second, or nil (no limit) for
// rate <= 0.
func newLimiter(rate float64) *limiter {
	if rate <= 0 {
		return nil
	}
	iv := time.Duration(float64(time.Second) / rate)
	burst := max(int(rate/10), 1)
	return &limiter{interval: iv, burst: iv * time.Duration(burst-1)}
}

// Wait takes one token, sleeping until it is due or ctx ends.
func (l *limiter) Wait(ctx context.Context) error {
	if l == nil {
		return ctx.Err()
	}
	l.mu.Lock()
	now := time.Now()
	if floor := now.Add(-l.burst); l.next.Before(floor) {
		l.next = floor
	}
	due := l.next
	l.next = l.next.Add(l.interval)
	l.mu.Unlock()
	d := time.Until(due)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
