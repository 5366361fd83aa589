package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/ops"
	"github.com/ttl-archiver/archiver/sweep"
)

const demoTable = "SessionData"

// demoSummary is what the demo found at the end; the test checks it.
type demoSummary struct {
	ExpiringWritten int
	UserDeletes     int
	Archived        int           // distinct expired events in the archive folder
	Published       int           // distinct expired events received on NATS
	DeletesSeen     int           // user deletes the consumer classified (not archived)
	DeletesArchived int           // must stay 0
	LagP50, LagMax  time.Duration // deletion time - ExpirationTime
	// NATSP50, NATSMax: arrival on NATS - ExpirationTime (TTL sweep lag +
	// stream + archiver).
	NATSP50, NATSMax time.Duration
	ArchiveDir       string
	// BySweeper and ByTTL count the expiries on NATS by who deleted the
	// item: `archiver sweep` or the engine's own TTL.
	BySweeper, ByTTL int
}

// demoCmd runs the engine, an embedded NATS server with JetStream and the
// archiver in one process, writes sessions that expire over the next
// seconds and some user deletes, prints expiries as they arrive on NATS and
// ends (Ctrl-C or --duration) with a summary.
func demoCmd(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("archiver demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	duration := fs.Duration("duration", 0, "stop after this long (default: run until Ctrl-C)")
	archive := fs.String("archive", "", "archive folder (default: a new temporary folder, kept and printed at the end)")
	logLevel := fs.String("log-level", "error", "log level of the embedded components (logs go to stderr)")
	precise := fs.Bool("precise", false, "also run `archiver sweep`: the engine's own TTL deletes up to 30s late, the sweeper within about a second of the TTL, and the archiver counts its deletes as expiries (--expired-when past-ttl)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(e.stdout, "usage: archiver demo [flags]\n\nEngine, NATS (JetStream) and archiver in one process; no network, no setup.\n\nflags:")
			fs.SetOutput(e.stdout)
			fs.PrintDefaults()
			return errHelp
		}
		return usagef("archiver demo: %v", err)
	}
	if *duration < 0 {
		return usagef("archiver demo: --duration: %s must not be negative", *duration)
	}
	if *duration > 0 && *duration < 6*time.Second {
		return usagef("archiver demo: --duration: %s is too short to see expiries; use 6s or more", *duration)
	}
	if _, err := ops.ParseLevel(*logLevel); err != nil {
		return usagef("archiver demo: --log-level: %v", err)
	}
	log, err := ops.NewLogger(os.Stderr, *logLevel, ops.FormatConsole)
	if err != nil {
		return err
	}
	sum, err := runDemo(ctx, demoOptions{Duration: *duration, ArchiveDir: *archive, Log: log, Out: e.stdout, Precise: *precise})
	if err != nil {
		return err
	}
	printSummary(e.stdout, sum)
	return nil
}

type demoOptions struct {
	Duration   time.Duration
	ArchiveDir string
	Log        *zap.Logger
	Out        io.Writer
	// Precise runs `archiver sweep` beside the archiver, against an engine
	// whose own TTL is slowed to demoSlowTTL.
	Precise bool
}

// demoSlowTTL is how late the engine's own TTL deletes with --precise: a
// stand-in for DynamoDB's "typically within 48 hours".
const demoSlowTTL = 30 * time.Second

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

func runDemo(ctx context.Context, o demoOptions) (*demoSummary, error) {
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
	// The archive stays for the user to look at; the rest goes.
	defer func() {
		_ = os.RemoveAll(filepath.Join(work, "nats"))
		_ = os.Remove(filepath.Join(work, "checkpoints.json"))
		_ = os.Remove(filepath.Join(work, "checkpoints.json.lock"))
	}()

	// 1. The engine, sweeping TTL every second (late on purpose with
	// --precise).
	ttlLag := 2 * time.Second
	if o.Precise {
		ttlLag = demoSlowTTL
	}
	eng, err := engine.Listen("127.0.0.1:0", engine.Options{
		TTLInterval: time.Second, TTLLag: ttlLag, StreamShards: 2, Logger: o.Log.Named("engine")})
	if err != nil {
		return nil, fmt.Errorf("start engine: %w", err)
	}
	defer eng.Close()

	// 2. NATS with JetStream, in a temporary folder.
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(work, "nats"),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("start NATS: %w", err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("start NATS: not ready after 10s")
	}
	natsURL := ns.ClientURL()

	// 3. The table from DynamoDB's TTL documentation.
	ddb := dynamodb.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("demo", "demo", ""),
	}, func(op *dynamodb.Options) { op.BaseEndpoint = aws.String(eng.Endpoint()) })
	if _, err := createSessionTable(ctx, ddb, demoTable); err != nil {
		return nil, err
	}

	out.printf("TTL Archiver demo\n")
	out.printf("  engine   %s  (DynamoDB + Streams; TTL sweeps every 1s, deletes up to %s late like DynamoDB)\n", eng.Endpoint(), ttlLag)
	if o.Precise {
		out.printf("  sweep    archiver sweep on %s.%s: expired items deleted within about a second of their TTL\n", demoTable, sweep.DefaultIndex)
	}
	out.printf("  nats     %s  (JetStream stream DEMO, subjects demo.%s.expired)\n", natsURL, demoTable)
	out.printf("  archive  %s\n", archiveDir)
	out.printf("  table    %s: UserName (hash), SessionId (range), CreationTime, ExpirationTime (TTL), SessionInfo\n\n", demoTable)

	// 4. A live subscriber: what another service would see on NATS.
	nc, err := nats.Connect(natsURL, nats.Name("demo-subscriber"))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	var (
		subMu     sync.Mutex
		published = map[string]bool{}
		lags      []time.Duration    // deletion time - ExpirationTime (stream precision: seconds)
		latencies []time.Duration    // arrival on NATS - ExpirationTime
		byWhom    = map[string]int{} // Metadata.deletedBy
	)
	sub, err := nc.Subscribe("demo.>", func(m *nats.Msg) {
		var line struct {
			Keys     map[string]map[string]any
			Metadata struct {
				Kind          string   `json:"kind"`
				EventID       string   `json:"eventID"`
				TTLLagSeconds *float64 `json:"ttlLagSeconds"`
				TTLTime       string   `json:"ttlTime"`
				DeletionTime  string   `json:"deletionTime"`
				DeletedBy     string   `json:"deletedBy"`
			}
		}
		if err := json.Unmarshal(m.Data, &line); err != nil {
			out.printf("  ! undecodable message on %s: %v\n", m.Subject, err)
			return
		}
		arrived := time.Now()
		lag, latency := time.Duration(-1), time.Duration(-1)
		if ttl, err := time.Parse(time.RFC3339Nano, line.Metadata.TTLTime); err == nil {
			latency = arrived.Sub(ttl)
			lag = 0 // absent ttlLagSeconds: deleted within the TTL's second
			if line.Metadata.TTLLagSeconds != nil {
				lag = time.Duration(*line.Metadata.TTLLagSeconds * float64(time.Second))
			}
		}
		subMu.Lock()
		dup := published[line.Metadata.EventID]
		published[line.Metadata.EventID] = true
		if !dup && lag >= 0 {
			lags = append(lags, lag)
			latencies = append(latencies, latency)
		}
		if !dup {
			byWhom[line.Metadata.DeletedBy]++
		}
		subMu.Unlock()
		if dup {
			return
		}
		user, _ := line.Keys["UserName"]["S"].(string)
		session, _ := line.Keys["SessionId"]["S"].(string)
		lagText, latText := "?", "?"
		if lag >= 0 {
			lagText = lag.Round(time.Millisecond).String()
			latText = latency.Round(time.Millisecond).String()
		}
		by := ""
		if o.Precise {
			by = "  deleted by " + map[string]string{"other": "archiver sweep", "dynamodb-ttl": "TTL"}[line.Metadata.DeletedBy]
		}
		out.printf("  expired  %-6s %-8s TTL lag %-4s on NATS %-7s after ExpirationTime (%s)%s\n", user, session, lagText, latText, m.Subject, by)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	// 5. The archiver, as `archiver run` would be configured.
	cfg := &runConfig{
		Endpoint:   eng.Endpoint(),
		Region:     "us-east-1",
		Tables:     []string{demoTable},
		Checkpoint: "file://" + filepath.Join(work, "checkpoints.json"),
		Sinks: []string{
			"file://" + archiveDir,
			natsURL + "?subject=demo.{table}.{kind}&create-stream=DEMO&events=expired",
		},
		Start:           "trim-horizon",
		ShutdownTimeout: 10 * time.Second,
		LeaseDuration:   20 * time.Second,
		LeaseRenew:      5 * time.Second,
		LogLevel:        "warn",
		MetricsAddr:     "127.0.0.1:0",
		Metrics:         "prometheus",
	}
	if o.Precise {
		cfg.ExpiredWhen = "past-ttl" // the sweeper's deletes are expiries too
	}
	reg := ops.NewRegistry(ops.Version(version))
	pipeCtx, stopPipe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPipe()
	pipeDone := make(chan error, 1)
	go func() {
		pipeDone <- runPipeline(pipeCtx, cfg, pipelineDeps{log: o.Log, reg: reg, stdout: io.Discard})
	}()
	sweepDone, err := startDemoSweeper(pipeCtx, o, ddb)
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
		writerDone <- demoWorkload(runCtx, ddb, out, archiveDir, stopWritingAt, &expiring, &deletes)
	}()

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
	// Let what has expired reach NATS (TTL is enforced to the second and
	// swept every second), then stop the archiver: it flushes and
	// checkpoints.
	if pipeDone != nil {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			subMu.Lock()
			n := len(published)
			subMu.Unlock()
			if int64(n) >= expiring.Load() {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		stopPipe()
		pipeErr = <-pipeDone
	}
	stopPipe()
	if err := <-sweepDone; err != nil {
		out.printf("  ! sweeper: %v\n", err)
	}
	if pipeErr != nil {
		return nil, fmt.Errorf("archiver: %w", pipeErr)
	}
	_ = nc.Flush()

	sum := &demoSummary{
		ExpiringWritten: int(expiring.Load()),
		UserDeletes:     int(deletes.Load()),
		ArchiveDir:      archiveDir,
	}
	sum.Archived, sum.DeletesArchived, err = countArchive(archiveDir)
	if err != nil {
		return nil, err
	}
	sum.DeletesSeen = int(counterValue(reg, "archiver_events_total", map[string]string{"kind": "deleted", "table": demoTable}))
	subMu.Lock()
	sum.Published = len(published)
	sum.LagP50, sum.LagMax = percentile(lags, 0.5), percentile(lags, 1)
	sum.NATSP50, sum.NATSMax = percentile(latencies, 0.5), percentile(latencies, 1)
	sum.BySweeper, sum.ByTTL = byWhom["other"], byWhom["dynamodb-ttl"]
	subMu.Unlock()
	return sum, nil
}

// demoWorkload writes a wave every 2 s: four sessions expiring 1-4 s later,
// one long-lived session that a user then deletes, until ctx ends or
// stopAt (zero: never) passes.
func demoWorkload(ctx context.Context, ddb *dynamodb.Client, out *printer, archiveDir string, stopAt time.Time, expiring, deletes *atomic.Int64) error {
	users := []string{"user1", "user2", "user3", "user4", "user5"}
	wave := 0
	for {
		if !stopAt.IsZero() && time.Now().After(stopAt) {
			return nil
		}
		now := time.Now()
		for i := 0; i < 4; i++ {
			n := wave*4 + i
			session := fmt.Sprintf("s%05d", n)
			exp := now.Add(time.Duration(1+i) * time.Second).Unix()
			if err := putSession(ctx, ddb, demoTable, users[n%len(users)], session, exp); err != nil {
				return err
			}
			expiring.Add(1)
		}
		// A session the user logs out of: a user delete, not an expiry.
		user, session := users[wave%len(users)], fmt.Sprintf("logout%04d", wave)
		if err := putSession(ctx, ddb, demoTable, user, session, now.Add(24*time.Hour).Unix()); err != nil {
			return err
		}
		if _, err := ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(demoTable),
			Key: map[string]types.AttributeValue{
				"UserName":  &types.AttributeValueMemberS{Value: user},
				"SessionId": &types.AttributeValueMemberS{Value: session},
			},
		}); err != nil {
			return fmt.Errorf("delete %s/%s: %w", user, session, err)
		}
		deletes.Add(1)
		archived, _, _ := countArchive(archiveDir)
		out.printf("wrote    4 sessions expiring in 1-4s, and %s/%s deleted by the user (archive holds %d expired so far)\n",
			user, session, archived)
		wave++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// countArchive counts distinct expired and deleted events in the archive.
func countArchive(dir string) (expired, deleted int, err error) {
	kinds, err := readArchiveDir(dir)
	if err != nil {
		return 0, 0, err
	}
	return len(kinds["expired"]), len(kinds["deleted"]), nil
}

func counterValue(reg interface {
	Gather() ([]*dto.MetricFamily, error)
}, name string, labels map[string]string) float64 {
	fams, err := reg.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// percentile returns the q-quantile (nearest rank) of d; 0 when empty.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

func printSummary(w io.Writer, s *demoSummary) {
	fmt.Fprintf(w, "\nsummary\n")
	pending := ""
	if n := s.ExpiringWritten - s.Published; n > 0 {
		pending = fmt.Sprintf(" (%d not yet expired when stopped)", n)
	}
	fmt.Fprintf(w, "  sessions written:     %d expiring, %d deleted by users%s\n", s.ExpiringWritten, s.UserDeletes, pending)
	fmt.Fprintf(w, "  expired archived:     %d\n", s.Archived)
	fmt.Fprintf(w, "  published on NATS:    %d\n", s.Published)
	fmt.Fprintf(w, "  user deletes seen:    %d (not archived: %d in the archive)\n", s.DeletesSeen, s.DeletesArchived)
	fmt.Fprintf(w, "  TTL lag p50/max:      %s / %s (deletion time - ExpirationTime)\n",
		s.LagP50.Round(time.Millisecond), s.LagMax.Round(time.Millisecond))
	fmt.Fprintf(w, "  on NATS p50/max:      %s / %s after ExpirationTime\n",
		s.NATSP50.Round(time.Millisecond), s.NATSMax.Round(time.Millisecond))
	if s.BySweeper > 0 {
		fmt.Fprintf(w, "  deleted by:           %d archiver sweep, %d the engine's TTL (which runs up to %s late here)\n",
			s.BySweeper, s.ByTTL, demoSlowTTL)
	}
	fmt.Fprintf(w, "  archive folder:       %s\n", s.ArchiveDir)
}

// startDemoSweeper runs `archiver sweep` on the demo table until ctx ends
// (with --precise; otherwise nothing). The returned channel gives its
// outcome once it stopped.
func startDemoSweeper(ctx context.Context, o demoOptions, ddb *dynamodb.Client) (<-chan error, error) {
	done := make(chan error, 1)
	if !o.Precise {
		done <- nil
		return done, nil
	}
	sw, err := sweep.New(sweep.Config{Client: ddb, Table: demoTable, Cursor: &sweep.MemoryCursor{}, Logger: o.Log.Named("sweep")})
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
