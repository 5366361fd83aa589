package sweep

import (
	"context"
	"sync"
	"testing"
	"time"
)

// virtualClock is a clock that sleeping moves forward.
type virtualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *virtualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *virtualClock) sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return true
}

func TestBucket(t *testing.T) {
	for _, tc := range []struct {
		rate, takes int
		want        time.Duration // virtual time the takes last
	}{
		{rate: 50, takes: 5, want: 0},                 // the burst: 5 tokens
		{rate: 50, takes: 105, want: 2 * time.Second}, // 100 more at 50 a second
		{rate: 1, takes: 4, want: 3 * time.Second},    // burst of one
		{rate: 1000, takes: 1100, want: time.Second},  // burst of 100
		{rate: 3, takes: 31, want: 10 * time.Second},  // fractions of a second
	} {
		clock := &virtualClock{t: t0}
		b := newBucket(tc.rate)
		b.now, b.sleep = clock.now, clock.sleep
		b.reset()
		for range tc.takes {
			if err := b.wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if got := clock.now().Sub(t0); got.Round(time.Millisecond) != tc.want {
			t.Errorf("%d takes at %d/s took %v, want %v", tc.takes, tc.rate, got, tc.want)
		}
		if granted, allowed := b.allowance(); granted != int64(tc.takes) || float64(granted) > allowed+1e-9 {
			t.Errorf("%d takes at %d/s: granted %d of %v allowed", tc.takes, tc.rate, granted, allowed)
		}
	}
}

func TestBucketGivesBackOnCancel(t *testing.T) {
	clock := &virtualClock{t: t0}
	b := newBucket(1)
	b.now, b.sleep = clock.now, clock.sleep
	b.reset()
	if err := b.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.wait(ctx); err == nil {
		t.Fatal("a wait under a cancelled context succeeded")
	}
	if err := b.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := clock.now().Sub(t0); got != time.Second {
		t.Fatalf("the second token came after %v, want 1s: the cancelled wait kept its token", got)
	}
	if granted, _ := b.allowance(); granted != 2 {
		t.Fatalf("granted %d, want 2", granted)
	}
}
