package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/natsmsg"
)

// The NATS formats side by side: one backlog of expiries, archived to
// JetStream and S3 by a fresh `archiver run` per format (the real binary, a
// child process), the formats alternating over the rounds (which goes
// first alternates too), so that load from elsewhere on the machine hits
// both alike. Each run reads the whole stream from its trim horizon with a
// checkpoint file of its own into a JetStream stream and an S3 prefix of
// its own. CPU is the child's user+sys from its rusage (start-up and
// SIGTERM included, the same for both), peak RSS its VmHWM read while it
// runs; the ratios are the median of each round's own ratio, and each
// round's are printed on stderr as it ends (to pool runs, or see drift).

// fmtSizes are the backlog (ARCHIVER_BENCH_FORMAT_ITEMS overrides it), its
// items' padding (the pipeline bench's) and how many runs each format gets
// (ARCHIVER_BENCH_FORMAT_ROUNDS).
type fmtSizes struct{ items, itemBytes, rounds int }

func fmtSizesFor(tiny bool) fmtSizes {
	if tiny {
		return fmtSizes{items: 200, rounds: 1}
	}
	return fmtSizes{items: envInt("ARCHIVER_BENCH_FORMAT_ITEMS", 30_000), rounds: envInt("ARCHIVER_BENCH_FORMAT_ROUNDS", 5),
		itemBytes: plSizesFor(false).itemBytes}
}

const fmtTable = "BenchFormats"

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// fmtRun is one archiver run's figures.
type fmtRun struct {
	records int // the backlog it archived
	cpu     time.Duration
	rss     int64 // MiB
	elapsed time.Duration
	msgSize float64 // bytes a JetStream message took in the stream, on average
}

func (r fmtRun) cpuPerRecord() float64 { return r.cpu.Seconds() * 1e6 / float64(r.records) }

// fmtBench holds the parts every run uses.
type fmtBench struct {
	sz                                               fmtSizes
	bin, work, engineURL, natsURL, s3Endpoint, s3Dir string
	js                                               jetstream.JetStream
	// profile and heap: ARCHIVER_BENCH_PROFILE and ARCHIVER_BENCH_HEAP,
	// taken in the first round, one file per format (FILE.FORMAT).
	profile, heap string
	// log: ARCHIVER_BENCH_LOG, the archiver's output of every run
	// (FILE.ROUND.FORMAT; e.g. with GODEBUG=gctrace=1).
	log     string
	closers []func()
}

func runNATSFormatsBench(ctx context.Context, w io.Writer, tiny bool) error {
	b := &fmtBench{sz: fmtSizesFor(tiny),
		profile: os.Getenv("ARCHIVER_BENCH_PROFILE"), heap: os.Getenv("ARCHIVER_BENCH_HEAP"), log: os.Getenv("ARCHIVER_BENCH_LOG")}
	defer b.close()
	if err := b.start(ctx); err != nil {
		return err
	}
	formats := []string{natsmsg.FormatEnvelope, natsmsg.FormatCloudEvents}
	runs := map[string][]fmtRun{}
	for round := 0; round < b.sz.rounds; round++ {
		if err := b.round(ctx, round, formats, runs); err != nil {
			return err
		}
	}
	printNATSFormats(w, runs[formats[0]], runs[formats[1]])
	return nil
}

func (b *fmtBench) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// start builds the archiver, starts the engine, NATS and versitygw, and
// loads and sweeps the backlog.
func (b *fmtBench) start(ctx context.Context) (err error) {
	if b.work, err = os.MkdirTemp("", "archiver-formats-bench-"); err != nil {
		return err
	}
	b.closers = append(b.closers, func() { os.RemoveAll(b.work) })
	if b.bin, err = benchkit.BuildArchiver(ctx, b.work); err != nil {
		return err
	}
	eng, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, StreamShards: pipelineShards})
	if err != nil {
		return err
	}
	b.closers = append(b.closers, func() { eng.Close() })
	b.engineURL = eng.Endpoint()
	if err := b.startNATS(); err != nil {
		return err
	}
	s3root := filepath.Join(b.work, "s3")
	var stopS3 func()
	if b.s3Endpoint, stopS3, err = benchkit.StartVersitygw(ctx, s3root); err != nil {
		return err
	}
	b.closers = append(b.closers, stopS3)
	if err := benchkit.CreateBucket(ctx, b.s3Endpoint); err != nil {
		return err
	}
	b.s3Dir = filepath.Join(s3root, benchkit.Bucket)
	ddb, _ := benchkit.Clients(b.engineURL)
	if err := plLoadExpiredTable(ctx, ddb, fmtTable, b.sz.items, b.sz.itemBytes); err != nil {
		return err
	}
	if n, err := eng.Engine().SweepTTL(ctx); err != nil || n != b.sz.items {
		return fmt.Errorf("sweep deleted %d items (want %d): %v", n, b.sz.items, err)
	}
	return nil
}

// startNATS starts NATS and connects to its JetStream.
func (b *fmtBench) startNATS() error {
	ns, err := benchkit.StartNATS(filepath.Join(b.work, "nats"))
	if err != nil {
		return err
	}
	b.closers = append(b.closers, ns.Shutdown)
	b.natsURL = ns.ClientURL()
	nc, err := nats.Connect(b.natsURL)
	if err != nil {
		return err
	}
	b.closers = append(b.closers, nc.Close)
	b.js, err = jetstream.New(nc)
	return err
}

// round runs the archiver once with each format (which goes first
// alternates), adds the runs to runs and prints the round's ratios on
// stderr.
func (b *fmtBench) round(ctx context.Context, round int, formats []string, runs map[string][]fmtRun) error {
	order := formats
	if round%2 == 1 {
		order = []string{formats[1], formats[0]}
	}
	for _, f := range order {
		fmt.Fprintf(os.Stderr, "  [formats %s] round %d/%d: format=%s\n", time.Now().Format("15:04:05"), round+1, b.sz.rounds, f)
		benchkit.Settle()
		r, err := b.run(ctx, round, f)
		if err != nil {
			return fmt.Errorf("round %d, format=%s: %w", round+1, f, err)
		}
		runs[f] = append(runs[f], r)
	}
	env, ce := runs[formats[0]][round], runs[formats[1]][round]
	fmt.Fprintf(os.Stderr, "  [formats] round %d: cloudevents / envelope CPU per record %.1f / %.1f µs = %.3fx, peak RSS %d / %d MiB = %.3fx\n",
		round+1, ce.cpuPerRecord(), env.cpuPerRecord(), ce.cpuPerRecord()/env.cpuPerRecord(), ce.rss, env.rss, float64(ce.rss)/float64(env.rss))
	return nil
}

// run archives the backlog once with format f, into a stream and S3
// prefix of its own, and returns the archiver's figures.
func (b *fmtBench) run(ctx context.Context, round int, f string) (fmtRun, error) {
	name := fmt.Sprintf("F%d%s", round, strings.ToUpper(f))
	prefix := "fmt-" + strconv.Itoa(round) + "-" + f
	metricsAddr, err := benchkit.FreeAddr()
	if err != nil {
		return fmtRun{}, err
	}
	profile := round == 0 && (b.profile != "" || b.heap != "")
	cmd := b.command(round, f, name, prefix, metricsAddr, profile)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if b.log != "" {
		lf, err := os.Create(fmt.Sprintf("%s.%d.%s", b.log, round, f))
		if err != nil {
			return fmtRun{}, err
		}
		defer lf.Close()
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&logs, lf), io.MultiWriter(&logs, lf)
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return fmtRun{}, err
	}
	exited, kill := benchkit.Watch(cmd)
	defer kill()
	if profile {
		b.startProfiles(ctx, metricsAddr, f)
	}
	return b.waitAndStop(ctx, cmd, exited, &logs, started, name, prefix)
}

// command is the archiver of run name (its stream, subjects' root in lower
// case) archiving with format f into S3 prefix.
func (b *fmtBench) command(round int, f, name, prefix, metricsAddr string, profile bool) *exec.Cmd {
	args := []string{"run", "--endpoint", b.engineURL, "--table", fmtTable,
		"--checkpoint", "file://" + filepath.Join(b.work, prefix+".json"), "--metrics-addr", metricsAddr,
		"--log-level", "warn", "--max-in-flight-bytes", fmt.Sprintf("%dMiB", plBudgetMiB),
		"--sink", fmt.Sprintf("%s?subject=%s.{table}.{kind}&create-stream=%s&format=%s", b.natsURL, strings.ToLower(name), name, f),
		"--sink", "s3://" + benchkit.Bucket + "/" + prefix + "?endpoint=" + b.s3Endpoint + "&path-style=true&region=us-east-1&flush-interval=1s"}
	if profile {
		args = append(args, "--pprof")
	}
	cmd := exec.Command(b.bin, args...)
	cmd.Env = benchkit.ArchiverEnv()
	return cmd
}

// waitAndStop waits until the backlog is in stream name and S3 prefix,
// stops the archiver (SIGTERM) and returns its figures, then frees what
// the run stored.
func (b *fmtBench) waitAndStop(ctx context.Context, cmd *exec.Cmd, exited <-chan struct{}, logs *bytes.Buffer, started time.Time, name, prefix string) (fmtRun, error) {
	scan := &plS3Scanner{dir: filepath.Join(b.s3Dir, prefix), seen: map[string]bool{}, lat: plNewLatencies(nil)}
	var inStream jetstream.StreamInfo
	err := plWaitArrivals(ctx, exited, logs, scan, 100*time.Millisecond,
		func() bool {
			if st, err := b.js.Stream(ctx, name); err == nil {
				if info, err := st.Info(ctx); err == nil {
					inStream = *info
				}
			}
			return inStream.State.Msgs >= uint64(b.sz.items) && scan.lat.count() >= b.sz.items
		},
		func() string {
			return fmt.Sprintf("%d in JetStream, %d in S3 of %d", inStream.State.Msgs, scan.lat.count(), b.sz.items)
		})
	if err != nil {
		return fmtRun{}, err
	}
	r := fmtRun{records: b.sz.items, elapsed: time.Since(started), rss: benchkit.PeakRSSMiB(cmd.Process.Pid),
		msgSize: float64(inStream.State.Bytes) / float64(max(inStream.State.Msgs, 1))}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		return fmtRun{}, errors.New("archiver did not stop within 60s of SIGTERM")
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return fmtRun{}, errors.New("no rusage")
	}
	r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if err := b.js.DeleteStream(ctx, name); err != nil {
		return fmtRun{}, err
	}
	return r, os.RemoveAll(filepath.Join(b.s3Dir, prefix))
}

// startProfiles saves the archiver's CPU profile over its first 3 s
// (ARCHIVER_BENCH_PROFILE_SECONDS) to FILE.FORMAT, and its heap every
// second to FILE.FORMAT.N.
func (b *fmtBench) startProfiles(ctx context.Context, addr, f string) {
	if b.profile != "" {
		go func() {
			secs := envInt("ARCHIVER_BENCH_PROFILE_SECONDS", 3)
			if err := benchkit.Profile(ctx, addr, fmt.Sprintf("profile?seconds=%d", secs), b.profile+"."+f); err != nil {
				fmt.Fprintf(os.Stderr, "  archiver CPU profile: %v\n", err)
			}
		}()
	}
	if b.heap != "" {
		go func() {
			for i := 1; ; i++ {
				time.Sleep(time.Second)
				if benchkit.Profile(ctx, addr, "heap", fmt.Sprintf("%s.%s.%d", b.heap, f, i)) != nil {
					return // the run is over
				}
			}
		}()
	}
}

// printNATSFormats prints each format's medians with their ranges and the
// medians of the rounds' own ratios cloudevents / envelope.
func printNATSFormats(w io.Writer, env, ce []fmtRun) {
	fmt.Fprintf(w, "  nats formats: a backlog of %d expiries archived to JetStream and S3 by a fresh archiver per format, %d rounds alternating; median (min-max):\n",
		env[0].records, len(env))
	for _, x := range []struct {
		name string
		runs []fmtRun
	}{{natsmsg.FormatEnvelope, env}, {natsmsg.FormatCloudEvents, ce}} {
		fmt.Fprintf(w, "    format=%-12s CPU %s µs/record, peak RSS %s MiB, %s records/s, %s B a message in JetStream\n", x.name,
			fmtSpread(x.runs, "%.1f", fmtRun.cpuPerRecord),
			fmtSpread(x.runs, "%.0f", func(r fmtRun) float64 { return float64(r.rss) }),
			fmtSpread(x.runs, "%.0f", func(r fmtRun) float64 { return float64(r.records) / r.elapsed.Seconds() }),
			fmtSpread(x.runs, "%.0f", func(r fmtRun) float64 { return r.msgSize }))
	}
	ratio := func(f func(fmtRun) float64) string {
		xs := make([]float64, min(len(env), len(ce)))
		for i := range xs {
			xs[i] = f(ce[i]) / f(env[i])
		}
		return fmt.Sprintf("%.2fx (%.2f-%.2f)", benchkit.Median(slices.Clone(xs)), slices.Min(xs), slices.Max(xs))
	}
	fmt.Fprintf(w, "    cloudevents / envelope, median of the rounds' own ratios: CPU per record %s, peak RSS %s (target <= 1.10x each)\n",
		ratio(fmtRun.cpuPerRecord), ratio(func(r fmtRun) float64 { return float64(r.rss) }))
}

// fmtSpread renders the median of f over runs with its range.
func fmtSpread(runs []fmtRun, format string, f func(fmtRun) float64) string {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return benchkit.Spread(format, xs)
}
