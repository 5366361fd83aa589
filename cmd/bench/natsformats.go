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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// fmtItems is the backlog (ARCHIVER_BENCH_FORMAT_ITEMS overrides it).
var fmtItems = envInt("ARCHIVER_BENCH_FORMAT_ITEMS", 30_000)

// fmtRounds is how many runs each format gets (ARCHIVER_BENCH_FORMAT_ROUNDS).
var fmtRounds = envInt("ARCHIVER_BENCH_FORMAT_ROUNDS", 5)

const fmtTable = "BenchFormats"

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// fmtRun is one archiver run's figures.
type fmtRun struct {
	cpu     time.Duration
	rss     int64 // MiB
	elapsed time.Duration
	msgSize float64 // bytes a JetStream message took in the stream, on average
}

func (r fmtRun) cpuPerRecord() float64 { return r.cpu.Seconds() * 1e6 / float64(fmtItems) }

// fmtBench holds the parts every run uses.
type fmtBench struct {
	bin, work, engineURL, natsURL, s3Endpoint, s3Dir string
	js                                               jetstream.JetStream
	// profile and heap: ARCHIVER_BENCH_PROFILE and ARCHIVER_BENCH_HEAP,
	// taken in the first round, one file per format (FILE.FORMAT).
	profile, heap string
	// log: ARCHIVER_BENCH_LOG, the archiver's output of every run
	// (FILE.ROUND.FORMAT; e.g. with GODEBUG=gctrace=1).
	log string
}

func runNATSFormatsBench(ctx context.Context, w io.Writer) error {
	root, err := plModuleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "archiver-formats-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := &fmtBench{work: work, bin: filepath.Join(work, "archiver"),
		profile: os.Getenv("ARCHIVER_BENCH_PROFILE"), heap: os.Getenv("ARCHIVER_BENCH_HEAP"), log: os.Getenv("ARCHIVER_BENCH_LOG")}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", b.bin, "./cmd/archiver")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build archiver: %v\n%s", err, out)
	}
	eng, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, StreamShards: pipelineShards})
	if err != nil {
		return err
	}
	defer eng.Close()
	b.engineURL = eng.Endpoint()
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
	b.natsURL = ns.ClientURL()
	nc, err := nats.Connect(b.natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	if b.js, err = jetstream.New(nc); err != nil {
		return err
	}
	s3root := filepath.Join(work, "s3")
	var stopS3 func()
	if b.s3Endpoint, stopS3, err = b.startS3(ctx, root, s3root); err != nil {
		return err
	}
	defer stopS3()
	b.s3Dir = filepath.Join(s3root, plBenchBucket)
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")}
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(b.engineURL) })
	if err := plLoadExpiredTable(ctx, ddb, fmtTable, fmtItems); err != nil {
		return err
	}
	if n, err := eng.Engine().SweepTTL(ctx); err != nil || n != fmtItems {
		return fmt.Errorf("sweep deleted %d items (want %d): %v", n, fmtItems, err)
	}
	formats := []string{natsmsg.FormatEnvelope, natsmsg.FormatCloudEvents}
	runs := map[string][]fmtRun{}
	for round := 0; round < fmtRounds; round++ {
		order := formats
		if round%2 == 1 {
			order = []string{formats[1], formats[0]}
		}
		for _, f := range order {
			fmt.Fprintf(os.Stderr, "  [formats %s] round %d/%d: format=%s\n", time.Now().Format("15:04:05"), round+1, fmtRounds, f)
			settle()
			r, err := b.run(ctx, round, f)
			if err != nil {
				return fmt.Errorf("round %d, format=%s: %w", round+1, f, err)
			}
			runs[f] = append(runs[f], r)
		}
		env, ce := runs[formats[0]][round], runs[formats[1]][round]
		fmt.Fprintf(os.Stderr, "  [formats] round %d: cloudevents / envelope CPU per record %.1f / %.1f µs = %.3fx, peak RSS %d / %d MiB = %.3fx\n",
			round+1, ce.cpuPerRecord(), env.cpuPerRecord(), ce.cpuPerRecord()/env.cpuPerRecord(), ce.rss, env.rss, float64(ce.rss)/float64(env.rss))
	}
	printNATSFormats(w, runs[formats[0]], runs[formats[1]])
	return nil
}

// startS3 starts versitygw in dir with the bench's bucket.
func (b *fmtBench) startS3(ctx context.Context, root, dir string) (string, func(), error) {
	endpoint, stop, err := plStartVersitygw(ctx, root, dir)
	if err != nil {
		return "", nil, err
	}
	s3c := s3.NewFromConfig(aws.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(plVersityKey, plVersitySecret, "")},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(endpoint); o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(plBenchBucket)}); err != nil {
		stop()
		return "", nil, fmt.Errorf("create bucket: %w", err)
	}
	return endpoint, stop, nil
}

// run archives the backlog once with format f, into a stream and S3
// prefix of its own, and returns the archiver's figures.
func (b *fmtBench) run(ctx context.Context, round int, f string) (fmtRun, error) {
	name := fmt.Sprintf("F%d%s", round, strings.ToUpper(f))
	prefix := "fmt-" + strconv.Itoa(round) + "-" + f
	metricsAddr, err := plFreeAddr()
	if err != nil {
		return fmtRun{}, err
	}
	args := []string{"run", "--endpoint", b.engineURL, "--table", fmtTable,
		"--checkpoint", "file://" + filepath.Join(b.work, prefix+".json"), "--metrics-addr", metricsAddr,
		"--log-level", "warn", "--max-in-flight-bytes", fmt.Sprintf("%dMiB", plBudgetMiB),
		"--sink", fmt.Sprintf("%s?subject=%s.{table}.{kind}&create-stream=%s&format=%s", b.natsURL, strings.ToLower(name), name, f),
		"--sink", "s3://" + plBenchBucket + "/" + prefix + "?endpoint=" + b.s3Endpoint + "&path-style=true&region=us-east-1&flush-interval=1s"}
	profile := round == 0 && (b.profile != "" || b.heap != "")
	if profile {
		args = append(args, "--pprof")
	}
	cmd := exec.Command(b.bin, args...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+plVersityKey, "AWS_SECRET_ACCESS_KEY="+plVersitySecret,
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
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
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	if profile {
		b.startProfiles(ctx, metricsAddr, f)
	}
	scan := &plS3Scanner{dir: filepath.Join(b.s3Dir, prefix), seen: map[string]bool{}, lat: plNewLatencies(nil)}
	var inStream jetstream.StreamInfo
	err = plWaitArrivals(ctx, exited, &logs, scan, 100*time.Millisecond,
		func() bool {
			if st, err := b.js.Stream(ctx, name); err == nil {
				if info, err := st.Info(ctx); err == nil {
					inStream = *info
				}
			}
			return inStream.State.Msgs >= uint64(fmtItems) && scan.lat.count() >= fmtItems
		},
		func() string {
			return fmt.Sprintf("%d in JetStream, %d in S3 of %d", inStream.State.Msgs, scan.lat.count(), fmtItems)
		})
	if err != nil {
		return fmtRun{}, err
	}
	r := fmtRun{elapsed: time.Since(started), rss: procPeakRSS(cmd.Process.Pid),
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
			if err := plProfile(ctx, addr, fmt.Sprintf("profile?seconds=%d", secs), b.profile+"."+f); err != nil {
				fmt.Fprintf(os.Stderr, "  archiver CPU profile: %v\n", err)
			}
		}()
	}
	if b.heap != "" {
		go func() {
			for i := 1; ; i++ {
				time.Sleep(time.Second)
				if plProfile(ctx, addr, "heap", fmt.Sprintf("%s.%s.%d", b.heap, f, i)) != nil {
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
		fmtItems, len(env))
	for _, x := range []struct {
		name string
		runs []fmtRun
	}{{natsmsg.FormatEnvelope, env}, {natsmsg.FormatCloudEvents, ce}} {
		fmt.Fprintf(w, "    format=%-12s CPU %s µs/record, peak RSS %s MiB, %s records/s, %s B a message in JetStream\n", x.name,
			fmtSpread(x.runs, "%.1f", fmtRun.cpuPerRecord),
			fmtSpread(x.runs, "%.0f", func(r fmtRun) float64 { return float64(r.rss) }),
			fmtSpread(x.runs, "%.0f", func(r fmtRun) float64 { return float64(fmtItems) / r.elapsed.Seconds() }),
			fmtSpread(x.runs, "%.0f", func(r fmtRun) float64 { return r.msgSize }))
	}
	ratio := func(f func(fmtRun) float64) string {
		xs := make([]float64, min(len(env), len(ce)))
		for i := range xs {
			xs[i] = f(ce[i]) / f(env[i])
		}
		return fmt.Sprintf("%.2fx (%.2f-%.2f)", median(slices.Clone(xs)), slices.Min(xs), slices.Max(xs))
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
	return fmt.Sprintf(format+" ("+format+"-"+format+")", median(slices.Clone(xs)), slices.Min(xs), slices.Max(xs))
}
