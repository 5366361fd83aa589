package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// pipelineItems is the number of expired items (ARCHIVER_BENCH_ITEMS
// overrides it for quick runs).
var pipelineItems = func() int {
	if n, err := strconv.Atoi(os.Getenv("ARCHIVER_BENCH_ITEMS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}()

// pipelineItemBytes pads every item with a string attribute of this many
// bytes (ARCHIVER_BENCH_ITEM_BYTES, default none): the backlog of large
// items that peak RSS is checked on, e.g. 100000 with
// ARCHIVER_BENCH_ITEMS=5000.
var pipelineItemBytes = func() int {
	n, _ := strconv.Atoi(os.Getenv("ARCHIVER_BENCH_ITEM_BYTES"))
	return max(n, 0)
}()

// plBudgetMiB is the archiver's --max-in-flight-bytes (its default).
const plBudgetMiB = 128

const (
	pipelineShards  = 4
	plBenchTable    = "BenchSessions"
	plVersityKey    = "AKIABENCHARCHIVER"
	plVersitySecret = "bench-secret-for-versitygw-only"
	plBenchBucket   = "bench"
)

func runPipelineBench(ctx context.Context, w io.Writer) error {
	root, err := plModuleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "archiver-pipeline-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// The archiver binary, built like `make build`.
	progress := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "  [pipeline %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	progress("building the archiver")
	bin, err := plBuildArchiver(ctx, root, work)
	if err != nil {
		return err
	}

	// The parts: engine (in-process, sweeps only when told), NATS with
	// JetStream, versitygw.
	eng, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, StreamShards: pipelineShards})
	if err != nil {
		return err
	}
	defer eng.Close()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(work, "nats"), NoLog: true, NoSigs: true, JetStreamMaxStore: 8 << 30})
	if err != nil {
		return err
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return errors.New("nats-server not ready")
	}
	s3root := filepath.Join(work, "s3")
	s3Endpoint, stopVersity, err := plStartVersitygw(ctx, root, s3root)
	if err != nil {
		return err
	}
	defer stopVersity()
	s3c := s3.NewFromConfig(aws.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(plVersityKey, plVersitySecret, "")},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(s3Endpoint); o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(plBenchBucket)}); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}

	// The table: loaded before its stream is enabled, so the stream holds
	// the expiries only.
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")}
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(eng.Endpoint()) })
	streams := dynamodbstreams.NewFromConfig(awsCfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(eng.Endpoint()) })
	progress("loading %d items", pipelineItems)
	loadStart := time.Now()
	if err := plLoadExpiredTable(ctx, ddb, plBenchTable, pipelineItems); err != nil {
		return err
	}
	fmt.Fprintf(w, "  setup: %d expired items loaded in %s (stream enabled afterwards: it holds the expiries only)\n",
		pipelineItems, time.Since(loadStart).Round(time.Millisecond))

	// A subscriber timing each event's arrival on NATS.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	var natsCur atomic.Pointer[plLatencies]
	natsCur.Store(plNewLatencies(nil))
	var natsBytes, natsMsgs atomic.Int64
	var sweeps atomic.Pointer[plSweeps] // set for the latency phase
	// The subscription only stamps each message's arrival and queues it;
	// another goroutine decodes it. Decoding in the callback (two
	// encoding/json passes, some 30 us a message) delayed the stamps of
	// the messages queued behind it, and charged up to 60 ms of the bench's
	// own work per burst to the archiver's latency.
	type arrival struct {
		at   time.Time
		data []byte
	}
	arrivals := make(chan arrival, 1<<16) // never closed: a callback may still run after Unsubscribe
	stopParsing := make(chan struct{})
	defer close(stopParsing)
	go func() {
		for {
			var a arrival
			select {
			case a = <-arrivals:
			case <-stopParsing:
				return
			}
			id, created, ok := plLineTimes(a.data)
			if !ok {
				continue
			}
			if natsCur.Load().add(id, a.at.Sub(created), a.at) {
				if sw := sweeps.Load(); sw != nil {
					ttl, shard := plLineTTL(a.data)
					sw.arrived(ttl, shard, a.at)
				}
			}
			natsBytes.Add(int64(len(a.data)))
			natsMsgs.Add(1)
		}
	}()
	sub, err := nc.Subscribe("bench.>", func(m *nats.Msg) {
		arrivals <- arrival{time.Now(), m.Data}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)

	// Phase 1, throughput: the whole backlog expires in one sweep before
	// the archiver starts.
	sweepStart := time.Now()
	n, err := eng.Engine().SweepTTL(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if n != pipelineItems {
		return fmt.Errorf("sweep deleted %d items, want %d", n, pipelineItems)
	}
	fmt.Fprintf(w, "  engine: TTL sweep of %d expired items (deletes + stream records) in %s\n", n, time.Since(sweepStart).Round(time.Millisecond))

	metricsAddr, err := plFreeAddr()
	if err != nil {
		return err
	}
	// ARCHIVER_BENCH_SINKS=nats or =s3 runs with one sink (to find which
	// one bounds the pipeline); default both.
	only := os.Getenv("ARCHIVER_BENCH_SINKS")
	useNATS, useS3 := only == "" || strings.Contains(only, "nats"), only == "" || strings.Contains(only, "s3")
	args := []string{"run",
		"--endpoint", eng.Endpoint(),
		"--table", plBenchTable,
		"--checkpoint", "file://" + filepath.Join(work, "checkpoints.json"),
		"--metrics-addr", metricsAddr,
		"--log-level", "warn",
		"--max-in-flight-bytes", fmt.Sprintf("%dMiB", plBudgetMiB),
	}
	if useNATS {
		args = append(args, "--sink", ns.ClientURL()+"?subject=bench.{table}.{kind}&create-stream=BENCH")
	}
	if useS3 {
		args = append(args, "--sink", "s3://"+plBenchBucket+"/archive?endpoint="+s3Endpoint+"&path-style=true&region=us-east-1&flush-interval=1s")
	}
	// ARCHIVER_BENCH_PROFILE=FILE writes a CPU profile of the archiver
	// process over the backlog's first seconds (served by its --pprof).
	profileTo := os.Getenv("ARCHIVER_BENCH_PROFILE")
	// ARCHIVER_BENCH_HEAP=FILE writes a heap profile of the archiver
	// taken 3 s into the backlog.
	heapTo := os.Getenv("ARCHIVER_BENCH_HEAP")
	if profileTo != "" || heapTo != "" {
		args = append(args, "--pprof")
	}
	progress("starting the archiver on a backlog of %d expiries", pipelineItems)
	cmd := exec.Command(bin, args...)
	cmd.Env = plArchiverEnv()
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// ARCHIVER_BENCH_LOG=FILE keeps the archiver's whole output there.
	if f := os.Getenv("ARCHIVER_BENCH_LOG"); f != "" {
		lf, err := os.Create(f)
		if err != nil {
			return err
		}
		defer lf.Close()
		out := io.MultiWriter(&logs, lf)
		cmd.Stdout, cmd.Stderr = out, out
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited, kill := plWatch(cmd)
	defer kill()
	if profileTo != "" {
		go func() {
			if err := plProfile(ctx, metricsAddr, "profile?seconds=4", profileTo); err != nil {
				fmt.Fprintf(os.Stderr, "  archiver CPU profile: %v\n", err)
			}
		}()
	}
	if heapTo != "" {
		go func() {
			time.Sleep(3 * time.Second)
			if err := plProfile(ctx, metricsAddr, "heap", heapTo); err != nil {
				fmt.Fprintf(os.Stderr, "  archiver heap profile: %v\n", err)
			}
		}()
	}
	s3scan := &plS3Scanner{dir: filepath.Join(s3root, plBenchBucket), seen: map[string]bool{}, lat: plNewLatencies(nil)}
	waitSinks := func(want int) error {
		return plWaitArrivals(ctx, exited, &logs, s3scan, 200*time.Millisecond,
			func() bool {
				return (!useNATS || natsCur.Load().count() >= want) && (!useS3 || s3scan.lat.count() >= want)
			},
			func() string {
				return fmt.Sprintf("%d events on NATS, %d in S3 of %d", natsCur.Load().count(), s3scan.lat.count(), want)
			})
	}
	if err := waitSinks(pipelineItems); err != nil {
		return err
	}
	backlogCPU := procCPU(cmd.Process.Pid)
	lastAck := natsCur.Load().last()
	if l := s3scan.lat.last(); l.After(lastAck) {
		lastAck = l
	}
	elapsed := lastAck.Sub(started)
	rate := float64(pipelineItems) / elapsed.Seconds()
	sinkNames := map[bool]string{true: "JetStream and S3", false: only}[only == ""]
	fmt.Fprintf(w, "  archiver: %s expired records/s into %s (a backlog of %d, process start to last acknowledgement %s)\n",
		plFmtInt(rate), sinkNames, pipelineItems, elapsed.Round(time.Millisecond))

	if lines := plScrape(metricsAddr, "archiver_sink_retries_total", "archiver_sink_stalls_total", "archiver_sink_failures_total", "archiver_shard_api_errors_total", "archiver_shard_throttles_total", "archiver_shard_reader_failures_total", "archiver_consumer_starved_flushes_total"); lines != "" {
		fmt.Fprintf(w, "    sink counters after the backlog: %s\n", lines)
	}

	// Phase 2, latency: items expiring over ten seconds while the archiver
	// runs, swept every 100 ms, as the engine's own sweeper would.
	phase2 := max(pipelineItems/10, 100)
	natsCur.Store(plNewLatencies(natsCur.Load().seen))
	s3scan.lat = plNewLatencies(s3scan.lat.seen)
	progress("phase 2: %d items expiring over 10s", phase2)
	base := time.Now().Unix() + 3
	if err := plPutItems(ctx, ddb, plBenchTable, pipelineItems, phase2, func(i int) int64 { return base + int64(i%10) }); err != nil {
		return err
	}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	sweepDone := make(chan struct{})
	sw := &plSweeps{}
	sweeps.Store(sw)
	go func() {
		defer close(sweepDone)
		for sweepCtx.Err() == nil {
			sw.started(time.Now())
			_, _ = eng.Engine().SweepTTL(sweepCtx)
			select {
			case <-sweepCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	err = waitSinks(phase2)
	stopSweep()
	<-sweepDone
	if err != nil {
		return err
	}
	if lines := plScrape(metricsAddr, "archiver_sink_retries_total", "archiver_sink_stalls_total", "archiver_sink_failures_total", "archiver_shard_api_errors_total", "archiver_shard_throttles_total", "archiver_shard_reader_failures_total", "archiver_consumer_starved_flushes_total"); lines != "" {
		fmt.Fprintf(w, "    sink counters after the latency phase: %s\n", lines)
	}
	np50, np99 := natsCur.Load().quantiles()
	sp50, sp99 := s3scan.lat.quantiles()
	fmt.Fprintf(w, "  latency deletion -> sink ack at %s deletions/s: JetStream p50 %s p99 %s (target <= 300ms) | S3 p50 %s p99 %s\n",
		plFmtInt(float64(phase2)/10), np50.Round(time.Millisecond), np99.Round(time.Millisecond),
		sp50.Round(time.Millisecond), sp99.Round(time.Millisecond))
	fmt.Fprintf(w, "    (deletion time: the record's ApproximateCreationDateTime, whole seconds; S3 objects flush at 8 MiB or every 1s)\n")
	wp50, wp99 := sw.quantiles()
	fmt.Fprintf(w, "    from the start of the sweep that deleted the item (every 100 ms): JetStream p50 %s p99 %s (target <= 300ms)\n",
		wp50.Round(time.Millisecond), wp99.Round(time.Millisecond))
	fmt.Fprintf(w, "    slowest bursts (per shard):\n%s", sw.slowest(4))

	// Stop the archiver (SIGTERM) and take its resource usage. Its peak RSS
	// is read from /proc while it runs: the rusage of a child that os/exec
	// started with CLONE_VM|CLONE_VFORK reports the parent's peak (this
	// bench process's) whenever that is larger, as Linux carries the old
	// mm's high-water mark across exec.
	peakRSS := procPeakRSS(cmd.Process.Pid)
	stopAt := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		return errors.New("archiver did not stop within 60s of SIGTERM")
	}
	stopTime := time.Since(stopAt)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		records := pipelineItems + phase2
		perRecord := cpu.Seconds() / float64(records)
		fmt.Fprintf(w, "  archiver process: CPU %s user+sys for %d expiries (%.1f µs/record, i.e. %.2f cores at the backlog rate), peak RSS %d MiB; SIGTERM to exit %s\n",
			cpu.Round(time.Millisecond), records, perRecord*1e6, perRecord*rate, peakRSS, stopTime.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "  memory: peak RSS %d MiB = %.2fx --max-in-flight-bytes %d MiB (target: <= 2x + 64 MiB = %d MiB)\n",
		peakRSS, float64(peakRSS)/plBudgetMiB, plBudgetMiB, 2*plBudgetMiB+64)
	_ = s3scan.scan()
	progress("measuring the raw limits")
	// Raw limits, same machine, same run.
	srcRate, err := plRawDrain(ctx, streams, ddb)
	if err != nil {
		return fmt.Errorf("raw drain: %w", err)
	}
	avgMsg := int(natsBytes.Load() / max(1, natsMsgs.Load()))
	natsRate, err := plRawJetStream(ctx, nc, avgMsg)
	if err != nil {
		return fmt.Errorf("raw JetStream: %w", err)
	}
	objBytes, objEvents := s3scan.avgObject()
	s3Rate, err := plRawS3(ctx, s3c, objBytes, 4)
	if err != nil {
		return fmt.Errorf("raw S3: %w", err)
	}
	s3Records := s3Rate * objEvents
	fmt.Fprintf(w, "  source limit: GetRecords drain %s records/s (SDK, %d shards in parallel); archiver at %.1f%% of it\n",
		plFmtInt(srcRate), pipelineShards, 100*rate/srcRate)
	fmt.Fprintf(w, "  NATS limit:   JetStream async publish %s msgs/s (%d B messages, one publisher); archiver at %.1f%% of it\n",
		plFmtInt(natsRate), avgMsg, 100*rate/natsRate)
	fmt.Fprintf(w, "  S3 limit:     PutObject %s objects/s of %d KiB (4 concurrent, like the sink) = %s records/s at %.0f records/object; archiver at %.1f%% of it\n",
		plFmtFloat(s3Rate), objBytes/1024, plFmtInt(s3Records), objEvents, 100*rate/s3Records)

	progress("measuring the floor")
	floor, err := runFloor(ctx, floorSpec{Mode: "floor", Endpoint: eng.Endpoint(), Table: plBenchTable, NATSURL: ns.ClientURL(),
		S3Endpoint: s3Endpoint, Bucket: plBenchBucket, RecordsPerObject: max(1, int(math.Round(objEvents)))})
	if err != nil {
		return err
	}
	printFloor(w, backlogCPU, pipelineItems, floor)
	if os.Getenv("ARCHIVER_BENCH_MIXED") == "0" {
		return nil
	}
	progress("the second view: a stream of INSERTs and expiries")
	return plMixedBench(ctx, w, plMixed{bin: bin, work: work, eng: eng, ddb: ddb, nc: nc, natsURL: ns.ClientURL(),
		s3Endpoint: s3Endpoint, s3Dir: filepath.Join(s3root, plBenchBucket)})
}

// plBuildArchiver builds the archiver binary into work, like `make build`,
// and returns its path.
func plBuildArchiver(ctx context.Context, root, work string) (string, error) {
	bin := filepath.Join(work, "archiver")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/archiver")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build archiver: %v\n%s", err, out)
	}
	return bin, nil
}

// plWatch waits for started cmd in the background: exited closes when it
// exits; kill kills it unless it did, and waits for it.
func plWatch(cmd *exec.Cmd) (exited <-chan struct{}, kill func()) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return done, func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

// plArchiverEnv is the environment of an archiver the bench starts: its
// own, with versitygw's credentials and no instance metadata.
func plArchiverEnv() []string {
	return append(os.Environ(), "AWS_ACCESS_KEY_ID="+plVersityKey, "AWS_SECRET_ACCESS_KEY="+plVersitySecret,
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
}

// plWaitArrivals waits until done reports true, scanning the archive
// folder every tick; it fails when the archiver exits (with the tail of
// its logs), when ctx ends, or after ten minutes (saying what arrived).
func plWaitArrivals(ctx context.Context, exited <-chan struct{}, logs *bytes.Buffer, scan *plS3Scanner, tick time.Duration, done func() bool, arrived func() string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for !done() {
		select {
		case <-exited:
			return fmt.Errorf("archiver exited early\n%s", plTail(logs.String(), 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(tick):
		}
		if err := scan.scan(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out: %s", arrived())
		}
	}
	return nil
}

// plLatencies collects one latency per distinct event.
type plLatencies struct {
	mu   sync.Mutex
	skip map[string]bool
	seen map[string]bool
	d    []time.Duration
	at   time.Time
}

// plNewLatencies returns a collector that ignores the IDs in skip (events
// of an earlier phase delivered again).
func plNewLatencies(skip map[string]bool) *plLatencies {
	return &plLatencies{seen: map[string]bool{}, skip: skip}
}

// add records event id's latency d, arrived at at, unless it was seen;
// it reports whether it was new.
func (l *plLatencies) add(id string, d time.Duration, at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[id] || l.skip[id] {
		return false
	}
	l.seen[id] = true
	l.d = append(l.d, d)
	if at.After(l.at) {
		l.at = at
	}
	return true
}

func (l *plLatencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

func (l *plLatencies) last() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at
}

func (l *plLatencies) quantiles() (p50, p99 time.Duration) {
	l.mu.Lock()
	s := append([]time.Duration(nil), l.d...)
	l.mu.Unlock()
	return plQuantiles(s)
}

func plQuantiles(s []time.Duration) (p50, p99 time.Duration) {
	if len(s) == 0 {
		return 0, 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) time.Duration { return s[max(0, int(math.Ceil(p*float64(len(s))))-1)] }
	return q(0.5), q(0.99)
}

// plSweeps records when each latency-phase sweep started, so that an
// event's deletion can be timed from the sweep that deleted it (the first
// to start after its TTL) instead of from its creation time, which the
// stream gives in whole seconds: with sweeps every 100 ms that second
// starts up to 100 ms before the deletion, and counting it charged the
// bench's sweep cadence to the archiver.
type plSweeps struct {
	mu     sync.Mutex
	starts []time.Time
	ttls   []int64
	shards []string
	ats    []time.Time
}

func (s *plSweeps) started(t time.Time) {
	s.mu.Lock()
	s.starts = append(s.starts, t)
	s.mu.Unlock()
}

// arrived records an event of shard with TTL ttl (epoch seconds) arriving
// at at.
func (s *plSweeps) arrived(ttl int64, shard string, at time.Time) {
	s.mu.Lock()
	s.ttls, s.shards, s.ats = append(s.ttls, ttl), append(s.shards, shard), append(s.ats, at)
	s.mu.Unlock()
}

// slowest describes the n (burst, shard) groups whose last event arrived
// latest after its sweep started: where a tail comes from.
func (s *plSweeps) slowest(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	type group struct {
		ttl         int64
		shard       string
		sweep       time.Time
		first, last time.Duration
		events      int
	}
	groups := map[string]*group{}
	for i, ttl := range s.ttls {
		due := time.Unix(ttl, 0)
		k := sort.Search(len(s.starts), func(k int) bool { return s.starts[k].After(due) })
		if k == len(s.starts) {
			continue
		}
		d := s.ats[i].Sub(s.starts[k])
		key := strconv.FormatInt(ttl, 10) + "/" + s.shards[i]
		g := groups[key]
		if g == nil {
			g = &group{ttl: ttl, shard: s.shards[i], sweep: s.starts[k], first: d, last: d}
			groups[key] = g
		}
		g.first, g.last = min(g.first, d), max(g.last, d)
		g.events++
	}
	all := make([]*group, 0, len(groups))
	for _, g := range groups {
		all = append(all, g)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].last > all[j].last })
	var b strings.Builder
	for _, g := range all[:min(n, len(all))] {
		fmt.Fprintf(&b, "      burst ttl=%d (sweep %s) shard %s: %d events, first %s last %s after the sweep\n",
			g.ttl, g.sweep.Format("15:04:05.000"), g.shard, g.events, g.first.Round(time.Millisecond), g.last.Round(time.Millisecond))
	}
	return b.String()
}

// quantiles of arrival minus the start of the first sweep after the TTL
// (an item is due once its TTL has passed; that sweep deleted it).
func (s *plSweeps) quantiles() (p50, p99 time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d []time.Duration
	for i, ttl := range s.ttls {
		due := time.Unix(ttl, 0)
		k := sort.Search(len(s.starts), func(k int) bool { return s.starts[k].After(due) })
		if k < len(s.starts) {
			d = append(d, s.ats[i].Sub(s.starts[k]))
		}
	}
	return plQuantiles(d)
}

// plLineTTL reads an archive line's TTL value (epoch seconds; 0 when it
// has none) and shard.
func plLineTTL(b []byte) (int64, string) {
	var line struct {
		Metadata struct {
			TTL   string `json:"ttlValue"`
			Shard string `json:"shardId"`
		}
	}
	if json.Unmarshal(b, &line) != nil {
		return 0, ""
	}
	n, _ := strconv.ParseInt(line.Metadata.TTL, 10, 64)
	return n, line.Metadata.Shard
}

// plLineTimes reads the event ID and deletion time of an archive line.
func plLineTimes(b []byte) (id string, created time.Time, ok bool) {
	var line struct {
		Metadata struct {
			EventID string    `json:"eventID"`
			Created time.Time `json:"approximateCreationDateTime"`
		}
	}
	if json.Unmarshal(b, &line) != nil || line.Metadata.EventID == "" {
		return "", time.Time{}, false
	}
	return line.Metadata.EventID, line.Metadata.Created, true
}

// plS3Scanner reads new archive objects from versitygw's posix folder; an
// object's modification time is when S3 acknowledged it.
type plS3Scanner struct {
	dir         string
	seen        map[string]bool
	lat         *plLatencies
	objects     int
	objectBytes int64
	events      int
}

func (s *plS3Scanner) scan() error {
	return filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != s.dir {
				return filepath.SkipDir // versitygw's temporary uploads
			}
			return nil
		}
		if s.seen[path] || !strings.HasSuffix(path, ".jsonl.gz") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("object %s: %w", path, err)
		}
		sc := bufio.NewScanner(zr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			if id, created, ok := plLineTimes(sc.Bytes()); ok {
				s.lat.add(id, info.ModTime().Sub(created), info.ModTime())
				n++
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("object %s: %w", path, err)
		}
		s.seen[path] = true
		s.objects++
		s.objectBytes += info.Size()
		s.events += n
		return nil
	})
}

func (s *plS3Scanner) avgObject() (bytes int, events float64) {
	if s.objects == 0 {
		return 1 << 20, 1
	}
	return int(s.objectBytes / int64(s.objects)), float64(s.events) / float64(s.objects)
}

// plLoadExpiredTable creates the table without a stream, writes n items
// (their TTL an hour ago) with BatchWriteItem from 16 writers, then enables
// the stream and TTL.
func plLoadExpiredTable(ctx context.Context, ddb *dynamodb.Client, table string, n int) error {
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("UserName"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("SessionId"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("UserName"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("SessionId"), KeyType: ddbtypes.KeyTypeRange},
		},
	})
	if err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	hourAgo := time.Now().Add(-time.Hour).Unix()
	if err := plPutItems(ctx, ddb, table, 0, n, func(int) int64 { return hourAgo }); err != nil {
		return err
	}
	if _, err := ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName: aws.String(table),
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true),
			StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	}); err != nil {
		return fmt.Errorf("enable stream: %w", err)
	}
	if _, err := ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("ExpirationTime"),
			Enabled: aws.Bool(true)},
	}); err != nil {
		return fmt.Errorf("enable TTL: %w", err)
	}
	return nil
}

// plPutItems writes items from..from+n-1 (TTL exp(i)) to table with
// BatchWriteItem from 16 writers.
func plPutItems(ctx context.Context, ddb *dynamodb.Client, table string, from, n int, exp func(i int) int64) error {
	created := strconv.FormatInt(time.Now().Add(-3*time.Hour).Unix(), 10)
	const writers = 16
	var next atomic.Int64
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := from + int(next.Add(25)) - 25
				if start >= from+n {
					return
				}
				var reqs []ddbtypes.WriteRequest
				for i := start; i < min(start+25, from+n); i++ {
					reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: map[string]ddbtypes.AttributeValue{
						"UserName":       &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("user%05d", i%10000)},
						"SessionId":      &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("%016x", uint64(i)*0x9E3779B97F4A7C15)},
						"CreationTime":   &ddbtypes.AttributeValueMemberN{Value: created},
						"ExpirationTime": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(exp(i), 10)},
						"SessionInfo": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{
							"device": &ddbtypes.AttributeValueMemberS{Value: "laptop"},
							"ip":     &ddbtypes.AttributeValueMemberS{Value: "192.0.2.10"},
							"pages":  &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(i % 97)},
						}},
					}}})
					if pipelineItemBytes > 0 {
						reqs[len(reqs)-1].PutRequest.Item["Payload"] = &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("p", pipelineItemBytes)}
					}
				}
				for len(reqs) > 0 {
					out, err := ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
						RequestItems: map[string][]ddbtypes.WriteRequest{table: reqs}})
					if err != nil {
						errs <- err
						return
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// plRawDrain reads the whole stream from TRIM_HORIZON with plain GetRecords
// calls, one reader per shard, and returns records/s.
func plRawDrain(ctx context.Context, c *dynamodbstreams.Client, ddb *dynamodb.Client) (float64, error) {
	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(plBenchTable)})
	if err != nil {
		return 0, err
	}
	arn := desc.Table.LatestStreamArn
	var shards []streamtypes.Shard
	var start *string
	for {
		out, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn, ExclusiveStartShardId: start})
		if err != nil {
			return 0, err
		}
		shards = append(shards, out.StreamDescription.Shards...)
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			break
		}
	}
	var total atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, len(shards))
	for _, sh := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId,
				ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				errc <- err
				return
			}
			iter := it.ShardIterator
			for iter != nil {
				out, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
				if err != nil {
					errc <- err
					return
				}
				total.Add(int64(len(out.Records)))
				if len(out.Records) == 0 {
					return // an open shard read to its current end
				}
				iter = out.NextShardIterator
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	if total.Load() < int64(pipelineItems) {
		return 0, fmt.Errorf("read %d records, want %d", total.Load(), pipelineItems)
	}
	return float64(total.Load()) / time.Since(began).Seconds(), nil
}

// plWindow bounds the raw JetStream publisher's unacknowledged publishes:
// the NATS sink's default max-in-flight.
const plWindow = 4096

// plRawJetStream publishes pipelineItems messages of size bytes with
// PublishAsync into a fresh stream and returns acknowledged msgs/s.
func plRawJetStream(ctx context.Context, nc *nats.Conn, size int) (float64, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(plWindow))
	if err != nil {
		return 0, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}}); err != nil {
		return 0, err
	}
	msg := bytes.Repeat([]byte("x"), max(size, 1))
	began := time.Now()
	for i := 0; i < pipelineItems; i++ {
		if _, err := js.PublishAsync("raw.bench", msg); err != nil {
			return 0, err
		}
		if (i+1)%plWindow == 0 || i == pipelineItems-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				return 0, errors.New("publishes not acknowledged within a minute")
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	return float64(pipelineItems) / time.Since(began).Seconds(), nil
}

// plRawS3 puts objects of size bytes with conc concurrent uploads for about
// three seconds and returns objects/s.
func plRawS3(ctx context.Context, c *s3.Client, size, conc int) (float64, error) {
	body := make([]byte, max(size, 1))
	for i := range body {
		body[i] = byte(i * 7919 >> 3) // not all zeros
	}
	var done atomic.Int64
	stop := time.Now().Add(3 * time.Second)
	began := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, conc)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(plBenchBucket),
					Key: aws.String(fmt.Sprintf("raw/%d-%d", g, i)), Body: bytes.NewReader(body)})
				if err != nil {
					errc <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(done.Load()) / time.Since(began).Seconds(), nil
}

// plStartVersitygw runs versitygw (PATH or .tools/bin, see `make tools`) with
// a posix backend in dir on a free loopback port.
func plStartVersitygw(ctx context.Context, root, dir string) (endpoint string, stop func(), err error) {
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		bin = filepath.Join(root, ".tools", "bin", "versitygw")
		if _, err := os.Stat(bin); err != nil {
			return "", nil, fmt.Errorf("versitygw not found on PATH or in .tools/bin: run `make tools`")
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	addr, err := plFreeAddr()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--access", plVersityKey, "--secret", plVersitySecret, "--port", addr, "--quiet", "posix", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return "http://" + addr, stop, nil
		}
		select {
		case <-exited:
			return "", nil, fmt.Errorf("versitygw exited: %s", out.String())
		case <-ctx.Done():
			stop()
			return "", nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("versitygw did not listen within 30s")
		}
	}
}

func plWaitReady(ctx context.Context, addr string, exited <-chan struct{}, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited before it was ready")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready within %s", d)
}

// plScrape returns the archiver's metric samples whose names start with one
// of names, on one line.
func plScrape(addr string, names ...string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for _, n := range names {
			if strings.HasPrefix(sc.Text(), n) {
				out = append(out, sc.Text())
			}
		}
	}
	return strings.Join(out, "; ")
}

func plFreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// plModuleRoot finds the directory holding go.mod.
func plModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("go.mod not found above " + dir)
		}
	}
}

func plTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func plFmtInt(f float64) string {
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func plFmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// procPeakRSS is a live process's peak resident set (VmHWM) in MiB, or -1
// when /proc cannot tell.
func procPeakRSS(pid int) int64 {
	if kb := procKiB(pid, "VmHWM"); kb >= 0 {
		return kb / 1024
	}
	return -1
}

// plProfile waits for the archiver's metrics server and saves the
// profile /debug/pprof/WHAT (e.g. "profile?seconds=4", "heap") to file.
func plProfile(ctx context.Context, addr, what, file string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/%s", addr, what)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}
