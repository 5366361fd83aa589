package sweep

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/lease"
	"github.com/ttl-archiver/archiver/sweep/state"
)

// fakeSweepStore is a state.Store whose holds the test ends.
type fakeSweepStore struct {
	mu       sync.Mutex
	cursor   time.Time
	saves    []time.Time
	releases int
	holds    chan context.CancelCauseFunc // each hold's cancel, as it is taken
}

func newFakeSweepStore() *fakeSweepStore {
	return &fakeSweepStore{holds: make(chan context.CancelCauseFunc, 10)}
}

func (f *fakeSweepStore) LoadSweepCursor(context.Context, string) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cursor, nil
}

func (f *fakeSweepStore) SaveSweepCursor(ctx context.Context, _ string, w time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cursor = w
	f.saves = append(f.saves, w)
	return nil
}

func (f *fakeSweepStore) AcquireSweep(ctx context.Context, _ string) (context.Context, func(context.Context) error, error) {
	held, cancel := context.WithCancelCause(ctx)
	f.holds <- cancel
	return held, func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.releases++
		cancel(errors.New("released"))
		return nil
	}, nil
}

func (f *fakeSweepStore) counts() (saves, releases int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.saves), f.releases
}

var _ state.Store = (*fakeSweepStore)(nil)

// sweeperFunc is a Runner.
type sweeperFunc func(ctx context.Context) error

func (f sweeperFunc) Run(ctx context.Context) error { return f(ctx) }

func newTestLoop(t *testing.T, f *fakeSweepStore, run sweeperFunc) *Loop {
	return &Loop{Table: "Sessions", Store: NewCheckpointStore(f), Sweeper: run, ShutdownTimeout: 300 * time.Millisecond,
		Logger: zaptest.NewLogger(t)}
}

// nextHold waits for the loop's next Acquire.
func nextHold(t *testing.T, f *fakeSweepStore) context.CancelCauseFunc {
	t.Helper()
	select {
	case c := <-f.holds:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not acquire the table")
		return nil
	}
}

func TestSweepLoop(t *testing.T) {
	w := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	blockUntilDone := func(ctx context.Context) error { <-ctx.Done(); return nil }
	cases := []struct {
		name string
		run  sweeperFunc
		// drive acts on the running loop; it returns what run must return.
		drive        func(t *testing.T, f *fakeSweepStore, stop context.CancelFunc) error
		saves, rels  int
		wantCursorAt time.Time
	}{
		{"SIGTERM: stop, release", blockUntilDone, func(t *testing.T, f *fakeSweepStore, stop context.CancelFunc) error {
			nextHold(t, f)
			stop()
			return nil
		}, 0, 1, time.Time{}},
		{"hold lost: stop, release, acquire again", blockUntilDone, func(t *testing.T, f *fakeSweepStore, stop context.CancelFunc) error {
			nextHold(t, f)(lease.ErrRenewFailed)
			nextHold(t, f)(lease.ErrLeaseLost)
			nextHold(t, f)
			stop()
			return nil
		}, 0, 3, time.Time{}},
		{"the sweeper cannot sweep the table", func(context.Context) error { return errors.New("no index") },
			func(t *testing.T, f *fakeSweepStore, stop context.CancelFunc) error {
				nextHold(t, f)
				return errors.New("no index")
			}, 0, 1, time.Time{}},
		{"a cursor save cut short by SIGTERM is made at the hand-over", func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}, nil, 1, 1, w},
		{"a sweeper that does not stop: shutdown timeout, no release", func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(2 * time.Second)
			return nil
		}, func(t *testing.T, f *fakeSweepStore, stop context.CancelFunc) error {
			nextHold(t, f)
			stop()
			return errShutdownTimeout
		}, 0, 0, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSweepStore()
			l := newTestLoop(t, f, tc.run)
			if tc.drive == nil { // the cursor case: the sweeper saves with its ended context
				l.Sweeper = sweeperFunc(func(ctx context.Context) error {
					<-ctx.Done()
					if err := l.Store.SaveCursor(ctx, "Sessions", Cursor{Window: w}); err == nil {
						t.Error("SaveCursor with an ended context succeeded")
					}
					return nil
				})
				tc.drive = func(t *testing.T, f *fakeSweepStore, stop context.CancelFunc) error {
					nextHold(t, f)
					stop()
					return nil
				}
			}
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			want := tc.drive(t, f, stop)
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the loop did not return")
			}
			if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want) && !strings.Contains(err.Error(), want.Error())) {
				t.Fatalf("run = %v, want %v", err, want)
			}
			saves, rels := f.counts()
			if saves != tc.saves || rels != tc.rels {
				t.Errorf("saves %d, releases %d; want %d, %d", saves, rels, tc.saves, tc.rels)
			}
			if c, _ := f.LoadSweepCursor(ctx, "Sessions"); !c.Equal(tc.wantCursorAt) {
				t.Errorf("cursor %v, want %v", c, tc.wantCursorAt)
			}
		})
	}
}
