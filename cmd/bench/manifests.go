package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/sinks"
)

// The price of coverage manifests (issue 27), paired in one run: the
// pipeline of the pipeline bench (engine -> `archiver run` -> JetStream
// and S3 in versitygw) archives one backlog again and again, with
// manifests on (the default) and manifests=false, both at once in each
// round, so that load from elsewhere on the machine (a 2-core machine
// shared with other work, whose load swung single sequential runs by
// 20 %) hits both alike. Each run reads the same stream from its start
// into a prefix, a JetStream stream and a checkpoint file of its own. CPU is the
// archiver process's own (user + system, from its exit status), start to
// exit, the stop's flush and last manifests included. S3 requests are
// counted by a reverse proxy between the archiver and versitygw, by run
// and by kind of key. A last pair of runs counts the PUTs at the S3
// sink's default flush settings. Beside it, the file sink in this
// process, manifests on and off, paired the same way.

// mfSizes are the manifests bench's sizes.
type mfSizes struct {
	// rounds and fileRounds are the numbers of paired rounds of the
	// pipeline and of the file sink (even: each order equally often).
	rounds, fileRounds int
	// fileEvents is the events each file sink round appends.
	fileEvents int
	// items and itemBytes are the pipeline bench's backlog.
	items, itemBytes int
}

func mfSizesFor(tiny bool) mfSizes {
	pl := plSizesFor(tiny)
	if tiny {
		return mfSizes{rounds: 1, fileRounds: 1, fileEvents: 1000, items: pl.items, itemBytes: pl.itemBytes}
	}
	return mfSizes{rounds: 10, fileRounds: 10, fileEvents: 100_000, items: pl.items, itemBytes: pl.itemBytes}
}

// mfPipelineFlush is the pipeline bench's S3 flush setting (objects cut
// every second, for its latency figures).
const mfPipelineFlush = "&flush-interval=1s"

func runManifestsBench(ctx context.Context, w io.Writer, tiny bool) error {
	sz := mfSizesFor(tiny)
	// The file sink first, while this process runs nothing else.
	if err := mfFileSink(ctx, w, sz); err != nil {
		return err
	}
	b, err := newMFBed(ctx, sz)
	if err != nil {
		return err
	}
	defer b.close()
	fmt.Fprintf(w, "  backlog: %s expired items (%d shards) archived by `archiver run` into JetStream and S3 (versitygw), as the pipeline bench does; %d rounds, each running the archiver with manifests on and with manifests=false at the same time (the machine's load hits both alike)\n",
		benchkit.FmtInt(float64(sz.items)), pipelineShards, sz.rounds)
	if err := b.cpuRounds(ctx, w); err != nil {
		return err
	}
	return b.defaultFlushPuts(ctx, w)
}

// mfBed holds the parts every run of the manifests bench uses.
type mfBed struct {
	sz        mfSizes
	work, bin string
	eng       *engine.Server
	ns        *natsserver.Server
	js        jetstream.JetStream
	s3        string // the counting proxy's endpoint
	s3Dir     string // the bucket's folder in versitygw's posix backend
	count     *s3Counter
	closers   []func()
}

func (b *mfBed) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// newMFBed builds the archiver, starts the engine, NATS and versitygw
// behind a counting proxy, and loads and sweeps the backlog.
func newMFBed(ctx context.Context, sz mfSizes) (b *mfBed, err error) {
	b = &mfBed{sz: sz}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.work, err = os.MkdirTemp("", "archiver-manifests-bench-"); err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { os.RemoveAll(b.work) })
	if b.bin, err = benchkit.BuildArchiver(ctx, b.work); err != nil {
		return nil, err
	}
	if b.eng, err = engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, StreamShards: pipelineShards}); err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { b.eng.Close() })
	if err := b.startNATS(); err != nil {
		return nil, err
	}
	if err := b.startS3(ctx); err != nil {
		return nil, err
	}
	ddb, _ := benchkit.PooledClients(b.eng.Endpoint())
	if err := plLoadExpiredTable(ctx, ddb, plBenchTable, sz.items, sz.itemBytes); err != nil {
		return nil, err
	}
	if n, err := b.eng.Engine().SweepTTL(ctx); err != nil || n != sz.items {
		return nil, fmt.Errorf("sweep deleted %d items (want %d): %v", n, sz.items, err)
	}
	return b, nil
}

func (b *mfBed) startNATS() error {
	ns, err := benchkit.StartNATS(filepath.Join(b.work, "nats"))
	if err != nil {
		return err
	}
	b.ns = ns
	b.closers = append(b.closers, ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	b.closers = append(b.closers, nc.Close)
	b.js, err = jetstream.New(nc)
	return err
}

// startS3 starts versitygw and the counting proxy in front of it, and
// creates the bucket.
func (b *mfBed) startS3(ctx context.Context) error {
	dir := filepath.Join(b.work, "s3")
	endpoint, stop, err := benchkit.StartVersitygw(ctx, dir)
	if err != nil {
		return err
	}
	b.closers = append(b.closers, stop)
	b.s3Dir = filepath.Join(dir, benchkit.Bucket)
	target, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	b.count = &s3Counter{proxy: httputil.NewSingleHostReverseProxy(target), by: map[string]*mfCounts{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b.count, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	b.closers = append(b.closers, func() { srv.Close() })
	b.s3 = "http://" + l.Addr().String()
	return benchkit.CreateBucket(ctx, endpoint)
}

// mfCounts are the S3 requests of one run, by kind of key.
type mfCounts struct {
	dataPuts, manifestPuts int   // PUTs S3 answered with 2xx
	failedPuts             int   // PUTs it answered otherwise (412: the key was taken)
	manifestReads          int   // GETs, HEADs and listings of manifests
	records                int64 // the records the data PUTs hold (their x-amz-meta-records)
}

// s3Counter forwards requests to versitygw and counts them by run: the
// first segment of the key, or of a listing's prefix.
type s3Counter struct {
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	by    map[string]*mfCounts
}

func (c *s3Counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	c.proxy.ServeHTTP(sw, r)
	c.add(r, sw.code)
}

// add counts request r, answered with code.
func (c *s3Counter) add(r *http.Request, code int) {
	key := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/"+benchkit.Bucket), "/")
	if key == "" {
		key = r.URL.Query().Get("prefix")
	}
	run, rest, _ := strings.Cut(key, "/")
	manifest := strings.HasPrefix(rest, "_manifests/")
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.by[run]
	if n == nil {
		n = &mfCounts{}
		c.by[run] = n
	}
	switch {
	case r.Method != http.MethodPut:
		if manifest {
			n.manifestReads++
		}
	case code/100 != 2:
		n.failedPuts++
	case manifest:
		n.manifestPuts++
	case strings.HasPrefix(rest, "_archiver/"): // the preflight marker
	default:
		n.dataPuts++
		records, _ := strconv.ParseInt(r.Header.Get("X-Amz-Meta-Records"), 10, 64)
		n.records += records
	}
}

// of returns run's counts so far.
func (c *s3Counter) of(run string) mfCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.by[run]; n != nil {
		return *n
	}
	return mfCounts{}
}

// statusWriter remembers the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// mfRun is one archiver run of the manifests bench.
type mfRun struct {
	name      string // its S3 prefix, JetStream stream (upper case) and subjects' root
	manifests bool
	flush     string // the S3 sink's flush parameters ("": its defaults)
	profile   string // where to write a CPU profile of its first 20 seconds ("": none)
}

// mfResult is what one run measured.
type mfResult struct {
	cpu     time.Duration // the archiver's CPU time, start to exit
	stopCPU time.Duration // of which after the SIGTERM
	stop    time.Duration // SIGTERM to exit
	counts  mfCounts
}

// run archives the backlog once and returns what it measured, once it
// checked that every record reached both sinks.
func (b *mfBed) run(ctx context.Context, r mfRun) (mfResult, error) {
	metricsAddr, err := benchkit.FreeAddr()
	if err != nil {
		return mfResult{}, err
	}
	s3URL := "s3://" + benchkit.Bucket + "/" + r.name + "?endpoint=" + b.s3 + "&path-style=true&region=us-east-1" + r.flush
	if !r.manifests {
		s3URL += "&manifests=false"
	}
	args := []string{"run", "--endpoint", b.eng.Endpoint(), "--table", plBenchTable,
		"--checkpoint", "file://" + filepath.Join(b.work, r.name+"-checkpoints.json"),
		"--metrics-addr", metricsAddr, "--log-level", "warn",
		"--max-in-flight-bytes", fmt.Sprintf("%dMiB", plBudgetMiB),
		"--sink", b.ns.ClientURL() + "?subject=" + r.name + ".{table}.{kind}&create-stream=" + strings.ToUpper(r.name),
		"--sink", s3URL}
	if r.profile != "" {
		args = append(args, "--pprof")
	}
	cmd := exec.Command(b.bin, args...)
	cmd.Env = benchkit.ArchiverEnv()
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return mfResult{}, err
	}
	exited, kill := benchkit.Watch(cmd)
	defer kill()
	if r.profile != "" {
		go func() {
			if err := benchkit.Profile(ctx, metricsAddr, "profile?seconds=20", r.profile); err != nil {
				fmt.Fprintf(os.Stderr, "  archiver CPU profile: %v\n", err)
			}
		}()
	}
	res, err := mfStopWhenRead(ctx, cmd, exited, &logs, metricsAddr, b.sz.items)
	if err != nil {
		return mfResult{}, fmt.Errorf("run %s: %w", r.name, err)
	}
	res.counts = b.count.of(r.name)
	return res, b.check(ctx, r.name, res.counts)
}

// mfStopWhenRead waits until the archiver decoded every record of the
// backlog of items, stops it (SIGTERM: it flushes, records and saves) and returns
// its CPU time, start to exit and after the SIGTERM.
func mfStopWhenRead(ctx context.Context, cmd *exec.Cmd, exited <-chan struct{}, logs *bytes.Buffer, metricsAddr string, items int) (mfResult, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for benchkit.MetricSum(metricsAddr, "archiver_events_total") < float64(items) {
		select {
		case <-exited:
			return mfResult{}, fmt.Errorf("archiver exited early\n%s", benchkit.Tail(logs.String(), 2000))
		case <-ctx.Done():
			return mfResult{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return mfResult{}, errors.New("the archiver did not read the backlog within 10 minutes")
		}
	}
	atTerm, _ := benchkit.ProcCPU(cmd.Process.Pid)
	termAt := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		return mfResult{}, errors.New("archiver did not stop within 60s of SIGTERM")
	}
	stop := time.Since(termAt)
	if !cmd.ProcessState.Success() {
		return mfResult{}, fmt.Errorf("archiver: %s\n%s", cmd.ProcessState, benchkit.Tail(logs.String(), 2000))
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return mfResult{}, errors.New("no resource usage of the archiver")
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return mfResult{cpu: cpu, stopCPU: cpu - atTerm, stop: stop}, nil
}

// check holds run name to every record in S3 and on JetStream, then
// frees what it stored.
func (b *mfBed) check(ctx context.Context, name string, counts mfCounts) error {
	stream := strings.ToUpper(name)
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("run %s: stream %s: %w", name, stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("run %s: stream %s: %w", name, stream, err)
	}
	if err := b.js.DeleteStream(ctx, stream); err != nil {
		return fmt.Errorf("run %s: %w", name, err)
	}
	if err := os.RemoveAll(filepath.Join(b.s3Dir, name)); err != nil {
		return err
	}
	if counts.records != int64(b.sz.items) || info.State.Msgs != uint64(b.sz.items) {
		return fmt.Errorf("run %s: %d records in S3 objects, %d messages on JetStream; want %d each",
			name, counts.records, info.State.Msgs, b.sz.items)
	}
	return nil
}

// mfPaired is benchkit.Paired, telling on stderr which run of what starts.
func mfPaired(what string, rounds int, together bool, measure func(round int, manifests bool) (float64, error)) (on, off []float64, err error) {
	return benchkit.Paired(rounds, together, func(round int, m bool) {
		mfProgress("%s, round %d/%d, manifests %s", what, round+1, rounds, onOff(m))
	}, measure)
}

// mfProgress tells on stderr what the manifests bench is doing.
var mfProgress = benchkit.Progress("manifests")

func onOff(m bool) string { return map[bool]string{true: "on", false: "off"}[m] }

// mfPrintPaired prints each side's median and range and the median of
// the rounds' own ratios on/off with their range.
func mfPrintPaired(w io.Writer, unit, target string, on, off []float64) {
	ratios := make([]float64, len(on))
	for i := range on {
		ratios[i] = on[i]/off[i] - 1
	}
	for _, side := range []struct {
		name string
		v    []float64
	}{{"on ", on}, {"off", off}} {
		fmt.Fprintf(w, "    manifests %s: %.2f %s (median of %d rounds; %.2f to %.2f)\n",
			side.name, benchkit.Median(slices.Clone(side.v)), unit, len(side.v), slices.Min(side.v), slices.Max(side.v))
	}
	parts := make([]string, len(ratios))
	for i, r := range ratios {
		parts[i] = fmt.Sprintf("%+.1f%%", 100*r)
	}
	fmt.Fprintf(w, "    on/off: %+.1f%% (median of the rounds' own ratios; range %+.1f%% to %+.1f%%; %s) (rounds: %s)\n",
		100*benchkit.Median(slices.Clone(ratios)), 100*slices.Min(ratios), 100*slices.Max(ratios), target, strings.Join(parts, " "))
}

// cpuRounds measures the archiver's CPU per record with manifests on and
// off at the pipeline bench's settings, and counts its S3 requests.
func (b *mfBed) cpuRounds(ctx context.Context, w io.Writer) error {
	profile := os.Getenv("ARCHIVER_BENCH_PROFILE")
	var mu sync.Mutex
	results := map[bool][]mfResult{}
	on, off, err := mfPaired("pipeline", b.sz.rounds, true, func(round int, m bool) (float64, error) {
		r := mfRun{name: fmt.Sprintf("r%d%s", round, onOff(m)), manifests: m, flush: mfPipelineFlush}
		if round == 0 && profile != "" {
			r.profile = profile + "." + onOff(m)
		}
		res, err := b.run(ctx, r)
		mu.Lock()
		results[m] = append(results[m], res)
		mu.Unlock()
		return res.cpu.Seconds() * 1e6 / float64(b.sz.items), err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  archiver CPU per record (user+sys of the process, start to exit; S3 %s as in the pipeline bench):\n", strings.TrimPrefix(mfPipelineFlush, "&"))
	mfPrintPaired(w, "µs", "target <= +2%", on, off)
	stopOf := func(m bool) (cpu, wall time.Duration) {
		var c, d []float64
		for _, r := range results[m] {
			c, d = append(c, float64(r.stopCPU)), append(d, float64(r.stop))
		}
		return time.Duration(benchkit.Median(c)), time.Duration(benchkit.Median(d))
	}
	onCPU, onWall := stopOf(true)
	offCPU, offWall := stopOf(false)
	fmt.Fprintf(w, "    of which from SIGTERM to exit (flush, last manifests, checkpoints; medians): on %s CPU in %s, off %s in %s\n",
		onCPU.Round(time.Millisecond), onWall.Round(time.Millisecond), offCPU.Round(time.Millisecond), offWall.Round(time.Millisecond))
	c := results[true][0].counts
	fmt.Fprintf(w, "    S3 requests of a backlog at %s, manifests on: %d data PUTs, %d manifest PUTs, %d PUTs answered otherwise, %d reads of manifests (a round; off: %d data PUTs)\n",
		strings.TrimPrefix(mfPipelineFlush, "&"), c.dataPuts, c.manifestPuts, c.failedPuts, c.manifestReads, results[false][0].counts.dataPuts)
	return nil
}

// defaultFlushPuts counts the S3 PUTs of one backlog at the S3 sink's
// default flush settings, manifests on and off.
func (b *mfBed) defaultFlushPuts(ctx context.Context, w io.Writer) error {
	var c [2]mfCounts
	for i, m := range []bool{true, false} {
		mfProgress("S3 PUTs at the default flush settings, manifests %s", onOff(m))
		res, err := b.run(ctx, mfRun{name: "default" + onOff(m), manifests: m})
		if err != nil {
			return err
		}
		c[i] = res.counts
	}
	on := c[0]
	fmt.Fprintf(w, "  S3 PUTs of the backlog at the default flush settings (flush-bytes 8MiB, flush-interval 60s; %d shards):\n", pipelineShards)
	fmt.Fprintf(w, "    manifests on: %d data PUTs, %d manifest PUTs (%.1f per shard), %d PUTs answered otherwise, %d reads of manifests: manifest PUTs %+.1f%% of data PUTs (target <= +1%%)\n",
		on.dataPuts, on.manifestPuts, float64(on.manifestPuts)/pipelineShards, on.failedPuts, on.manifestReads,
		100*float64(on.manifestPuts+on.failedPuts)/float64(max(on.dataPuts, 1)))
	fmt.Fprintf(w, "    manifests off: %d data PUTs, %d manifest PUTs, %d PUTs answered otherwise\n", c[1].dataPuts, c[1].manifestPuts, c[1].failedPuts)
	fmt.Fprintf(w, "    (a shard's range is recorded every manifest-objects=%d objects and at the stop: at least one manifest per shard and run; +1%% once a shard's run holds %d objects, %d MiB of lines)\n",
		sinks.DefaultManifestObjects, sinks.DefaultManifestObjects, 8*sinks.DefaultManifestObjects)
	return nil
}

// mfFileSink measures the file sink's CPU per event in this process with
// manifests on and off: the append path, fsync included (no Record: no
// consumer asks for one).
func mfFileSink(ctx context.Context, w io.Writer, sz mfSizes) error {
	var lineBytes int64
	on, off, err := mfPaired("file sink", sz.fileRounds, false, func(round int, m bool) (float64, error) {
		dir, err := os.MkdirTemp("", "manifests-bench-file-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		u := "file://" + dir
		if !m {
			u += "?manifests=false"
		}
		s, _, err := sinks.Open(ctx, u, sinks.Options{})
		if err != nil {
			return 0, err
		}
		defer s.Close(ctx)
		evs := sinksBenchEvents(fmt.Sprintf("f%d%s", round, onOff(m)), sz.fileEvents)
		benchkit.Settle()
		before := benchkit.SelfCPU()
		if err := sinksBenchWrite(ctx, s, evs); err != nil {
			return 0, err
		}
		cpu := benchkit.SelfCPU() - before
		lineBytes = mfDirBytes(dir)
		return cpu.Seconds() * 1e6 / float64(sz.fileEvents), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  file sink CPU per event (this process, %s events of %d bytes in %d shards, batches of %d, fsync included; on and off one after the other, order alternating):\n",
		benchkit.FmtInt(float64(sz.fileEvents)), lineBytes/int64(sz.fileEvents), sinksBenchShards, sinksBenchBatch)
	mfPrintPaired(w, "µs", "the running SHA-256 of each file", on, off)
	return nil
}

// mfDirBytes is the size of the files below dir.
func mfDirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
