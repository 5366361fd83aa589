package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/engine"
)

const (
	benchClients = 16
	benchPayload = 100 // bytes of payload per item
)

// engineSizes are the engine bench's sizes.
type engineSizes struct {
	phase time.Duration // each timed load
	sweep int           // the expired items of the sweep figure
	// install: a baseline that is missing (dynalite, Dynoxide) is
	// installed with npm into the user's cache.
	install bool
	cpu     cpuSizes
}

func engineSizesFor(tiny bool) engineSizes {
	if tiny {
		return engineSizes{phase: 200 * time.Millisecond, sweep: 1000, cpu: cpuSizesFor(true)}
	}
	return engineSizes{phase: 4 * time.Second, sweep: 1_000_000, install: true, cpu: cpuSizesFor(false)}
}

// engineBench is one run of the engine bench: the engine, its clients and
// the figures the later steps compare with.
type engineBench struct {
	sz      engineSizes
	w       io.Writer
	clock   *engine.ManualClock
	srv     *engine.Server
	db      *dynamodb.Client
	st      *dynamodbstreams.Client
	putRate float64
	written int64 // items the PutItem phase wrote (keys 0..written-1)
}

// runEngineBench measures the engine through the AWS SDK over loopback
// HTTP: PutItem, GetItem and Query rates at 16 concurrent clients, the
// GetRecords drain rate, the time to sweep one million expired items from
// a table with a GSI and stream their REMOVE records, and resident memory.
// Where moto or dynalite can be started, the same PutItem load runs against
// them and the ratio is printed.
func runEngineBench(ctx context.Context, w io.Writer, tiny bool) error {
	b := &engineBench{sz: engineSizesFor(tiny), w: w, clock: engine.NewManualClock(time.Now())}
	var err error
	if b.srv, err = engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, Clock: b.clock}); err != nil {
		return err
	}
	defer b.srv.Close()
	b.db, b.st = benchkit.PooledClients(b.srv.Endpoint())
	if err := createBenchTable(ctx, b.db, "bench", true, false); err != nil {
		return err
	}
	fmt.Fprintf(w, "engine (GOMAXPROCS=%d, %d clients, %v per phase, load average %s)\n", runtime.GOMAXPROCS(0), benchClients, b.sz.phase, benchkit.LoadAvg())
	if err := serverCPU(ctx, w, b.sz.cpu); err != nil {
		return fmt.Errorf("server CPU: %w", err)
	}
	if err := b.puts(ctx); err != nil {
		return err
	}
	if err := b.reads(ctx); err != nil {
		return err
	}
	if err := b.sweep(ctx); err != nil {
		return err
	}
	b.baselines(ctx)
	fmt.Fprintf(w, "  (load average at the end: %s)\n", benchkit.LoadAvg())
	return nil
}

// puts measures PutItem through the SDK, through a plain HTTP client, and
// through the SDK against a server that does nothing.
func (b *engineBench) puts(ctx context.Context) error {
	cpu0 := benchkit.SelfCPU()
	var err error
	if b.putRate, b.written, err = putLoad(ctx, b.db, "bench", b.sz.phase); err != nil {
		return fmt.Errorf("PutItem load: %w", err)
	}
	cpuPerOp := (benchkit.SelfCPU() - cpu0).Seconds() / (b.putRate * b.sz.phase.Seconds()) * 1e6
	benchkit.Row(b.w, "PutItem (SDK)", fmt.Sprintf("%.0f ops/s", b.putRate), fmt.Sprintf("target >= 15000; %.0f us CPU per op, SDK client included", cpuPerOp))
	rawRate, err := rawPutLoad(ctx, b.srv.Endpoint(), "bench", b.sz.phase)
	if err != nil {
		return fmt.Errorf("raw PutItem load: %w", err)
	}
	benchkit.Row(b.w, "PutItem (plain HTTP client)", fmt.Sprintf("%.0f ops/s", rawRate), "the server without the SDK's client-side cost")
	ceiling, err := sdkCeiling(ctx, b.sz.phase)
	if err != nil {
		return fmt.Errorf("SDK ceiling: %w", err)
	}
	benchkit.Row(b.w, "PutItem (SDK) vs a do-nothing server", fmt.Sprintf("%.0f ops/s", ceiling), fmt.Sprintf("the SDK's own ceiling here; engine at %.0f%% of it", 100*b.putRate/ceiling))
	return nil
}

// reads measures GetItem and Query over the items puts wrote, and the
// drain of their stream; then drops the table.
func (b *engineBench) reads(ctx context.Context) error {
	getRate, err := runClients(ctx, b.sz.phase, func(c, i int, r *rand.Rand) error {
		k := r.IntN(int(b.written))
		_, err := b.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("bench"), Key: benchKey(k)})
		return err
	})
	if err != nil {
		return fmt.Errorf("GetItem load: %w", err)
	}
	benchkit.Row(b.w, "GetItem", fmt.Sprintf("%.0f ops/s", getRate), "")
	qRate, err := runClients(ctx, b.sz.phase, func(c, i int, r *rand.Rand) error {
		_, err := b.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("bench"), Limit: aws.Int32(10),
			KeyConditionExpression:    aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: benchPartition(r.IntN(1000))}}})
		return err
	})
	if err != nil {
		return fmt.Errorf("Query load: %w", err)
	}
	benchkit.Row(b.w, "Query (Limit 10)", fmt.Sprintf("%.0f ops/s", qRate), "")
	drained, drainDur, err := drainStream(ctx, b.db, b.st, "bench", int(b.written), stypes.OperationTypeInsert)
	if err != nil {
		return fmt.Errorf("GetRecords drain: %w", err)
	}
	benchkit.Row(b.w, "GetRecords drain", fmt.Sprintf("%.0f rec/s", float64(drained)/drainDur.Seconds()), fmt.Sprintf("%d records", drained))
	_, err = b.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("bench")})
	return err
}

// sweep loads one million expired items on a table with a GSI, sweeps
// them and drains their REMOVE records, reading resident memory between.
func (b *engineBench) sweep(ctx context.Context) error {
	if err := createBenchTable(ctx, b.db, "sweep", false, true); err != nil {
		return err
	}
	if _, err := b.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("sweep"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
		return err
	}
	rssBase := benchkit.SelfKiB("VmRSS")
	loadStart := time.Now()
	if err := loadExpired(ctx, b.srv.Endpoint(), "sweep", b.sz.sweep, b.clock.Now().Unix()+60); err != nil {
		return fmt.Errorf("loading %d items: %w", b.sz.sweep, err)
	}
	loadDur := time.Since(loadStart)
	benchkit.Row(b.w, "BatchWriteItem load (plain HTTP)", fmt.Sprintf("%.0f items/s", float64(b.sz.sweep)/loadDur.Seconds()), fmt.Sprintf("%d items in %.1fs", b.sz.sweep, loadDur.Seconds()))
	benchkit.Row(b.w, "RSS with 1M items + GSI", fmt.Sprintf("%d MiB", benchkit.SelfKiB("VmRSS")/1024), fmt.Sprintf("(%d MiB before load) target < 1024", rssBase/1024))
	// The stream starts after the load so that it holds only the REMOVEs.
	if _, err := b.db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("sweep"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}}); err != nil {
		return err
	}
	b.clock.Advance(2 * time.Minute)
	// Every deletion is appended to the stream inside the sweep, so when
	// SweepTTL returns the stream holds every REMOVE record.
	start := time.Now()
	cpuStart := benchkit.SelfCPU()
	swept, err := b.srv.Engine().SweepTTL(ctx)
	if err != nil {
		return err
	}
	sweepDur := time.Since(start)
	benchkit.Row(b.w, "TTL sweep of 1M (table + GSI)", fmt.Sprintf("%.2f s", sweepDur.Seconds()),
		fmt.Sprintf("%d deleted and streamed, %.1f s CPU, target <= 15 s", swept, (benchkit.SelfCPU()-cpuStart).Seconds()))
	n, drainDur, err := drainStream(ctx, b.db, b.st, "sweep", b.sz.sweep, stypes.OperationTypeRemove)
	if err != nil {
		return fmt.Errorf("draining the sweep's stream: %w", err)
	}
	benchkit.Row(b.w, "GetRecords drain of the sweep", fmt.Sprintf("%.0f rec/s", float64(n)/drainDur.Seconds()), fmt.Sprintf("%d REMOVE records via the SDK in %.1f s", n, drainDur.Seconds()))
	benchkit.Row(b.w, "RSS after sweep", fmt.Sprintf("%d MiB", benchkit.SelfKiB("VmRSS")/1024), "table empty, stream holds 1M REMOVE records")
	benchkit.Row(b.w, "peak RSS (VmHWM)", fmt.Sprintf("%d MiB", benchkit.SelfKiB("VmHWM")/1024), "whole bench process: SDK clients, GC headroom, items, stream")
	return nil
}

// baselines runs the same PutItem load against moto and dynalite, where
// they can be started, and prints the engine's rate against theirs.
func (b *engineBench) baselines(ctx context.Context) {
	for _, base := range []struct {
		name  string
		start func(port int) (*exec.Cmd, error)
	}{
		{"moto", startMoto},
		{"dynalite", dynalite(b.sz.install)},
	} {
		rate, err := baselinePut(ctx, base.start, b.sz.phase)
		if err != nil {
			benchkit.Row(b.w, base.name+" PutItem", "n/a", err.Error())
			continue
		}
		benchkit.Row(b.w, base.name+" PutItem", fmt.Sprintf("%.0f ops/s", rate), fmt.Sprintf("engine is %.1fx", b.putRate/rate))
	}
}
