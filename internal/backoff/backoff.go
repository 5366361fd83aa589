// Package backoff is the archiver's one rule for waiting between retries:
// exponential from a minimum, capped at a maximum, with jitter over the
// upper half of each step. Jitter spreads the retries of many shards and
// sinks that failed together; keeping the lower half means a retry never
// comes sooner than half its step, so a struggling destination is not hit
// again at once.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is a backoff between Min and Max.
type Policy struct {
	Min, Max time.Duration
}

// Step is the n-th step without jitter (n from 0): Min·2ⁿ, capped at Max.
// A Max below Min counts as Min.
func (p Policy) Step(n int) time.Duration {
	hi := max(p.Max, p.Min)
	d := p.Min
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// Delay is the wait before retry n (n from 0): uniformly between half of
// Step(n) and Step(n).
func (p Policy) Delay(n int) time.Duration {
	d := p.Step(n)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(d-half+1)
}

// Sleep waits d or until ctx ends, and reports whether the whole wait
// passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
