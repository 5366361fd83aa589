package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/sweep"
)

const sweepConcurrency = sweep.DefaultConcurrency

// sweepSizes are the sweep bench's sizes.
type sweepSizes struct {
	precisionItems int // TTLs within precisionSpan seconds
	precisionSpan  int
	precisionLead  time.Duration // from the load's start to the first TTL
	rateItems      int           // already due, per round of the rate bench
	rateRounds     int
	catchUpItems   int // 100 expiries/s over up to 10 minutes of downtime
}

func sweepSizesFor(tiny bool) sweepSizes {
	if tiny {
		return sweepSizes{precisionItems: 100, precisionSpan: 2, precisionLead: 2 * time.Second, rateItems: 200, rateRounds: 1, catchUpItems: 1000}
	}
	return sweepSizes{precisionItems: 100_000, precisionSpan: 60, precisionLead: 20 * time.Second, rateItems: 30_000, rateRounds: 3, catchUpItems: 60_000}
}

// runSweepBench measures `archiver sweep` on the engine with its own TTL
// off: how soon after their TTL items are deleted, how fast the sweeper
// deletes against plain DeleteItem loops on the same engine, and how long
// it takes to catch up after ten minutes of downtime.
func runSweepBench(ctx context.Context, w io.Writer, tiny bool) error {
	sz := sweepSizesFor(tiny)
	if err := sweepPrecision(ctx, w, sz); err != nil {
		return fmt.Errorf("precision: %w", err)
	}
	if err := sweepRate(ctx, w, sz); err != nil {
		return fmt.Errorf("rate: %w", err)
	}
	if err := sweepCatchUp(ctx, w, sz); err != nil {
		return fmt.Errorf("catch-up: %w", err)
	}
	return nil
}

// sweepBed is an engine (TTL off) with a table in the recipe's shape.
type sweepBed struct {
	srv *engine.Server
	db  *dynamodb.Client
	hc  *http.Client
}

const sweepTable = "sweepbench"

func newSweepBed(ctx context.Context) (*sweepBed, error) {
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		return nil, err
	}
	db, _ := benchkit.PooledClients(srv.Endpoint())
	b := &sweepBed{srv: srv, db: db, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(sweepTable), BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(sweep.DefaultWindowAttribute), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("ttl"), AttributeType: types.ScalarAttributeTypeN}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String(sweep.DefaultIndex),
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(sweep.DefaultWindowAttribute), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("ttl"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}},
	})
	if err == nil {
		_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(sweepTable),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}})
	}
	if err != nil {
		srv.Close()
		return nil, err
	}
	return b, nil
}

// load writes items from..to-1 with the TTL ttl(k), through unsigned
// BatchWriteItem calls (the load is not what is measured).
func (b *sweepBed) load(ctx context.Context, from, to int, ttl func(k int) int64) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, benchClients)
	for c := 0; c < benchClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for {
				base := int(next.Add(25) - 25)
				if base >= to || ctx.Err() != nil {
					return
				}
				buf = fmt.Appendf(buf[:0], `{"RequestItems":{%q:[`, sweepTable)
				for k := base; k < min(base+25, to); k++ {
					if k > base {
						buf = append(buf, ',')
					}
					t := ttl(k)
					buf = fmt.Appendf(buf, `{"PutRequest":{"Item":{"pk":{"S":"k%d"},"ttl":{"N":"%d"},%q:{"S":%q},"data":{"S":"session %d"}}}}`,
						k, t, sweep.DefaultWindowAttribute, sweep.Window(time.Unix(t, 0), sweep.DefaultWindow, 1), k)
				}
				buf = append(buf, "]}}"...)
				if err := rawPost(ctx, b.hc, b.srv.Endpoint(), "BatchWriteItem", buf); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// lagRecorder is the sweeper's client, recording for every successful
// delete the time it returned minus the deleted item's TTL.
type lagRecorder struct {
	*dynamodb.Client
	mu   sync.Mutex
	lags []time.Duration
}

func (l *lagRecorder) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := l.Client.DeleteItem(ctx, in, optFns...)
	if err == nil && out.Attributes != nil {
		now := time.Now()
		if n, ok := out.Attributes["ttl"].(*types.AttributeValueMemberN); ok {
			if s, perr := strconv.ParseInt(n.Value, 10, 64); perr == nil {
				l.mu.Lock()
				l.lags = append(l.lags, now.Sub(time.Unix(s, 0)))
				l.mu.Unlock()
			}
		}
	}
	return out, err
}

func (l *lagRecorder) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lags)
}

// runSweeper runs a sweeper until done reports true or the deadline.
func runSweeper(ctx context.Context, cfg sweep.Config, deadline time.Duration, done func() bool) (time.Duration, error) {
	s, err := sweep.New(cfg)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- s.Run(rctx) }()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !done() {
		select {
		case err := <-errc:
			return 0, fmt.Errorf("sweeper stopped early: %w", err)
		case <-rctx.Done():
			return 0, fmt.Errorf("not done after %s", deadline)
		case <-t.C:
		}
	}
	took := time.Since(start)
	cancel()
	<-errc
	return took, nil
}

// passPhase is where in each second sweepPrecision's passes start.
const passPhase = 10 * time.Millisecond

// sweepPrecision: 100,000 items whose TTLs fall within one minute, the
// sweeper running at its default 1 s interval; deletion time minus TTL.
func sweepPrecision(ctx context.Context, w io.Writer, sz sweepSizes) error {
	b, err := newSweepBed(ctx)
	if err != nil {
		return err
	}
	defer b.srv.Close()
	first := time.Now().Add(sz.precisionLead).Truncate(time.Second) // after the load
	t0 := time.Now()
	if err := b.load(ctx, 0, sz.precisionItems, func(k int) int64 { return first.Unix() + int64(k%sz.precisionSpan) }); err != nil {
		return err
	}
	span := "one minute"
	if sz.precisionSpan != 60 {
		span = fmt.Sprintf("%d seconds", sz.precisionSpan)
	}
	fmt.Fprintf(w, "precision: %d items with TTLs from %s over %s, loaded in %s; engine TTL off\n",
		sz.precisionItems, first.Format(time.TimeOnly), span, time.Since(t0).Round(time.Millisecond))
	rec := &lagRecorder{Client: b.db}
	cur := &sweep.MemoryCursor{}
	_ = cur.SaveCursor(ctx, sweepTable, sweep.Cursor{Window: sweep.WindowStart(first, sweep.DefaultWindow)})
	// The passes start 10 ms after each whole second: where they fall
	// within the second moved p50 between 0.2 and 0.9 s from run to run,
	// hiding any change of the sweeper's own.
	if !backoff.Sleep(ctx, time.Until(time.Now().Truncate(time.Second).Add(time.Second+passPhase))) {
		return ctx.Err()
	}
	took, err := runSweeper(ctx, sweep.Config{Client: rec, Table: sweepTable, Cursor: cur}, 3*time.Minute,
		func() bool { return rec.count() >= sz.precisionItems })
	if err != nil {
		return err
	}
	slices.Sort(rec.lags)
	q := func(p float64) time.Duration {
		return rec.lags[int(p*float64(len(rec.lags)-1))].Round(time.Millisecond)
	}
	fmt.Fprintf(w, "  deletion time minus TTL (TTLs are whole seconds; an item is due once its second has passed; passes start %s after each second): p50 %s p99 %s max %s (sweeper ran %s)\n",
		passPhase, q(0.50), q(0.99), q(1), took.Round(time.Millisecond))
	return nil
}

// sweepRate: the sweeper deleting items already due, against DeleteItem
// loops over the same number of items on the same engine, one goroutine
// and as many as the sweeper's concurrency, in paired rounds.
func sweepRate(ctx context.Context, w io.Writer, sz sweepSizes) error {
	b, err := newSweepBed(ctx)
	if err != nil {
		return err
	}
	defer b.srv.Close()
	due := time.Now().Add(-5 * time.Minute).Unix()
	ttl := func(k int) int64 { return due + int64(k%240) } // four windows, all due
	var sweepR, loop1R, loopNR []float64
	for round := 0; round < sz.rateRounds; round++ {
		for _, run := range []struct {
			out *[]float64
			fn  func(from int) (time.Duration, error)
		}{
			{&loopNR, func(from int) (time.Duration, error) { return b.deleteLoop(ctx, from, sz.rateItems, sweepConcurrency) }},
			{&sweepR, func(from int) (time.Duration, error) {
				rec := &lagRecorder{Client: b.db}
				cur := &sweep.MemoryCursor{}
				_ = cur.SaveCursor(ctx, sweepTable, sweep.Cursor{Window: sweep.WindowStart(time.Unix(due, 0), sweep.DefaultWindow)})
				return runSweeper(ctx, sweep.Config{Client: rec, Table: sweepTable, Cursor: cur, Interval: 10 * time.Millisecond},
					5*time.Minute, func() bool { return rec.count() >= sz.rateItems })
			}},
			{&loop1R, func(from int) (time.Duration, error) { return b.deleteLoop(ctx, from, sz.rateItems, 1) }},
		} {
			from := round*1_000_000 + len(*run.out)*100_000
			if err := b.load(ctx, from, from+sz.rateItems, ttl); err != nil {
				return err
			}
			d, err := run.fn(from)
			if err != nil {
				return err
			}
			*run.out = append(*run.out, float64(sz.rateItems)/d.Seconds())
		}
	}
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	var ratios []float64
	for i := range sweepR {
		ratios = append(ratios, sweepR[i]/loopNR[i])
	}
	fmt.Fprintf(w, "rate: %d due items a round, %d rounds\n", sz.rateItems, sz.rateRounds)
	fmt.Fprintf(w, "  DeleteItem loop, 1 goroutine:   %8.0f deletes/s (median)\n", med(loop1R))
	fmt.Fprintf(w, "  DeleteItem loop, %d goroutines: %8.0f deletes/s (median)\n", sweepConcurrency, med(loopNR))
	fmt.Fprintf(w, "  sweeper (Query + conditional DeleteItem, concurrency %d): %8.0f deletes/s (median)\n", sweepConcurrency, med(sweepR))
	fmt.Fprintf(w, "  ratio sweeper / loop at the same concurrency: median %.0f%% (target >= 70%%; rounds: %s); against the 1-goroutine loop %.0f%%\n",
		100*med(ratios), benchkit.Percents(ratios), 100*med(sweepR)/med(loop1R))
	return nil
}

// deleteLoop deletes items from..from+items-1 by key with plain
// DeleteItem calls from n goroutines.
func (b *sweepBed) deleteLoop(ctx context.Context, from, items, n int) (time.Duration, error) {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= from+items || ctx.Err() != nil {
					return
				}
				_, err := b.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(sweepTable),
					Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k" + strconv.Itoa(k)}}})
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	return time.Since(start), nil
}

// sweepCatchUp: a sweeper that was down for ten minutes while 100 items a
// second expired (60,000 items over ten one-minute windows) starts from
// its cursor; the time until every item is deleted and the cursor is
// back at the current window.
func sweepCatchUp(ctx context.Context, w io.Writer, sz sweepSizes) error {
	b, err := newSweepBed(ctx)
	if err != nil {
		return err
	}
	defer b.srv.Close()
	down := time.Now().Add(-10 * time.Minute)
	if err := b.load(ctx, 0, sz.catchUpItems, func(k int) int64 { return down.Unix() + int64(k/100) }); err != nil {
		return err
	}
	rec := &lagRecorder{Client: b.db}
	cur := &sweep.MemoryCursor{}
	_ = cur.SaveCursor(ctx, sweepTable, sweep.Cursor{Window: sweep.WindowStart(down, sweep.DefaultWindow)})
	caughtUp := func() bool {
		c, _ := cur.LoadCursor(ctx, sweepTable)
		return rec.count() >= sz.catchUpItems && time.Since(c.Window) < 3*sweep.DefaultWindow
	}
	took, err := runSweeper(ctx, sweep.Config{Client: rec, Table: sweepTable, Cursor: cur}, 5*time.Minute, caughtUp)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "catch-up after 10 minutes of downtime (%d items in 10 windows): every item deleted and the cursor back within two windows of now in %s\n",
		sz.catchUpItems, took.Round(time.Millisecond))
	return nil
}
