// Package eventually is the tests' one way to wait for a condition that
// other goroutines, servers or processes make true: poll it until it
// holds or a generous deadline passes, then fail the test naming what was
// awaited and the condition's last word. It asserts no timing: the
// deadline only bounds a test that would otherwise hang.
package eventually

import (
	"context"
	"time"

	"github.com/ttl-archiver/archiver/internal/backoff"
)

// TB is what Wait needs of a test (testing.TB has it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// poll is the pause between two looks: from 10 ms, doubling to 100 ms.
var poll = backoff.Policy{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}

// Wait calls f until it returns nil and returns how long that took (for
// a log line, never for an assertion). When d passes first, it fails the
// test with "what: not within d: f's last error".
func Wait(t TB, d time.Duration, what string, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for n := 0; ; n++ {
		err := f()
		if err == nil {
			return time.Since(start)
		}
		if !backoff.Sleep(ctx, poll.Delay(n)) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
			return time.Since(start)
		}
	}
}

// True is Wait for a condition that has nothing to say but whether it
// holds.
func True(t TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return Wait(t, d, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

type notYet struct{}

func (notYet) Error() string { return "the condition does not hold" }

var errNotYet error = notYet{}
