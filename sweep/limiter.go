package sweep

import (
	"context"
	"sync"
	"time"

	"github.com/ttl-archiver/archiver/internal/backoff"
)

// bucket is a token bucket: rate tokens a second, at most burst of them
// saved up. A caller takes a token at once and, when the bucket is in
// debt, waits until its token would have been there; so over any stretch
// of t seconds since the bucket was made, at most burst + rate·t tokens
// are taken.
type bucket struct {
	rate, burst float64
	now         func() time.Time                                // a real clock, not Config.Now
	sleep       func(ctx context.Context, d time.Duration) bool // backoff.Sleep

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	created time.Time
	granted int64 // tokens handed out (waits that returned nil)
}

// newBucket returns a full bucket of rate tokens a second, with room for
// a tenth of a second's worth (at least one).
func newBucket(rate int) *bucket {
	b := &bucket{rate: float64(rate), burst: max(1, float64(rate)/10), now: time.Now, sleep: backoff.Sleep}
	b.reset()
	return b
}

// reset fills the bucket and restarts its accounting at b.now().
func (b *bucket) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens, b.granted = b.burst, 0
	b.last = b.now()
	b.created = b.last
}

// wait takes a token, waiting for it if need be. When ctx ends first the
// token is given back and ctx's error returned.
func (b *bucket) wait(ctx context.Context) error {
	b.mu.Lock()
	now := b.now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens--
	d := time.Duration(-b.tokens / b.rate * float64(time.Second))
	b.mu.Unlock()
	ok := d <= 0 || b.sleep(ctx, d)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !ok {
		b.tokens++
		return ctx.Err()
	}
	b.granted++
	return nil
}

// allowance is how many tokens the bucket handed out since it was made or
// reset, and how many it may have: granted never exceeds allowed.
func (b *bucket) allowance() (granted int64, allowed float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.granted, b.burst + b.now().Sub(b.created).Seconds()*b.rate
}
