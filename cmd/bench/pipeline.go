package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/engine"
)

// The whole pipeline: engine -> `archiver run` (the real binary, a child
// process, so its CPU and memory are its own) -> JetStream and S3
// (versitygw). Phase 1 measures throughput: 200,000 items expire in one TTL
// sweep before the archiver starts, and we time the archiver from process
// start to the last acknowledgement at both sinks. Phase 2 measures latency:
// 20,000 more items expire over ten seconds while the archiver runs, and each
// event is timed from its deletion (the stream's ApproximateCreationDateTime)
// to its arrival at each sink. Beside it, the same run measures the raw
// limits of the parts: draining the stream with plain GetRecords calls,
// JetStream async publishes of same-sized messages, and S3 PutObjects of
// same-sized objects.

// plSizes are the pipeline bench's sizes.
type plSizes struct {
	// items is the number of expired items of the backlog
	// (ARCHIVER_BENCH_ITEMS overrides it for quick runs).
	items int
	// itemBytes pads every item with a string attribute of this many
	// bytes (ARCHIVER_BENCH_ITEM_BYTES, default none): the backlog of
	// large items that peak RSS is checked on, e.g. 100000 with
	// ARCHIVER_BENCH_ITEMS=5000.
	itemBytes int
	// spread is the seconds the latency phase's expiries spread over,
	// lead how long after they are written the first expires.
	spread int
	lead   int64
	// rawS3 is how long the raw PutObject loop runs.
	rawS3 time.Duration
}

// plSizesFor returns the full sizes (with their environment overrides) or
// the tiny ones.
func plSizesFor(tiny bool) plSizes {
	if tiny {
		return plSizes{items: 200, spread: 1, lead: 1, rawS3: 200 * time.Millisecond}
	}
	sz := plSizes{items: 200_000, spread: 10, lead: 3, rawS3: 3 * time.Second}
	if n, err := strconv.Atoi(os.Getenv("ARCHIVER_BENCH_ITEMS")); err == nil && n > 0 {
		sz.items = n
	}
	n, _ := strconv.Atoi(os.Getenv("ARCHIVER_BENCH_ITEM_BYTES"))
	sz.itemBytes = max(n, 0)
	return sz
}

// plBudgetMiB is the archiver's --max-in-flight-bytes (its default).
const plBudgetMiB = 128

const (
	pipelineShards = 4
	plBenchTable   = "BenchSessions"
)

// plCounters are the sink counters printed after each phase.
var plCounters = []string{"archiver_sink_retries_total", "archiver_sink_stalls_total", "archiver_sink_failures_total",
	"archiver_shard_api_errors_total", "archiver_shard_throttles_total", "archiver_shard_reader_failures_total",
	"archiver_consumer_starved_flushes_total"}

// plBench is one run of the pipeline bench: its parts, and what the
// phases hand on to the next.
type plBench struct {
	sz       plSizes
	w        io.Writer
	progress func(format string, a ...any)
	closers  []func()

	work, bin, s3root, s3Endpoint string
	eng                           *engine.Server
	ns                            *natsserver.Server
	nc                            *nats.Conn
	ddb                           *dynamodb.Client
	streams                       *dynamodbstreams.Client

	nats *plNATSArrivals
	s3   *plS3Scanner
	arch *plArchiver
	// Figures of the backlog phase the later steps set theirs against.
	rate       float64
	backlogCPU time.Duration
}

func runPipelineBench(ctx context.Context, w io.Writer, tiny bool) error {
	b := &plBench{sz: plSizesFor(tiny), w: w, progress: benchkit.Progress("pipeline")}
	defer b.close()
	if err := b.start(ctx); err != nil {
		return err
	}
	if err := b.load(ctx); err != nil {
		return err
	}
	if err := b.backlog(ctx); err != nil {
		return err
	}
	phase2 := max(b.sz.items/10, 100)
	if err := b.latency(ctx, phase2); err != nil {
		return err
	}
	if err := b.stop(phase2); err != nil {
		return err
	}
	if err := b.limits(ctx); err != nil {
		return err
	}
	return b.floorAndMixed(ctx)
}

func (b *plBench) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// start builds the archiver and starts its parts: the engine (in-process,
// sweeps only when told), NATS with JetStream, versitygw with the bucket.
func (b *plBench) start(ctx context.Context) (err error) {
	if b.work, err = os.MkdirTemp("", "archiver-pipeline-bench-"); err != nil {
		return err
	}
	b.closers = append(b.closers, func() { os.RemoveAll(b.work) })
	b.progress("building the archiver")
	if b.bin, err = benchkit.BuildArchiver(ctx, b.work); err != nil {
		return err
	}
	if b.eng, err = engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, StreamShards: pipelineShards}); err != nil {
		return err
	}
	b.closers = append(b.closers, func() { b.eng.Close() })
	if b.ns, err = benchkit.StartNATS(filepath.Join(b.work, "nats")); err != nil {
		return err
	}
	b.closers = append(b.closers, b.ns.Shutdown)
	b.s3root = filepath.Join(b.work, "s3")
	endpoint, stop, err := benchkit.StartVersitygw(ctx, b.s3root)
	if err != nil {
		return err
	}
	b.s3Endpoint = endpoint
	b.closers = append(b.closers, stop)
	if err := benchkit.CreateBucket(ctx, endpoint); err != nil {
		return err
	}
	b.ddb, b.streams = benchkit.Clients(b.eng.Endpoint())
	if b.nc, err = nats.Connect(b.ns.ClientURL()); err != nil {
		return err
	}
	b.closers = append(b.closers, b.nc.Close)
	return nil
}

// load writes the backlog to a table whose stream is enabled afterwards,
// so that the stream holds the expiries only, and subscribes to the
// archiver's subjects.
func (b *plBench) load(ctx context.Context) error {
	b.progress("loading %d items", b.sz.items)
	loadStart := time.Now()
	if err := plLoadExpiredTable(ctx, b.ddb, plBenchTable, b.sz.items, b.sz.itemBytes); err != nil {
		return err
	}
	fmt.Fprintf(b.w, "  setup: %d expired items loaded in %s (stream enabled afterwards: it holds the expiries only)\n",
		b.sz.items, time.Since(loadStart).Round(time.Millisecond))
	var err error
	b.nats, err = plSubscribe(b.nc, "bench.>")
	if err != nil {
		return err
	}
	b.closers = append(b.closers, b.nats.close)
	return nil
}

// backlog is phase 1, throughput: the whole backlog expires in one sweep
// before the archiver starts, which is timed from its start to the last
// acknowledgement at its sinks.
func (b *plBench) backlog(ctx context.Context) error {
	sweepStart := time.Now()
	n, err := b.eng.Engine().SweepTTL(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if n != b.sz.items {
		return fmt.Errorf("sweep deleted %d items, want %d", n, b.sz.items)
	}
	fmt.Fprintf(b.w, "  engine: TTL sweep of %d expired items (deletes + stream records) in %s\n", n, time.Since(sweepStart).Round(time.Millisecond))
	b.progress("starting the archiver on a backlog of %d expiries", b.sz.items)
	if b.arch, err = startPlArchiver(ctx, b.bin, b.work, b.eng.Endpoint(), b.ns.ClientURL(), b.s3Endpoint); err != nil {
		return err
	}
	b.closers = append(b.closers, b.arch.kill)
	b.s3 = &plS3Scanner{dir: filepath.Join(b.s3root, benchkit.Bucket), seen: map[string]bool{}, lat: plNewLatencies(nil)}
	if err := b.waitSinks(ctx, b.sz.items); err != nil {
		return err
	}
	b.backlogCPU, _ = benchkit.ProcCPU(b.arch.cmd.Process.Pid)
	lastAck := b.nats.cur.Load().last()
	if l := b.s3.lat.last(); l.After(lastAck) {
		lastAck = l
	}
	elapsed := lastAck.Sub(b.arch.started)
	b.rate = float64(b.sz.items) / elapsed.Seconds()
	sinkNames := map[bool]string{true: "JetStream and S3", false: b.arch.only}[b.arch.only == ""]
	fmt.Fprintf(b.w, "  archiver: %s expired records/s into %s (a backlog of %d, process start to last acknowledgement %s)\n",
		benchkit.FmtInt(b.rate), sinkNames, b.sz.items, elapsed.Round(time.Millisecond))
	if lines := benchkit.Scrape(b.arch.metricsAddr, plCounters...); lines != "" {
		fmt.Fprintf(b.w, "    sink counters after the backlog: %s\n", lines)
	}
	return nil
}

// waitSinks waits until want new events arrived at every sink the
// archiver writes to.
func (b *plBench) waitSinks(ctx context.Context, want int) error {
	a := b.arch
	return plWaitArrivals(ctx, a.exited, &a.logs, b.s3, 200*time.Millisecond,
		func() bool {
			return (!a.useNATS || b.nats.cur.Load().count() >= want) && (!a.useS3 || b.s3.lat.count() >= want)
		},
		func() string {
			return fmt.Sprintf("%d events on NATS, %d in S3 of %d", b.nats.cur.Load().count(), b.s3.lat.count(), want)
		})
}

// latency is phase 2: n items expiring over spread seconds while the
// archiver runs, swept every 100 ms, as the engine's own sweeper would.
func (b *plBench) latency(ctx context.Context, n int) error {
	b.nats.cur.Store(plNewLatencies(b.nats.cur.Load().seen))
	b.s3.lat = plNewLatencies(b.s3.lat.seen)
	b.progress("phase 2: %d items expiring over %ds", n, b.sz.spread)
	base := time.Now().Unix() + b.sz.lead
	spread := int64(b.sz.spread)
	if err := plPutItems(ctx, b.ddb, plBenchTable, b.sz.items, n, b.sz.itemBytes, func(i int) int64 { return base + int64(i)%spread }); err != nil {
		return err
	}
	sw := &plSweeps{}
	b.nats.sweeps.Store(sw)
	stopSweeps := plSweepEvery100ms(ctx, b.eng, sw)
	err := b.waitSinks(ctx, n)
	stopSweeps()
	if err != nil {
		return err
	}
	if lines := benchkit.Scrape(b.arch.metricsAddr, plCounters...); lines != "" {
		fmt.Fprintf(b.w, "    sink counters after the latency phase: %s\n", lines)
	}
	np50, np99 := b.nats.cur.Load().quantiles()
	sp50, sp99 := b.s3.lat.quantiles()
	fmt.Fprintf(b.w, "  latency deletion -> sink ack at %s deletions/s: JetStream p50 %s p99 %s (target <= 300ms) | S3 p50 %s p99 %s\n",
		benchkit.FmtInt(float64(n)/float64(b.sz.spread)), np50.Round(time.Millisecond), np99.Round(time.Millisecond),
		sp50.Round(time.Millisecond), sp99.Round(time.Millisecond))
	fmt.Fprintf(b.w, "    (deletion time: the record's ApproximateCreationDateTime, whole seconds; S3 objects flush at 8 MiB or every 1s)\n")
	wp50, wp99 := sw.quantiles()
	fmt.Fprintf(b.w, "    from the start of the sweep that deleted the item (every 100 ms): JetStream p50 %s p99 %s (target <= 300ms)\n",
		wp50.Round(time.Millisecond), wp99.Round(time.Millisecond))
	fmt.Fprintf(b.w, "    slowest bursts (per shard):\n%s", sw.slowest(4))
	return nil
}

// plSweepEvery100ms sweeps the engine's expired items every 100 ms, each
// sweep's start recorded in sw, until the returned stop is called.
func plSweepEvery100ms(ctx context.Context, eng *engine.Server, sw *plSweeps) (stop func()) {
	sweepCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sweepCtx.Err() == nil {
			sw.started(time.Now())
			_, _ = eng.Engine().SweepTTL(sweepCtx)
			select {
			case <-sweepCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// stop stops the archiver (SIGTERM) and prints its resource usage over
// both phases. Its peak RSS is read from /proc while it runs: the rusage
// of a child that os/exec started with CLONE_VM|CLONE_VFORK reports the
// parent's peak (this bench process's) whenever that is larger, as Linux
// carries the old mm's high-water mark across exec.
func (b *plBench) stop(phase2 int) error {
	cmd := b.arch.cmd
	peakRSS := benchkit.PeakRSSMiB(cmd.Process.Pid)
	stopAt := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.arch.exited:
	case <-time.After(60 * time.Second):
		return errors.New("archiver did not stop within 60s of SIGTERM")
	}
	stopTime := time.Since(stopAt)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		records := b.sz.items + phase2
		perRecord := cpu.Seconds() / float64(records)
		fmt.Fprintf(b.w, "  archiver process: CPU %s user+sys for %d expiries (%.1f µs/record, i.e. %.2f cores at the backlog rate), peak RSS %d MiB; SIGTERM to exit %s\n",
			cpu.Round(time.Millisecond), records, perRecord*1e6, perRecord*b.rate, peakRSS, stopTime.Round(time.Millisecond))
	}
	fmt.Fprintf(b.w, "  memory: peak RSS %d MiB = %.2fx --max-in-flight-bytes %d MiB (target: <= 2x + 64 MiB = %d MiB)\n",
		peakRSS, float64(peakRSS)/plBudgetMiB, plBudgetMiB, 2*plBudgetMiB+64)
	_ = b.s3.scan()
	return nil
}

// limits measures the raw limits of the parts on the same machine in the
// same run, and prints the archiver's rate against each.
func (b *plBench) limits(ctx context.Context) error {
	b.progress("measuring the raw limits")
	srcRate, err := plRawDrain(ctx, b.streams, b.ddb, b.sz.items)
	if err != nil {
		return fmt.Errorf("raw drain: %w", err)
	}
	avgMsg := b.nats.avgSize()
	natsRate, err := plRawJetStream(ctx, b.nc, avgMsg, b.sz.items)
	if err != nil {
		return fmt.Errorf("raw JetStream: %w", err)
	}
	objBytes, objEvents := b.s3.avgObject()
	s3Rate, err := plRawS3(ctx, benchkit.S3(b.s3Endpoint), objBytes, 4, b.sz.rawS3)
	if err != nil {
		return fmt.Errorf("raw S3: %w", err)
	}
	s3Records := s3Rate * objEvents
	fmt.Fprintf(b.w, "  source limit: GetRecords drain %s records/s (SDK, %d shards in parallel); archiver at %.1f%% of it\n",
		benchkit.FmtInt(srcRate), pipelineShards, 100*b.rate/srcRate)
	fmt.Fprintf(b.w, "  NATS limit:   JetStream async publish %s msgs/s (%d B messages, one publisher); archiver at %.1f%% of it\n",
		benchkit.FmtInt(natsRate), avgMsg, 100*b.rate/natsRate)
	fmt.Fprintf(b.w, "  S3 limit:     PutObject %s objects/s of %d KiB (4 concurrent, like the sink) = %s records/s at %.0f records/object; archiver at %.1f%% of it\n",
		strconv.FormatFloat(s3Rate, 'f', 1, 64), objBytes/1024, benchkit.FmtInt(s3Records), objEvents, 100*b.rate/s3Records)
	return nil
}

// floorAndMixed measures the floor on the backlog and then the second
// view (unless ARCHIVER_BENCH_MIXED=0).
func (b *plBench) floorAndMixed(ctx context.Context) error {
	b.progress("measuring the floor")
	_, objEvents := b.s3.avgObject()
	floor, err := runFloor(ctx, floorSpec{Mode: "floor", Endpoint: b.eng.Endpoint(), Table: plBenchTable, NATSURL: b.ns.ClientURL(),
		S3Endpoint: b.s3Endpoint, Bucket: benchkit.Bucket, RecordsPerObject: max(1, int(math.Round(objEvents)))})
	if err != nil {
		return err
	}
	printFloor(b.w, b.backlogCPU, b.sz.items, floor)
	if os.Getenv("ARCHIVER_BENCH_MIXED") == "0" {
		return nil
	}
	b.progress("the second view: a stream of INSERTs and expiries")
	return plMixedBench(ctx, b.w, plMixed{bin: b.bin, work: b.work, eng: b.eng, ddb: b.ddb, nc: b.nc, natsURL: b.ns.ClientURL(),
		s3Endpoint: b.s3Endpoint, s3Dir: filepath.Join(b.s3root, benchkit.Bucket), sz: b.sz})
}

// plArchiver is the pipeline bench's `archiver run`, started on the
// backlog.
type plArchiver struct {
	cmd         *exec.Cmd
	logs        bytes.Buffer
	logFile     *os.File // ARCHIVER_BENCH_LOG, or nil
	exited      <-chan struct{}
	stop        func() // kills the archiver unless it exited
	started     time.Time
	metricsAddr string
	// only is ARCHIVER_BENCH_SINKS: "nats" or "s3" runs with that sink
	// alone (to find which one bounds the pipeline); "" with both.
	only           string
	useNATS, useS3 bool
}

// startPlArchiver starts the archiver on the bench table with the sinks
// ARCHIVER_BENCH_SINKS names; ARCHIVER_BENCH_PROFILE=FILE writes a CPU
// profile of it over the backlog's first seconds and ARCHIVER_BENCH_HEAP=FILE
// a heap profile taken 3 s into the backlog (both served by its --pprof);
// ARCHIVER_BENCH_LOG=FILE keeps its whole output there.
func startPlArchiver(ctx context.Context, bin, work, endpoint, natsURL, s3Endpoint string) (*plArchiver, error) {
	a := &plArchiver{only: os.Getenv("ARCHIVER_BENCH_SINKS")}
	a.useNATS, a.useS3 = a.only == "" || strings.Contains(a.only, "nats"), a.only == "" || strings.Contains(a.only, "s3")
	var err error
	if a.metricsAddr, err = benchkit.FreeAddr(); err != nil {
		return nil, err
	}
	args := []string{"run", "--endpoint", endpoint, "--table", plBenchTable,
		"--checkpoint", "file://" + filepath.Join(work, "checkpoints.json"),
		"--metrics-addr", a.metricsAddr, "--log-level", "warn",
		"--max-in-flight-bytes", fmt.Sprintf("%dMiB", plBudgetMiB)}
	if a.useNATS {
		args = append(args, "--sink", natsURL+"?subject=bench.{table}.{kind}&create-stream=BENCH")
	}
	if a.useS3 {
		args = append(args, "--sink", "s3://"+benchkit.Bucket+"/archive?endpoint="+s3Endpoint+"&path-style=true&region=us-east-1&flush-interval=1s")
	}
	profileTo, heapTo := os.Getenv("ARCHIVER_BENCH_PROFILE"), os.Getenv("ARCHIVER_BENCH_HEAP")
	if profileTo != "" || heapTo != "" {
		args = append(args, "--pprof")
	}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Env = benchkit.ArchiverEnv()
	if err := a.logTo(os.Getenv("ARCHIVER_BENCH_LOG")); err != nil {
		return nil, err
	}
	a.started = time.Now()
	if err := a.cmd.Start(); err != nil {
		return nil, err
	}
	a.exited, a.stop = benchkit.Watch(a.cmd)
	a.profile(ctx, profileTo, heapTo)
	return a, nil
}

// logTo sends the archiver's output to its logs and, when file is not
// "", to file too.
func (a *plArchiver) logTo(file string) error {
	a.cmd.Stdout, a.cmd.Stderr = &a.logs, &a.logs
	if file == "" {
		return nil
	}
	lf, err := os.Create(file)
	if err != nil {
		return err
	}
	a.logFile = lf
	out := io.MultiWriter(&a.logs, lf)
	a.cmd.Stdout, a.cmd.Stderr = out, out
	return nil
}

// kill kills the archiver unless it exited, and closes its log file.
func (a *plArchiver) kill() {
	a.stop()
	if a.logFile != nil {
		a.logFile.Close()
	}
}

// profile takes the CPU profile to profileTo and the heap profile to
// heapTo, each unless "".
func (a *plArchiver) profile(ctx context.Context, profileTo, heapTo string) {
	if profileTo != "" {
		go func() {
			if err := benchkit.Profile(ctx, a.metricsAddr, "profile?seconds=4", profileTo); err != nil {
				fmt.Fprintf(os.Stderr, "  archiver CPU profile: %v\n", err)
			}
		}()
	}
	if heapTo != "" {
		go func() {
			time.Sleep(3 * time.Second)
			if err := benchkit.Profile(ctx, a.metricsAddr, "heap", heapTo); err != nil {
				fmt.Fprintf(os.Stderr, "  archiver heap profile: %v\n", err)
			}
		}()
	}
}

// plNATSArrivals times each event's arrival on NATS. The subscription
// only stamps each message's arrival and queues it; another goroutine
// decodes it. Decoding in the callback (two encoding/json passes, some
// 30 us a message) delayed the stamps of the messages queued behind it,
// and charged up to 60 ms of the bench's own work per burst to the
// archiver's latency.
type plNATSArrivals struct {
	cur         atomic.Pointer[plLatencies]
	sweeps      atomic.Pointer[plSweeps] // set for the latency phase
	bytes, msgs atomic.Int64
	sub         *nats.Subscription
	stopParsing chan struct{}
	arrivals    chan plArrival // never closed: a callback may still run after Unsubscribe
}

type plArrival struct {
	at   time.Time
	data []byte
}

// plSubscribe subscribes to subject on nc and starts decoding arrivals.
func plSubscribe(nc *nats.Conn, subject string) (*plNATSArrivals, error) {
	a := &plNATSArrivals{stopParsing: make(chan struct{}), arrivals: make(chan plArrival, 1<<16)}
	a.cur.Store(plNewLatencies(nil))
	go a.parse()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		a.arrivals <- plArrival{time.Now(), m.Data}
	})
	if err != nil {
		close(a.stopParsing)
		return nil, err
	}
	a.sub = sub
	_ = sub.SetPendingLimits(-1, -1)
	return a, nil
}

// parse records every arrival's latency until stopParsing closes.
func (a *plNATSArrivals) parse() {
	for {
		var m plArrival
		select {
		case m = <-a.arrivals:
		case <-a.stopParsing:
			return
		}
		id, created, ok := plLineTimes(m.data)
		if !ok {
			continue
		}
		if a.cur.Load().add(id, m.at.Sub(created), m.at) {
			if sw := a.sweeps.Load(); sw != nil {
				ttl, shard := plLineTTL(m.data)
				sw.arrived(ttl, shard, m.at)
			}
		}
		a.bytes.Add(int64(len(m.data)))
		a.msgs.Add(1)
	}
}

// avgSize is the average size of the messages that arrived.
func (a *plNATSArrivals) avgSize() int { return int(a.bytes.Load() / max(1, a.msgs.Load())) }

func (a *plNATSArrivals) close() {
	_ = a.sub.Unsubscribe()
	close(a.stopParsing)
}
