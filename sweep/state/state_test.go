package checkpoint

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

var (
	win0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	win1 = win0.Add(time.Minute)
	win2 = win1.Add(time.Minute)
)

// checkCursor fails unless the store's cursor of table is want.
func checkCursor(t *testing.T, s SweepStore, table string, want time.Time) {
	t.Helper()
	got, err := s.LoadSweepCursor(context.Background(), table)
	if err != nil || !got.Equal(want) {
		t.Fatalf("LoadSweepCursor(%s) = %v, %v; want %v", table, got, err, want)
	}
}

// sweepCursorContract runs what every SweepStore must do with one holder.
func sweepCursorContract(t *testing.T, s SweepStore) {
	ctx := context.Background()
	checkCursor(t, s, "Sessions", time.Time{})
	if err := s.SaveSweepCursor(ctx, "Sessions", win1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("SaveSweepCursor without holding the table: %v, want ErrLeaseLost", err)
	}
	held, release, err := s.AcquireSweep(ctx, "Sessions")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		window time.Time
		want   error
	}{
		{"first", win1, nil},
		{"same again", win1, nil},
		{"backwards", win0, ErrCursorBackwards},
		{"forward, sub-millisecond truncated", win2.Add(1500 * time.Microsecond), nil},
		{"zero", time.Time{}, nil},
	} {
		err := s.SaveSweepCursor(ctx, "Sessions", tc.window)
		switch {
		case tc.window.IsZero() && err == nil:
			t.Errorf("%s: SaveSweepCursor(zero) succeeded", tc.name)
		case !tc.window.IsZero() && !errors.Is(err, tc.want) && (err != nil || tc.want != nil):
			t.Errorf("%s: SaveSweepCursor(%v) = %v, want %v", tc.name, tc.window, err, tc.want)
		}
	}
	checkCursor(t, s, "Sessions", win2.Add(time.Millisecond))
	checkCursor(t, s, "Other", time.Time{})
	if err := s.SaveSweepCursor(ctx, "Other", win1); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("SaveSweepCursor of a table not held: %v, want ErrLeaseLost", err)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	if held.Err() == nil || !errors.Is(context.Cause(held), errSweepReleased) {
		t.Errorf("held after release: %v (cause %v)", held.Err(), context.Cause(held))
	}
	if err := release(ctx); err != nil {
		t.Errorf("second release: %v", err)
	}
	if err := s.SaveSweepCursor(ctx, "Sessions", win2.Add(time.Hour)); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("SaveSweepCursor after release: %v, want ErrLeaseLost", err)
	}
	checkCursor(t, s, "Sessions", win2.Add(time.Millisecond))
}

// secondAcquireWaits checks that a second AcquireSweep of the table waits
// until the first holder releases, and then gets it at once.
func secondAcquireWaits(t *testing.T, first, second SweepStore) {
	ctx := context.Background()
	_, release, err := first.AcquireSweep(ctx, "Sessions")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _, err = second.AcquireSweep(short, "Sessions")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second AcquireSweep while held: %v, want it to wait until its deadline", err)
	}
	got := make(chan time.Time, 1)
	go func() {
		_, rel, err := second.AcquireSweep(ctx, "Sessions")
		if err != nil {
			t.Error(err)
		} else {
			defer rel(ctx)
		}
		got <- time.Now()
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		t.Logf("hand-over after release: %v", at.Sub(released))
		if at.Before(released) {
			t.Fatal("second holder got the table before the first released it")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second AcquireSweep did not get the table within 10s of the release")
	}
}

func TestFileSweepCursor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.json")
	s := openT(t, path)
	sweepCursorContract(t, s)
	secondAcquireWaits(t, s, s)
	if err := s.Save(context.Background(), "arn", "shard-1", Checkpoint{SequenceNumber: "5"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"version": 3`) || !strings.Contains(string(b), `"window": "2026-11-22T09:02:00.001Z"`) {
		t.Errorf("file with a sweep cursor:\n%s", b)
	}
	s2 := openT(t, path)
	defer s2.Close()
	checkCursor(t, s2, "Sessions", win2.Add(time.Millisecond))
	if cps, _ := s2.Load(context.Background(), "arn"); cps["shard-1"].SequenceNumber != "5" {
		t.Errorf("shard checkpoints beside the cursor: %v", cps)
	}
}

// Files written before sweep cursors existed load, and gain the section
// (and version 3) with the first cursor; files without one stay version 2.
func TestFileSweepOldVersions(t *testing.T) {
	ctx := context.Background()
	for _, old := range []string{
		`{"version":1,"streams":{"arn":{"a":{"sequenceNumber":"5","finished":true}}}}`,
		`{"version":2,"streams":{"arn":{"a":{"sequenceNumber":"5","finished":true,"finishedAt":"2026-11-22T09:00:00Z"}}}}`,
	} {
		path := filepath.Join(t.TempDir(), "cp.json")
		if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		s := openT(t, path)
		checkCursor(t, s, "Sessions", time.Time{})
		if err := s.Save(ctx, "arn", "b", Checkpoint{SequenceNumber: "7"}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"version": 2`) {
			t.Errorf("file without a sweep cursor written as:\n%s", b)
		}
		_, release, err := s.AcquireSweep(ctx, "Sessions")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSweepCursor(ctx, "Sessions", win1); err != nil {
			t.Fatal(err)
		}
		release(ctx)
		s.Close()
		s2 := openT(t, path)
		checkCursor(t, s2, "Sessions", win1)
		if cps, _ := s2.Load(ctx, "arn"); !cps["a"].Finished || cps["b"].SequenceNumber != "7" {
			t.Errorf("checkpoints after the cursor was added: %v", cps)
		}
		s2.Close()
	}
}

func TestFileSweepBadFiles(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"version":2,"streams":{},"sweep":{"Sessions":{"window":"2026-11-22T09:00:00Z"}}}`, "needs version 3"},
		{`{"version":3,"streams":{},"sweep":{"Sessions":{"window":"yesterday"}}}`, `sweep["Sessions"].window`},
		{`{"version":3,"streams":{},"sweep":{"Sessions":{"window":"0001-01-01T00:00:00Z"}}}`, `sweep["Sessions"].window`},
		{`{"version":3,"streams":{},"sweep":{"a b":{"window":"2026-11-22T09:00:00Z"}}}`, "field sweep: table"},
		{`{"version":3,"streams":{},"sweep":{"Sessions":{"window":"2026-11-22T09:00:00Z","x":1}}}`, "unknown field"},
		{`{"version":4,"streams":{}}`, "unsupported value 4"},
	} {
		path := filepath.Join(t.TempDir(), "cp.json")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFile(path)
		if err == nil {
			s.Close()
			t.Errorf("%s: opened, want an error naming %s", tc.body, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want it to name %s and the file", tc.body, err, tc.want)
		}
	}
}

// Closing the file store ends every hold.
func TestFileSweepClose(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "cp.json"))
	held, _, err := s.AcquireSweep(context.Background(), "Sessions")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !errors.Is(context.Cause(held), errFileStoreClosed) {
		t.Fatalf("held after Close: cause %v", context.Cause(held))
	}
	if _, _, err := s.AcquireSweep(context.Background(), "Sessions"); err == nil {
		t.Fatal("AcquireSweep on a closed store succeeded")
	}
}

func TestDynamoSweepCursor(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	a := openStore(t, te, "leases", "a", storeOpts{lease: 2 * time.Second})
	b := openStore(t, te, "leases", "b", storeOpts{lease: 2 * time.Second})
	sweepCursorContract(t, a)
	checkCursor(t, b, "Sessions", win2.Add(time.Millisecond))
	r := getRow(t, a, "sweep#Sessions", "cursor")
	if r.owner != "" || r.counter != 2 || r.sweepMS != win2.Add(time.Millisecond).UnixMilli() {
		t.Errorf("released sweeper item = %+v, want no owner, counter 2, the cursor", r)
	}
	secondAcquireWaits(t, a, b)
	secondAcquireWaits(t, b, b) // two callers in one process
}

// A holder keeps the table for many lease durations: renewals run on the
// store's timer while the sweeper is busy.
func TestDynamoSweepHoldIsRenewed(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	a := openStore(t, te, "leases", "a", storeOpts{lease: time.Second})
	b := openStore(t, te, "leases", "b", storeOpts{lease: time.Second})
	held, release, err := a.AcquireSweep(context.Background(), "Sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if _, _, err := b.AcquireSweep(ctx, "Sessions"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b's AcquireSweep while a holds: %v", err)
	}
	if held.Err() != nil {
		t.Fatalf("a's hold ended after 4 lease durations: %v", context.Cause(held))
	}
	if err := a.Ready(); err != nil {
		t.Errorf("Ready while holding: %v", err)
	}
}

// sweepPair opens workers a and b on one lease table (2 s leases); a holds
// the table "Sessions" with its cursor at win1.
func sweepPair(t *testing.T) (te *enginetest.Bed, a, b *DynamoStore, held context.Context, release func(context.Context) error) {
	t.Helper()
	te = enginetest.Start(t, engine.Options{TTLInterval: -1})
	a = openStore(t, te, "leases", "a", storeOpts{lease: 2 * time.Second})
	b = openStore(t, te, "leases", "b", storeOpts{lease: 2 * time.Second})
	ctx := context.Background()
	held, release, err := a.AcquireSweep(ctx, "Sessions")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SaveSweepCursor(ctx, "Sessions", win1); err != nil {
		t.Fatal(err)
	}
	return te, a, b, held, release
}

// A killed holder's lease is taken once it expired, not before.
func TestDynamoSweepKilledHolder(t *testing.T) {
	_, a, b, held, _ := sweepPair(t)
	ctx := context.Background()
	expiry := time.UnixMilli(getRow(t, b, "sweep#Sessions", "cursor").expiryMS)
	a.Crash()
	select {
	case <-held.Done():
	case <-time.After(time.Second):
		t.Error("a's hold not cancelled by the crash")
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, release, err := b.AcquireSweep(actx, "Sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer release(ctx)
	took := time.Now()
	// The expiry may have moved by one more renewal in flight at the crash.
	if took.Before(expiry) {
		t.Fatalf("b took the lease at %v, before a's expiry %v", took, expiry)
	}
	t.Logf("take-over %v after the expiry seen at the crash (lease 2s)", took.Sub(expiry))
	checkCursor(t, b, "Sessions", win1)
	if err := b.SaveSweepCursor(ctx, "Sessions", win2); err != nil {
		t.Fatal(err)
	}
}

// A holder whose renewals fail stops (held cancelled with ErrRenewFailed)
// before its lease expires; once another worker took the table, the stale
// holder's cursor writes fail with ErrLeaseLost and its release frees
// nothing.
func TestDynamoSweepStaleHolder(t *testing.T) {
	te, a, b, held, releaseA := sweepPair(t)
	ctx := context.Background()
	var stoppedAt atomic.Int64
	context.AfterFunc(held, func() { stoppedAt.Store(time.Now().UnixMilli()) })
	te.Engine.SetHook(func(op string, r *http.Request) error {
		if enginetest.AccessKey(r) == "a" && op == "UpdateItem" {
			return engine.NewError("ThrottlingException", "Rate of requests exceeds the allowed throughput.", 400)
		}
		return nil
	})
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, releaseB, err := b.AcquireSweep(actx, "Sessions")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Now().UnixMilli()
	if c := context.Cause(held); !errors.Is(c, ErrRenewFailed) {
		t.Fatalf("a's hold when b took the table: cause %v, want ErrRenewFailed", c)
	}
	if stop := stoppedAt.Load(); stop == 0 || stop >= took {
		t.Errorf("a stopped at %d, not before b took the table at %d", stop, took)
	}
	te.Engine.SetHook(nil)
	if err := b.SaveSweepCursor(ctx, "Sessions", win2); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveSweepCursor(ctx, "Sessions", win2.Add(time.Hour)); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale holder's SaveSweepCursor: %v, want ErrLeaseLost", err)
	}
	if err := releaseA(ctx); err != nil {
		t.Errorf("stale holder's release: %v", err)
	}
	if r := getRow(t, b, "sweep#Sessions", "cursor"); r.owner != "b" || r.sweepMS != win2.UnixMilli() {
		t.Fatalf("after the stale holder's writes: %+v, want owner b, cursor %v", r, win2)
	}
	if err := releaseB(ctx); err != nil {
		t.Fatal(err)
	}
}

// Three workers contend for one table for several seconds, holding it for
// random times, while a third of the lease writes are throttled: at no
// moment do two of them hold it.
func TestDynamoSweepExclusive(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	te.Engine.SetHook(func(op string, r *http.Request) error {
		if op == "UpdateItem" && rand.N(3) == 0 {
			return engine.Throttle()
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var holders atomic.Int32
	var mu sync.Mutex
	holds := map[string]int{}
	var wg sync.WaitGroup
	for _, w := range []string{"a", "b", "c"} {
		s := openStore(t, te, "leases", w, storeOpts{lease: time.Second})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				held, release, err := s.AcquireSweep(ctx, "Sessions")
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: %v", w, err)
					}
					return
				}
				if n := holders.Add(1); n != 1 {
					t.Errorf("%s acquired the table while %d other holders held it", w, n-1)
				}
				mu.Lock()
				holds[w]++
				mu.Unlock()
				select {
				case <-held.Done():
				case <-time.After(time.Duration(rand.N(300)) * time.Millisecond):
				}
				holders.Add(-1)
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = release(rctx)
				rcancel()
			}
		}()
	}
	wg.Wait()
	t.Logf("holds per worker: %v", holds)
	if len(holds) < 2 {
		t.Errorf("holds %v: the table never changed hands", holds)
	}
}

// A worker waiting for the table rides out a lease table that does not
// answer, reporting it in Ready, and takes the table once it answers and
// is free; an error no retry fixes ends the wait.
func TestDynamoSweepWaitsThroughOutage(t *testing.T) {
	te, a, b, _, releaseA := sweepPair(t)
	te.Engine.SetHook(func(op string, r *http.Request) error {
		if enginetest.AccessKey(r) == "b" {
			return engine.NewError("InternalServerError", "Internal server error", 500)
		}
		return nil
	})
	got := make(chan error, 1)
	go func() {
		_, release, err := b.AcquireSweep(context.Background(), "Sessions")
		if err == nil {
			defer release(context.Background())
		}
		got <- err
	}()
	eventually.Wait(t, 10*time.Second, "b reports the outage", func() error {
		if b.Ready() == nil {
			return errors.New("b ready")
		}
		return nil
	})
	if err := releaseA(context.Background()); err != nil {
		t.Fatal(err)
	}
	te.Engine.SetHook(nil)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("b's AcquireSweep after the outage: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b did not take the table once the lease table answered")
	}
	eventually.Wait(t, 10*time.Second, "b ready again", b.Ready)

	te.Engine.SetHook(func(op string, r *http.Request) error {
		if enginetest.AccessKey(r) == "a" {
			return engine.NewError("AccessDeniedException", "not authorized to perform dynamodb:GetItem", 400)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := a.AcquireSweep(ctx, "Sessions"); err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("AcquireSweep with access denied: %v (ctx %v), want the error at once", err, ctx.Err())
	}
}
