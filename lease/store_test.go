package lease

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/leasetable"
	"github.com/ttl-archiver/archiver/lease/leasetest"
)

type storeOpts struct {
	lease, renew time.Duration
	prune        time.Duration
	now          func() time.Time
	reg          prometheus.Registerer
	ns           string // Options.Namespace
}

// Checkpoint is what the tests save through the leases: a shard's
// checkpoint in its lease's item (checkpoint.DynamoStore).
type Checkpoint = checkpoint.Checkpoint

// row is an item of the lease table, decoded.
type row = leasetable.Row

// testStore is one worker of a test: its leases, the checkpoint store
// they fence, and the client a Crash cuts.
type testStore struct {
	*Store
	cps    *checkpoint.DynamoStore
	client *leasetest.Client
}

// Save saves a checkpoint through the leases, as the consumer does.
func (s *testStore) Save(ctx context.Context, stream, shard string, cp Checkpoint) error {
	return s.cps.Save(ctx, stream, shard, cp)
}

// Load loads the stream's checkpoints.
func (s *testStore) Load(ctx context.Context, stream string) (map[string]Checkpoint, error) {
	return s.cps.Load(ctx, stream)
}

// Crash simulates a killed process: renewals and heartbeats stop, nothing
// more is written (Save and Release fail), and every assignment's context
// is cancelled.
func (s *testStore) Crash() {
	s.client.Kill()
	s.Close()
}

func openStore(t *testing.T, te *enginetest.Bed, table, worker string, so storeOpts) *testStore {
	t.Helper()
	if so.lease == 0 {
		so.lease = 2 * time.Second
	}
	if so.renew == 0 {
		so.renew = so.lease / 10 // many chances to renew on a loaded machine
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := leasetest.Killable(te.Client(worker))
	s, err := Open(ctx, Options{
		Client: client, Table: table, Namespace: so.ns, Create: true, WorkerID: worker,
		LeaseDuration: so.lease, RenewEvery: so.renew, Now: so.now, PruneFinishedAfter: so.prune,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(worker), Registerer: so.reg,
	})
	if err != nil {
		t.Fatalf("Open(%s, namespace %q): %v", worker, so.ns, err)
	}
	t.Cleanup(func() { s.Close() })
	return &testStore{Store: s, cps: checkpoint.NewDynamo(s), client: client}
}

// metricValue reads a metric of the store from its test registry.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func shards(ids ...string) []readyShard {
	out := make([]readyShard, len(ids))
	for i, id := range ids {
		out[i] = readyShard{id: id}
	}
	return out
}

func ids(as []assigned) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.shard
	}
	return out
}

func getRow(t *testing.T, s *testStore, stream, shard string) row {
	t.Helper()
	return leasetest.Row(t, s.table.Client, s.table.Name, stream, shard)
}

const testStream = "arn:aws:dynamodb:us-east-1:000000000000:table/T/stream/2026-01-01T00:00:00.000"

func TestOpenTable(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	_, err := Open(ctx, Options{Client: te.Client("a"), Table: "leases", WorkerID: "a"})
	if err == nil || !strings.Contains(err.Error(), "create=true") {
		t.Fatalf("missing table without Create: err = %v, want one suggesting create=true", err)
	}
	s := openStore(t, te, "leases", "a", storeOpts{})
	desc, err := s.table.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("leases")})
	if err != nil {
		t.Fatal(err)
	}
	if desc.Table.TableStatus != types.TableStatusActive {
		t.Errorf("status %s, want ACTIVE", desc.Table.TableStatus)
	}
	if bm := desc.Table.BillingModeSummary; bm == nil || bm.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode summary %+v, want PAY_PER_REQUEST", bm)
	}
	// A second worker opens the existing table, with or without Create.
	openStore(t, te, "leases", "b", storeOpts{})
	if _, err := Open(ctx, Options{Client: te.Client("c"), Table: "leases", WorkerID: "c"}); err != nil {
		t.Fatalf("existing table without Create: %v", err)
	}
	// A table with another key schema is refused.
	_, err = s.table.Client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("other"), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Options{Client: te.Client("c"), Table: "other", WorkerID: "c"}); err == nil || !strings.Contains(err.Error(), "not a lease table") {
		t.Fatalf("foreign table: err = %v", err)
	}
}

func TestOpenOptionErrors(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	c := te.Client("x")
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no client", Options{Table: "t12", WorkerID: "w"}, "Client"},
		{"no table", Options{Client: c, WorkerID: "w"}, "Table"},
		{"no worker", Options{Client: c, Table: "t12"}, "WorkerID"},
		{"renew too slow", Options{Client: c, Table: "t12", WorkerID: "w", LeaseDuration: time.Second, RenewEvery: time.Second}, "RenewEvery"},
		{"negative", Options{Client: c, Table: "t12", WorkerID: "w", LeaseDuration: -time.Second}, "LeaseDuration"},
		{"margin", Options{Client: c, Table: "t12", WorkerID: "w", LeaseDuration: time.Second, RenewEvery: 100 * time.Millisecond, SafetyMargin: time.Second}, "SafetyMargin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestSaveLoadRelease(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	s := openStore(t, te, "leases", "a", storeOpts{lease: 5 * time.Second})

	if err := s.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "100"}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Save without a lease: %v, want ErrLeaseLost", err)
	}
	got, err := s.leases.assign(ctx, testStream, []readyShard{{id: "s1"}, {id: "s2", parents: []string{"s0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(got)) != "[s1 s2]" {
		t.Fatalf("assigned %v, want [s1 s2]", ids(got))
	}
	if err := s.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "100"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, testStream, "s2", Checkpoint{SequenceNumber: "7"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "200", Finished: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, testStream, "s1", true); err != nil {
		t.Fatal(err)
	}
	if got[0].ctx.Err() == nil {
		t.Error("released shard's assignment context not cancelled")
	}
	if err := s.Release(ctx, testStream, "s1", true); err != nil {
		t.Errorf("second Release: %v", err)
	}
	cps, err := s.Load(ctx, testStream)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Checkpoint{"s1": {SequenceNumber: "200", Finished: true}, "s2": {SequenceNumber: "7"}}
	if fmt.Sprint(cps) != fmt.Sprint(want) {
		t.Fatalf("Load = %v, want %v", cps, want)
	}
	r := getRow(t, s, testStream, "s1")
	if r.Owner != "" || !r.Finished || r.Counter != 2 {
		t.Errorf("released finished row = %+v, want no owner, finished, counter 2", r)
	}
	if r := getRow(t, s, testStream, "s2"); fmt.Sprint(r.Parents) != "[s0]" || r.Owner != "a" {
		t.Errorf("row s2 = %+v, want parents [s0], owner a", r)
	}
	// Other streams are not mixed in, and heartbeats are not checkpoints.
	if cps, err := s.Load(ctx, testStream+"x"); err != nil || len(cps) != 0 {
		t.Errorf("Load(other stream) = %v, %v", cps, err)
	}
	// A finished shard is never assigned again.
	again, err := s.leases.assign(ctx, testStream, shards("s1", "s2"))
	if err != nil || fmt.Sprint(ids(again)) != "[s2]" {
		t.Fatalf("assign after finish = %v, %v; want [s2]", ids(again), err)
	}
	if err := s.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if r := getRow(t, s, testStream, "s2"); r.Owner != "" || r.Checkpoint != "7" {
		t.Errorf("after ReleaseAll: %+v", r)
	}
}

// A stale owner (its lease expired and was taken) can never write a
// checkpoint over the new owner's.
func TestFencingStaleOwner(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	// a renews too late (a stalled process): b, having seen a's lease
	// unchanged for longer than a lease duration by its own clock, takes
	// it while a still believes it holds it.
	a := openStore(t, te, "leases", "a", storeOpts{lease: 3 * time.Minute, renew: time.Minute})
	var bAhead atomic.Int64
	b := openStore(t, te, "leases", "b", storeOpts{lease: 3 * time.Minute, now: func() time.Time { return time.Now().Add(time.Duration(bAhead.Load())) }})
	ga, err := a.leases.assign(ctx, testStream, shards("s1"))
	if err != nil || len(ga) != 1 {
		t.Fatalf("a: %v %v", ga, err)
	}
	if err := a.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "10"}); err != nil {
		t.Fatal(err)
	}
	if gb, err := b.leases.assign(ctx, testStream, shards("s1")); err != nil || len(gb) != 0 {
		t.Fatalf("b took a lease it had just seen held: %v %v", ids(gb), err)
	}
	bAhead.Store(int64(4 * time.Minute))
	gb, err := b.leases.assign(ctx, testStream, shards("s1"))
	if err != nil || len(gb) != 1 {
		t.Fatalf("b did not take the expired lease: %v %v", ids(gb), err)
	}
	if err := b.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "20"}); err != nil {
		t.Fatal(err)
	}
	err = a.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "15"})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale owner's Save: %v, want ErrLeaseLost", err)
	}
	if ga[0].ctx.Err() == nil || !errors.Is(context.Cause(ga[0].ctx), ErrLeaseLost) {
		t.Errorf("stale owner's assignment: err %v cause %v, want cancelled with ErrLeaseLost", ga[0].ctx.Err(), context.Cause(ga[0].ctx))
	}
	if err := a.Release(ctx, testStream, "s1", false); err != nil {
		t.Errorf("stale owner's Release: %v", err)
	}
	r := getRow(t, b, testStream, "s1")
	if r.Owner != "b" || r.Checkpoint != "20" {
		t.Fatalf("row = %+v, want owner b, checkpoint 20", r)
	}
	// b keeps its lease and checkpoints.
	if err := b.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "30"}); err != nil {
		t.Fatal(err)
	}
}

// A worker that stops renewing (killed) loses its leases once they expire,
// and another worker takes them over.
func TestExpiryTakeover(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	a := openStore(t, te, "leases", "a", storeOpts{lease: 4 * time.Second})
	regB := prometheus.NewRegistry()
	b := openStore(t, te, "leases", "b", storeOpts{lease: 4 * time.Second, reg: regB})
	all := shards("s1", "s2", "s3", "s4")
	ga, err := a.leases.assign(ctx, testStream, all)
	if err != nil || len(ga) != 4 {
		t.Fatalf("a: %v %v", ids(ga), err)
	}
	// While a holds them, b gets none (it asks for a hand-off, which
	// nobody serves here).
	gb, err := b.leases.assign(ctx, testStream, all)
	if err != nil || len(gb) != 0 {
		t.Fatalf("b took live leases: %v %v", ids(gb), err)
	}
	a.Crash()
	start := time.Now()
	eventually.Wait(t, 30*time.Second, "b takes a's expired leases", func() error {
		gb, err = b.leases.assign(ctx, testStream, all)
		if err != nil {
			return err
		}
		if len(gb) != 4 {
			return fmt.Errorf("b holds %v", ids(gb))
		}
		return nil
	})
	t.Logf("take-over after a crash: %v (lease 4s)", time.Since(start))
	if n := metricValue(t, regB, "archiver_lease_takes_total"); n < 4 {
		t.Errorf("takes = %v", n)
	}
	if n := metricValue(t, regB, "archiver_leases_held"); n != 4 {
		t.Errorf("held = %v", n)
	}
	for _, sh := range []string{"s1", "s2", "s3", "s4"} {
		if err := a.Save(ctx, testStream, sh, Checkpoint{SequenceNumber: "1"}); err == nil {
			t.Errorf("crashed store wrote %s", sh)
		}
		if r := getRow(t, b, testStream, sh); r.Owner != "b" || r.Counter != 2 {
			t.Errorf("%s: %+v", sh, r)
		}
	}
}

// Balancing: a newcomer asks the loaded worker for a lease; the owner's
// assignment is cancelled (ErrHandOff), it checkpoints and releases, and the
// lease goes straight to the newcomer.
func TestHandOff(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	a := openStore(t, te, "leases", "a", storeOpts{lease: 5 * time.Second})
	regB := prometheus.NewRegistry()
	b := openStore(t, te, "leases", "b", storeOpts{lease: 5 * time.Second, reg: regB})
	all := shards("s1", "s2", "s3", "s4")
	ga, err := a.leases.assign(ctx, testStream, all)
	if err != nil || len(ga) != 4 {
		t.Fatalf("a: %v %v", ids(ga), err)
	}
	// a's reader loop: on a hand-off, checkpoint and release.
	var released sync.Map
	for _, as := range ga {
		go func() {
			<-as.ctx.Done()
			if !errors.Is(context.Cause(as.ctx), ErrHandOff) {
				return
			}
			if err := a.Save(ctx, testStream, as.shard, Checkpoint{SequenceNumber: "42"}); err != nil {
				t.Errorf("final checkpoint of %s during hand-off: %v", as.shard, err)
			}
			if err := a.Release(ctx, testStream, as.shard, false); err != nil {
				t.Errorf("release %s: %v", as.shard, err)
			}
			released.Store(as.shard, true)
		}()
	}
	var gb []assigned
	eventually.Wait(t, 30*time.Second, "b gets its fair share by hand-off", func() error {
		gb, err = b.leases.assign(ctx, testStream, all)
		if err != nil {
			return err
		}
		if len(gb) != 2 {
			return fmt.Errorf("b holds %v", ids(gb))
		}
		return nil
	})
	// Settled: b holds 2, a holds 2, no more requests.
	ga, err = a.leases.assign(ctx, testStream, all)
	if err != nil || len(ga) != 2 {
		t.Fatalf("a after hand-off: %v %v", ids(ga), err)
	}
	for _, as := range gb {
		if r := getRow(t, b, testStream, as.shard); r.Owner != "b" || r.Checkpoint != "42" || r.Handoff != "" {
			t.Errorf("handed-over %s: %+v", as.shard, r)
		}
		if _, ok := released.Load(as.shard); !ok {
			t.Errorf("%s reached b without a's release", as.shard)
		}
	}
	if n := metricValue(t, regB, "archiver_lease_steals_total"); n != 2 {
		t.Errorf("steals = %v, want 2", n)
	}
	time.Sleep(3 * time.Second)
	ga2, _ := a.leases.assign(ctx, testStream, all)
	gb2, _ := b.leases.assign(ctx, testStream, all)
	if len(ga2) != 2 || len(gb2) != 2 {
		t.Errorf("not stable: a %v, b %v", ids(ga2), ids(gb2))
	}
}

// A busy consumer (nobody calls Assign or Save for a long time) does not
// stop renewal, which runs on its own timer: the lease's expiry keeps
// moving and nobody else can take it (unless renewals failed outright, as
// on an overloaded machine, which the store then reports).
func TestRenewWhileConsumerBlocked(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	regA := prometheus.NewRegistry()
	a := openStore(t, te, "leases", "a", storeOpts{lease: 2 * time.Second, reg: regA})
	b := openStore(t, te, "leases", "b", storeOpts{lease: 2 * time.Second})
	ga, err := a.leases.assign(ctx, testStream, shards("s1"))
	if err != nil || len(ga) != 1 {
		t.Fatal(ids(ga), err)
	}
	// The "consumer" is stuck for several lease durations; meanwhile b
	// keeps trying to take the shard.
	expiries := map[int64]bool{}
	taken := false
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !taken {
		gb, err := b.leases.assign(ctx, testStream, shards("s1"))
		if err != nil {
			t.Fatal(err)
		}
		taken = len(gb) != 0
		expiries[getRow(t, a, testStream, "s1").ExpiryMS] = true
		time.Sleep(100 * time.Millisecond)
	}
	if taken || ga[0].ctx.Err() != nil {
		if metricValue(t, regA, "archiver_lease_renew_failures_total") == 0 {
			t.Fatalf("lease lost (taken %v, cause %v) without a failed renewal", taken, context.Cause(ga[0].ctx))
		}
		t.Logf("renewals failed on this loaded machine; the lease was given up safely (cause %v)", context.Cause(ga[0].ctx))
		return
	}
	if len(expiries) < 5 {
		t.Fatalf("lease expiry moved only %d times in 5 s (renewing every 200 ms)", len(expiries))
	}
	if err := a.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "5"}); err != nil {
		t.Fatal(err)
	}
}

// A throttled lease table: saves retry through brief throttling; renewals
// that keep failing stop the reader before the lease expires, and only then
// can another worker take the shard.
func TestThrottledTable(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	regA := prometheus.NewRegistry()
	a := openStore(t, te, "leases", "a", storeOpts{lease: 4 * time.Second, reg: regA})
	b := openStore(t, te, "leases", "b", storeOpts{lease: 4 * time.Second})
	ga, err := a.leases.assign(ctx, testStream, shards("s1"))
	if err != nil || len(ga) != 1 {
		t.Fatal(ids(ga), err)
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("Ready with a fresh lease: %v", err)
	}

	// Brief throttling: a's next 5 requests are throttled, then pass.
	var left atomic.Int32
	left.Store(5)
	te.Engine.SetHook(func(op string, r *http.Request) error {
		if enginetest.AccessKey(r) == "a" && left.Add(-1) >= 0 {
			return engine.Throttle()
		}
		return nil
	})
	if err := a.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "9"}); err != nil {
		t.Fatalf("Save through brief throttling: %v", err)
	}
	if getRow(t, b, testStream, "s1").Checkpoint != "9" {
		t.Fatal("checkpoint not written")
	}

	// Lasting throttling of a's lease writes.
	var stoppedAt atomic.Int64
	go func() {
		<-ga[0].ctx.Done()
		stoppedAt.Store(time.Now().UnixMilli())
	}()
	te.Engine.SetHook(func(op string, r *http.Request) error {
		if enginetest.AccessKey(r) == "a" && (op == "UpdateItem" || op == "PutItem") {
			return engine.NewError("ThrottlingException", "Rate of requests exceeds the allowed throughput.", 400)
		}
		return nil
	})
	eventually.Wait(t, 30*time.Second, "a stops reading", func() error {
		if ga[0].ctx.Err() == nil {
			return errors.New("still reading")
		}
		return nil
	})
	if err := a.Ready(); err == nil {
		t.Error("Ready while every lease write is throttled: nil, want an error")
	}
	if c := context.Cause(ga[0].ctx); !errors.Is(c, ErrRenewFailed) {
		t.Errorf("cause %v, want ErrRenewFailed", c)
	}
	expiry := getRow(t, b, testStream, "s1").ExpiryMS
	if stop := stoppedAt.Load(); stop == 0 || stop >= expiry {
		t.Errorf("a stopped reading at %d, not before its lease expiry %d", stop, expiry)
	}
	eventually.Wait(t, 30*time.Second, "b takes the expired lease", func() error {
		gb, err := b.leases.assign(ctx, testStream, shards("s1"))
		if err != nil {
			return err
		}
		if len(gb) != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	if n := metricValue(t, regA, "archiver_lease_renew_failures_total"); n < 1 {
		t.Errorf("renew failures = %v", n)
	}
	te.Engine.SetHook(nil)
	if err := a.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: "10"}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a's Save after b took over: %v, want ErrLeaseLost", err)
	}
	eventually.Wait(t, 30*time.Second, "a ready again once the table takes writes", a.Ready)
}

// Children wait while a parent is recorded unfinished and leased.
func TestParentsBeforeChildren(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	a := openStore(t, te, "leases", "a", storeOpts{lease: 5 * time.Second})
	b := openStore(t, te, "leases", "b", storeOpts{lease: 5 * time.Second})
	if g, err := a.leases.assign(ctx, testStream, shards("p")); err != nil || len(g) != 1 {
		t.Fatal(ids(g), err)
	}
	// b's (stale) view says the child is ready: the table says otherwise.
	child := []readyShard{{id: "c", parents: []string{"p"}}}
	if g, err := b.leases.assign(ctx, testStream, child); err != nil || len(g) != 0 {
		t.Fatalf("child leased while its parent is read: %v %v", ids(g), err)
	}
	if err := a.Release(ctx, testStream, "p", true); err != nil {
		t.Fatal(err)
	}
	if g, err := b.leases.assign(ctx, testStream, child); err != nil || len(g) != 1 {
		t.Fatalf("child not leased after its parent finished: %v %v", ids(g), err)
	}
}

func TestCloseCancelsAssignments(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	a := openStore(t, te, "leases", "a", storeOpts{})
	g, err := a.leases.assign(ctx, testStream, shards("s1"))
	if err != nil || len(g) != 1 {
		t.Fatal(ids(g), err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if g[0].ctx.Err() == nil {
		t.Fatal("assignment survives Close")
	}
	if _, err := a.leases.assign(ctx, testStream, shards("s1")); err == nil {
		t.Fatal("Assign after Close succeeded")
	}
}

// Finished shards stay recorded until PruneFinishedAfter; heartbeats of
// long-gone workers are deleted.
func TestPrune(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	a := openStore(t, te, "leases", "a", storeOpts{lease: time.Second, prune: 200 * time.Millisecond})
	if g, err := a.leases.assign(ctx, testStream, shards("s1", "s2")); err != nil || len(g) != 2 {
		t.Fatal(ids(g), err)
	}
	if err := a.Release(ctx, testStream, "s1", true); err != nil {
		t.Fatal(err)
	}
	_, err := a.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("leases"), Item: map[string]types.AttributeValue{
		leasetable.AttrStream: &types.AttributeValueMemberS{Value: leasetable.WorkersPrefix + testStream},
		leasetable.AttrShard:  &types.AttributeValueMemberS{Value: "gone-worker"},
		leasetable.AttrExpiry: leasetable.Num(time.Now().Add(-time.Hour).UnixMilli()),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.leases.assign(ctx, testStream, shards("s2")); err != nil {
		t.Fatal(err)
	}
	if r := getRow(t, a, testStream, "s1"); !r.Exists || !r.Finished {
		t.Fatalf("finished shard pruned too early: %+v", r)
	}
	eventually.Wait(t, 30*time.Second, "finished shard and dead heartbeat pruned", func() error {
		if _, err := a.leases.assign(ctx, testStream, shards("s2")); err != nil {
			return err
		}
		if r := getRow(t, a, testStream, "s1"); r.Exists {
			return fmt.Errorf("s1 still there: %+v", r)
		}
		if r := getRow(t, a, leasetable.WorkersPrefix+testStream, "gone-worker"); r.Exists {
			return errors.New("dead heartbeat still there")
		}
		return nil
	})
	if r := getRow(t, a, testStream, "s2"); r.Owner != "a" {
		t.Fatalf("held shard touched: %+v", r)
	}
	if r := getRow(t, a, leasetable.WorkersPrefix+testStream, "a"); !r.Exists {
		t.Fatal("own heartbeat missing")
	}
}

// A hand-off requested by a worker that is gone since frees the lease
// rather than handing it to nobody.
func TestHandOffToGoneWorker(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	a := openStore(t, te, "leases", "a", storeOpts{lease: 5 * time.Second})
	g, err := a.leases.assign(ctx, testStream, shards("s1"))
	if err != nil || len(g) != 1 {
		t.Fatal(ids(g), err)
	}
	_, err = a.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String("leases"), Key: leasetable.ItemKey(testStream, "s1"),
		UpdateExpression:          aws.String("SET " + leasetable.AttrHandoff + " = :g"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": &types.AttributeValueMemberS{Value: "ghost"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually.Wait(t, 30*time.Second, "a sees the hand-off request", func() error {
		if g[0].ctx.Err() == nil {
			return errors.New("still reading")
		}
		return nil
	})
	if c := context.Cause(g[0].ctx); !errors.Is(c, ErrHandOff) {
		t.Fatalf("cause %v, want ErrHandOff", c)
	}
	if err := a.Release(ctx, testStream, "s1", false); err != nil {
		t.Fatal(err)
	}
	if r := getRow(t, a, testStream, "s1"); r.Owner != "" || r.Handoff != "" {
		t.Fatalf("row = %+v, want free", r)
	}
}

// Free leases beyond this worker's fair share are left for the others, but
// not forever: one nobody took for a lease duration is taken.
func TestFairShareAndLeftovers(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	a := openStore(t, te, "leases", "a", storeOpts{lease: time.Second})
	b := openStore(t, te, "leases", "b", storeOpts{lease: time.Second})
	all := shards("s1", "s2", "s3", "s4")
	// b is live (it has assigned once), so a's share is 2 of 4.
	if g, err := b.leases.assign(ctx, testStream, shards("s1")); err != nil || len(g) != 1 {
		t.Fatal(ids(g), err)
	}
	if err := b.Release(ctx, testStream, "s1", false); err != nil {
		t.Fatal(err)
	}
	g, err := a.leases.assign(ctx, testStream, all)
	if err != nil || len(g) != 2 {
		t.Fatalf("a took %v, want its fair share of 2", ids(g))
	}
	// b never takes the rest (stuck, say): after a lease duration a does.
	eventually.Wait(t, 30*time.Second, "a takes the leftovers", func() error {
		g, err = a.leases.assign(ctx, testStream, all)
		if err != nil {
			return err
		}
		if len(g) != 4 {
			return fmt.Errorf("a holds %v", ids(g))
		}
		return nil
	})
}

// TestLeaseExpiryIgnoresClockSkew: a worker whose clock runs an hour ahead
// of the holder's, or an hour behind, neither takes a lease the holder
// keeps renewing nor waits for the holder's written expiry once it stops:
// it times a lease duration from the last version it saw, on its own clock.
func TestLeaseExpiryIgnoresClockSkew(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run("observer "+skew.String(), func(t *testing.T) {
			te := enginetest.Start(t, engine.Options{TTLInterval: -1})
			ctx := context.Background()
			const lease = 3 * time.Second
			a := openStore(t, te, "leases", "a", storeOpts{lease: lease})
			b := openStore(t, te, "leases", "b", storeOpts{lease: lease, now: func() time.Time { return time.Now().Add(skew) }})
			if ga, err := a.leases.assign(ctx, testStream, shards("s1")); err != nil || len(ga) != 1 {
				t.Fatalf("a: %v %v", ids(ga), err)
			}
			for end := time.Now().Add(lease + time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if gb, err := b.leases.assign(ctx, testStream, shards("s1")); err != nil || len(gb) != 0 {
					t.Fatalf("b took a lease a renews: %v %v", ids(gb), err)
				}
			}
			a.Crash() // renewals stop
			stopped := time.Now()
			for {
				gb, err := b.leases.assign(ctx, testStream, shards("s1"))
				if err != nil {
					t.Fatal(err)
				}
				if len(gb) == 1 {
					break
				}
				if time.Since(stopped) > 10*lease {
					t.Fatalf("b did not take the lease within %v of the holder's last renewal", 10*lease)
				}
				time.Sleep(50 * time.Millisecond)
			}
			took := time.Since(stopped)
			t.Logf("taken %v after the holder stopped renewing (lease %v)", took.Round(time.Millisecond), lease)
		})
	}
}

// Stores of different namespaces share one table without seeing each
// other's leases, heartbeats or checkpoints; the empty namespace keeps
// the keys as they always were.
func TestNamespaces(t *testing.T) {
	te := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	for i, ns := range []string{"", "blue", "green"} {
		s := openStore(t, te, "leases", "w", storeOpts{lease: 5 * time.Second, ns: ns})
		got, err := s.leases.assign(ctx, testStream, shards("s1"))
		if err != nil || fmt.Sprint(ids(got)) != "[s1]" {
			t.Fatalf("namespace %q: assign = %v, %v; want [s1] (another namespace's lease must not count)", ns, ids(got), err)
		}
		seq := fmt.Sprint(100 + i)
		if err := s.Save(ctx, testStream, "s1", Checkpoint{SequenceNumber: seq}); err != nil {
			t.Fatalf("namespace %q: %v", ns, err)
		}
		cps, err := s.Load(ctx, testStream)
		if err != nil || len(cps) != 1 || cps["s1"].SequenceNumber != seq {
			t.Fatalf("namespace %q: Load = %v, %v; want s1 at %s alone", ns, cps, err, seq)
		}
		raw := leasetest.Row(t, s.table.Client, s.table.Name, testStream, "s1")
		if raw.Checkpoint != seq {
			t.Errorf("namespace %q: item through the store's client = %+v", ns, raw)
		}
	}
	plain := te.Client("raw")
	if r := leasetest.Row(t, plain, "leases", testStream, "s1"); r.Checkpoint != "100" {
		t.Errorf("unnamespaced item = %+v, want checkpoint 100 under the bare stream ARN", r)
	}
	if r := leasetest.Row(t, plain, "leases", leasetable.NamespacePrefix("blue")+testStream, "s1"); r.Checkpoint != "101" {
		t.Errorf("namespace blue's item = %+v, want checkpoint 101 under ns/blue#ARN", r)
	}
	if _, err := Open(ctx, Options{Client: plain, Table: "leases", WorkerID: "x", Namespace: "no#pe"}); err == nil {
		t.Error("Open with namespace \"no#pe\" succeeded, want an error")
	}
}
