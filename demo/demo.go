// Package demo is `archiver demo`'s workload: the engine and an embedded
// NATS server with JetStream in one process, the SessionData table of
// DynamoDB's TTL documentation, waves of sessions that expire over the
// next seconds and user deletes, a NATS subscriber that prints expiries as
// they arrive, and the summary. The archiver itself is the caller's
// (Options.Archiver): cmd/archiver runs its pipeline there.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
	"github.com/ttl-archiver/archiver/sweep"
)

// Table is the demo's table.
const Table = "SessionData"

// SlowTTL is how late the engine's own TTL deletes with Options.Precise: a
// stand-in for DynamoDB's "typically within 48 hours".
const SlowTTL = 30 * time.Second

// Summary is what the demo found at the end.
type Summary struct {
	ExpiringWritten int
	UserDeletes     int
	Archived        int // distinct expired events in the archive folder
	Published       int // distinct expired events received on NATS
	DeletesSeen     int // user deletes the consumer classified (not archived)
	DeletesArchived int // must stay 0
	// Measured is how many expiries the lags below were measured on (those
	// published with their TTL time); with none, the lags mean nothing.
	Measured       int
	LagP50, LagMax time.Duration // deletion time - ExpirationTime
	// NATSP50, NATSMax: arrival on NATS - ExpirationTime (TTL sweep lag +
	// stream + archiver).
	NATSP50, NATSMax time.Duration
	// ArchiveDir is the archive folder; "" when it was a temporary one,
	// removed at the end.
	ArchiveDir string
	// BySweeper and ByTTL count the expiries on NATS by who deleted the
	// item: `archiver sweep` or the engine's own TTL.
	BySweeper, ByTTL int
}

// Options configure Run.
type Options struct {
	// Duration ends the demo (0: when ctx ends).
	Duration time.Duration
	// ArchiveDir is the archive folder, kept (default: one in a new
	// temporary folder, removed with it at the end).
	ArchiveDir string
	Log        *zap.Logger
	// Out receives the demo's lines.
	Out io.Writer
	// Precise runs `archiver sweep` beside the archiver, against an engine
	// whose own TTL is slowed to SlowTTL.
	Precise bool
	// Archiver runs the archiver as cfg says until ctx ends, and returns
	// once it stopped (flushed and checkpointed).
	Archiver func(ctx context.Context, cfg Archiver) error
	// Metrics gathers what Archiver registers: the summary reads the user
	// deletes it saw from archiver_events_total.
	Metrics prometheus.Gatherer
}

// Archiver is the demo's part of the archiver's configuration, as `archiver
// run`'s flags of the same names say it; the rest is Options.Archiver's.
type Archiver struct {
	Endpoint   string
	Region     string
	Tables     []string
	Checkpoint string
	Sinks      []string
	// ExpiredWhen is "past-ttl" with Options.Precise (the sweeper's
	// deletes are expiries too), else "" (the default).
	ExpiredWhen string
}

// printer serializes the demo's lines.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, a...)
}

// Run runs the demo until ctx ends or Options.Duration passed, then lets
// what expired reach NATS, stops the archiver and returns the summary.
func Run(ctx context.Context, o Options) (*Summary, error) {
	out := &printer{w: o.Out}
	runCtx := ctx
	if o.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	work, err := os.MkdirTemp("", "ttl-archiver-demo-")
	if err != nil {
		return nil, err
	}
	archiveDir := o.ArchiveDir
	if archiveDir == "" {
		archiveDir = filepath.Join(work, "archive")
	}
	// Nothing is left behind: an archive asked for (--archive) is the
	// user's; the temporary folder goes, with a temporary archive in it.
	defer func() { _ = os.RemoveAll(work) }()

	// 1. The engine, sweeping TTL every second (late on purpose with
	// --precise).
	ttlLag := 2 * time.Second
	if o.Precise {
		ttlLag = SlowTTL
	}
	eng, err := engine.Listen("127.0.0.1:0", engine.Options{
		TTLInterval: time.Second, TTLLag: ttlLag, StreamShards: 2, Logger: o.Log.Named("engine")})
	if err != nil {
		return nil, fmt.Errorf("start engine: %w", err)
	}
	defer eng.Close()

	// 2. NATS with JetStream, in a temporary folder.
	ns, err := startNATS(filepath.Join(work, "nats"))
	if err != nil {
		return nil, err
	}
	defer ns.Shutdown()
	natsURL := ns.ClientURL()

	// 3. The table from DynamoDB's TTL documentation.
	ddb := dynamodb.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("demo", "demo", ""),
		HTTPClient:  sdkhttp.Client(nil), // as every AWS client of the archiver
	}, func(op *dynamodb.Options) { op.BaseEndpoint = aws.String(eng.Endpoint()) })
	// Set up even when ctx ended (Ctrl-C at start): the demo still stops
	// as it would later, with its summary. The engine is local and answers
	// at once; the bound is for a bug.
	setupCtx, cancelSetup := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelSetup()
	if _, err := CreateSessionTable(setupCtx, ddb, Table); err != nil {
		return nil, err
	}
	printHeader(out, o.Precise, eng.Endpoint(), ttlLag, natsURL, archiveDir)
	out.printf("%s\n\n", stopHint(o.Duration))

	// 4. A live subscriber: what another service would see on NATS.
	sub, err := subscribe(natsURL, out, o.Precise)
	if err != nil {
		return nil, err
	}
	defer sub.close()

	// 5. The archiver, as `archiver run` would be configured.
	cfg := Archiver{
		Endpoint:   eng.Endpoint(),
		Region:     "us-east-1",
		Tables:     []string{Table},
		Checkpoint: "file://" + filepath.Join(work, "checkpoints.json"),
		Sinks: []string{
			"file://" + archiveDir,
			natsURL + "?subject=demo.{table}.{kind}&create-stream=DEMO&events=expired",
		},
	}
	if o.Precise {
		cfg.ExpiredWhen = "past-ttl" // the sweeper's deletes are expiries too
	}
	pipeCtx, stopPipe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPipe()
	pipeDone := make(chan error, 1)
	go func() { pipeDone <- o.Archiver(pipeCtx, cfg) }()
	sweepDone, err := startSweeper(pipeCtx, o, ddb)
	if err != nil {
		return nil, err
	}

	// 6. The workload: waves of sessions expiring over the next seconds and
	// a user delete per wave.
	var expiring, deletes atomic.Int64
	writerDone := make(chan error, 1)
	stopWritingAt := time.Time{}
	if o.Duration > 0 {
		stopWritingAt = time.Now().Add(o.Duration - 5*time.Second)
	}
	go func() {
		writerDone <- workload(runCtx, ddb, out, archiveDir, stopWritingAt, &expiring, &deletes)
	}()

	pipeErr := stopAll(ctx, runCtx, out, stopPipe, pipeDone, writerDone, sweepDone, sub, &expiring)
	if pipeErr != nil {
		return nil, fmt.Errorf("archiver: %w", pipeErr)
	}
	sub.flush()
	sum, err := summarize(o.Metrics, sub, archiveDir, int(expiring.Load()), int(deletes.Load()))
	if err == nil && o.ArchiveDir == "" {
		sum.ArchiveDir = "" // removed with the temporary folder
	}
	return sum, err
}

// startNATS starts NATS with JetStream, storing in dir.
func startNATS(dir string) (*natsserver.Server, error) {
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("start NATS: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("start NATS: not ready after 10s")
	}
	return ns, nil
}

// printHeader says what runs where.
func printHeader(out *printer, precise bool, endpoint string, ttlLag time.Duration, natsURL, archiveDir string) {
	out.printf("TTL Archiver demo\n")
	out.printf("  engine   %s  (DynamoDB + Streams; TTL sweeps every 1s, deletes up to %s late like DynamoDB)\n", endpoint, ttlLag)
	if precise {
		out.printf("  sweep    archiver sweep on %s.%s: expired items deleted within about a second of their TTL\n", Table, sweep.DefaultIndex)
	}
	out.printf("  nats     %s  (JetStream stream DEMO, subjects demo.%s.expired)\n", natsURL, Table)
	out.printf("  archive  %s\n", archiveDir)
	out.printf("  table    %s: UserName (hash), SessionId (range), CreationTime, ExpirationTime (TTL), SessionInfo\n\n", Table)
}

// stopHint says how the demo ends: by itself after d, or on Ctrl-C (d 0).
func stopHint(d time.Duration) string {
	if d > 0 {
		return fmt.Sprintf("Stops by itself after %s (Ctrl-C stops it sooner), then prints a summary.", d)
	}
	return "Press Ctrl-C to stop; the demo then prints a summary."
}

// stopAll waits until runCtx ends or the archiver stopped by itself, then
// for the writer; lets what has expired reach NATS (TTL is enforced to the
// second and swept every second), then stops the archiver (it flushes and
// checkpoints) and the sweeper. It returns the archiver's error.
func stopAll(ctx, runCtx context.Context, out *printer, stopPipe context.CancelFunc, pipeDone <-chan error,
	writerDone, sweepDone <-chan error, sub *subscriber, expiring *atomic.Int64) error {
	var pipeErr error
	select {
	case <-runCtx.Done():
	case pipeErr = <-pipeDone:
		pipeDone = nil
	}
	werr := <-writerDone
	if werr != nil && !errors.Is(werr, context.Canceled) && !errors.Is(werr, context.DeadlineExceeded) {
		out.printf("  ! writer: %v\n", werr)
	}
	if pipeDone != nil {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if int64(sub.count()) >= expiring.Load() {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		stopPipe()
		pipeErr = <-pipeDone
		if errors.Is(pipeErr, context.Canceled) {
			pipeErr = nil // stopped while it was still starting: the stop asked for
		}
	}
	stopPipe()
	if err := <-sweepDone; err != nil {
		out.printf("  ! sweeper: %v\n", err)
	}
	return pipeErr
}

// startSweeper runs `archiver sweep` on the demo table until ctx ends
// (with Options.Precise; otherwise nothing). The returned channel gives
// its outcome once it stopped.
func startSweeper(ctx context.Context, o Options, ddb *dynamodb.Client) (<-chan error, error) {
	done := make(chan error, 1)
	if !o.Precise {
		done <- nil
		return done, nil
	}
	sw, err := sweep.New(sweep.Config{Client: ddb, Table: Table, Cursor: &sweep.MemoryCursor{}, Logger: o.Log.Named("sweep")})
	if err != nil {
		return nil, fmt.Errorf("sweeper: %w", err)
	}
	go func() {
		err := sw.Run(ctx)
		if ctx.Err() != nil {
			err = nil
		}
		done <- err
	}()
	return done, nil
}
