package state

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

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/leasetable"
	"github.com/ttl-archiver/archiver/lease"
	"github.com/ttl-archiver/archiver/lease/leasetest"
)

var (
	win0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	win1 = win0.Add(time.Minute)
	win2 = win1.Add(time.Minute)
)

// openFile opens a checkpoint file store at path and its sweeper's store;
// the file store closes with the test.
func openFile(t *testing.T, path string) (*checkpoint.FileStore, *File) {
	t.Helper()
	fs, err := checkpoint.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs, NewFile(fs)
}

// worker is one worker of a test on the lease table: its lease store, the
// sweeper's store in it, and the client a Crash cuts.
type worker struct {
	*Dynamo
	leases *lease.Store
	client *leasetest.Client
}

// openWorker opens worker name's lease store on the lease table "leases"
// with lease duration d; it closes with the test.
func openWorker(t *testing.T, te *enginetest.Bed, name string, d time.Duration) *worker {
	t.Helper()
	return openWorkerIn(t, te, name, "", d)
}

// openWorkerIn is openWorker in namespace ns of the lease table ("": none).
func openWorkerIn(t *testing.T, te *enginetest.Bed, name, ns string, d time.Duration) *worker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := leasetest.Killable(te.Client(name))
	ls, err := lease.Open(ctx, lease.Options{
		Client: client, Table: "leases", Namespace: ns, Create: true, WorkerID: name,
		LeaseDuration: d, RenewEvery: d / 10, // many chances to renew on a loaded machine
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name),
	})
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", name, err)
	}
	t.Cleanup(func() { ls.Close() })
	return &worker{Dynamo: NewDynamo(ls), leases: ls, client: client}
}

// Ready is the lease store's readiness.
func (w *worker) Ready() error { return w.leases.Ready() }

// Crash simulates a killed process: renewals stop, nothing more is
// written, and every hold is cancelled.
func (w *worker) Crash() {
	w.client.Kill()
	w.leases.Close()
}

// getRow reads an item of the lease table as it is stored.
func getRow(t *testing.T, w *worker, stream, shard string) leasetable.Row {
	t.Helper()
	return leasetest.Row(t, w.table.Client, w.table.Name, stream, shard)
}

// checkCursor fails unless the store's cursor of table is want.
func checkCursor(t *testing.T, s Store, table string, want time.Time) {
	t.Helper()
	got, err := s.LoadSweepCursor(context.Background(), table)
	if err != nil || !got.Equal(want) {
		t.Fatalf("LoadSweepCursor(%s) = %v, %v; want %v", table, got, err, want)
	}
}

// sweepCursorContract runs what every Store must do with one holder.
func sweepCursorContract(t *testing.T, s Store) {
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
func secondAcquireWaits(t *testing.T, first, second Store) {
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
	fs, s := openFile(t, path)
	sweepCursorContract(t, s)
	secondAcquireWaits(t, s, s)
	if err := fs.Save(context.Background(), "arn", "shard-1", checkpoint.Checkpoint{SequenceNumber: "5"}); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"version": 3`) || !strings.Contains(string(b), `"window": "2026-11-22T09:02:00.001Z"`) {
		t.Errorf("file with a sweep cursor:\n%s", b)
	}
	fs2, s2 := openFile(t, path)
	checkCursor(t, s2, "Sessions", win2.Add(time.Millisecond))
	if cps, _ := fs2.Load(context.Background(), "arn"); cps["shard-1"].SequenceNumber != "5" {
		t.Errorf("shard checkpoints beside the cursor: %v", cps)
	}
}

// Closing the file store ends every hold, and the wait of a second caller
// for the table.
func TestFileSweepClose(t *testing.T) {
	fs, s := openFile(t, filepath.Join(t.TempDir(), "cp.json"))
	held, _, err := s.AcquireSweep(context.Background(), "Sessions")
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() {
		_, _, err := s.AcquireSweep(context.Background(), "Sessions")
		waiter <- err
	}()
	fs.Close()
	select {
	case <-held.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("hold not ended within 10s of Close")
	}
	if c := context.Cause(held); c == nil || c.Error() != "checkpoint: file store closed" {
		t.Fatalf("held after Close: cause %v", c)
	}
	select {
	case err := <-waiter:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("waiting AcquireSweep after Close: %v, want the store closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiting AcquireSweep still waits 10s after Close")
	}
	if _, _, err := s.AcquireSweep(context.Background(), "Sessions"); err == nil {
		t.Fatal("AcquireSweep on a closed store succeeded")
	}
}

func TestDynamoSweepCursor(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	a := openWorker(t, te, "a", 2*time.Second)
	b := openWorker(t, te, "b", 2*time.Second)
	sweepCursorContract(t, a)
	checkCursor(t, b, "Sessions", win2.Add(time.Millisecond))
	r := getRow(t, a, "sweep#Sessions", "cursor")
	if r.Owner != "" || r.Counter != 2 || r.SweepMS != win2.Add(time.Millisecond).UnixMilli() {
		t.Errorf("released sweeper item = %+v, want no owner, counter 2, the cursor", r)
	}
	secondAcquireWaits(t, a, b)
	secondAcquireWaits(t, b, b) // two callers in one process
}

// TestDynamoSweepNamespaces: two deployments sharing one lease table
// (archiver sweep --checkpoint-namespace) each hold the lock of a table of
// the same name at once and keep cursors of their own, under keys
// prefixed with their namespace.
func TestDynamoSweepNamespaces(t *testing.T) {
	ctx := context.Background()
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	blue := openWorkerIn(t, te, "a", "blue", 2*time.Second)
	green := openWorkerIn(t, te, "b", "green", 2*time.Second)
	for i, w := range []*worker{blue, green} {
		_, release, err := w.AcquireSweep(ctx, "Sessions")
		if err != nil {
			t.Fatalf("AcquireSweep in namespace %d: %v", i, err)
		}
		defer release(ctx)
		if err := w.SaveSweepCursor(ctx, "Sessions", win1.Add(time.Duration(i+1)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	checkCursor(t, blue, "Sessions", win1.Add(time.Minute))
	checkCursor(t, green, "Sessions", win1.Add(2*time.Minute))
	for ns, owner := range map[string]string{"blue": "a", "green": "b"} {
		if r := leasetest.Row(t, te.Client("plain"), "leases", leasetable.NamespacePrefix(ns)+"sweep#Sessions", "cursor"); r.Owner != owner {
			t.Errorf("%s's sweeper item as stored: %+v, want owner %s", ns, r, owner)
		}
	}
}

// A holder keeps the table for many lease durations: renewals run on the
// store's timer while the sweeper is busy.
func TestDynamoSweepHoldIsRenewed(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	a := openWorker(t, te, "a", time.Second)
	b := openWorker(t, te, "b", time.Second)
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
func sweepPair(t *testing.T) (te *enginetest.Bed, a, b *worker, held context.Context, release func(context.Context) error) {
	t.Helper()
	te = enginetest.Start(t, engine.Options{TTLInterval: -1})
	a = openWorker(t, te, "a", 2*time.Second)
	b = openWorker(t, te, "b", 2*time.Second)
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
	expiry := time.UnixMilli(getRow(t, b, "sweep#Sessions", "cursor").ExpiryMS)
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

// A holder whose renewals fail stops (held cancelled with lease.ErrRenewFailed)
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
	if c := context.Cause(held); !errors.Is(c, lease.ErrRenewFailed) {
		t.Fatalf("a's hold when b took the table: cause %v, want lease.ErrRenewFailed", c)
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
	if r := getRow(t, b, "sweep#Sessions", "cursor"); r.Owner != "b" || r.SweepMS != win2.UnixMilli() {
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
		s := openWorker(t, te, w, time.Second)
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
