package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	"github.com/ttl-archiver/archiver/internal/ops"
	"github.com/ttl-archiver/archiver/sweep"
)

// The swept table of these tests: key pk, TTL on ttl, the recipe's index.
const (
	sweptTable  = "Expiring"
	sweptWindow = time.Second
)

func createSweptTable(t *testing.T, c *dynamodb.Client) {
	t.Helper()
	enginetest.CreateTable(t, c, enginetest.Table{Name: sweptTable, NoStream: true, TTL: "ttl",
		Attributes: []types.AttributeDefinition{
			{AttributeName: aws.String("ttl"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String(sweep.DefaultWindowAttribute), AttributeType: types.ScalarAttributeTypeS},
		},
		Indexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(sweep.DefaultIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(sweep.DefaultWindowAttribute), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("ttl"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
}

// putDue writes an item expiring at ttl (epoch seconds with milliseconds)
// in the window the writers of the recipe give it.
func putDue(ctx context.Context, c *dynamodb.Client, pk string, ttl time.Time) error {
	ms := ttl.UnixMilli()
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(sweptTable),
		Item: map[string]types.AttributeValue{
			"pk":                         &types.AttributeValueMemberS{Value: pk},
			"ttl":                        &types.AttributeValueMemberN{Value: fmt.Sprintf("%d.%03d", ms/1000, ms%1000)},
			sweep.DefaultWindowAttribute: &types.AttributeValueMemberS{Value: sweep.Window(ttl, sweptWindow, 1)},
		},
	})
	return err
}

// overdue returns the items whose TTL lies before the cutoff.
func overdue(t *testing.T, c *dynamodb.Client, cutoff time.Time) []string {
	t.Helper()
	var out []string
	p := dynamodb.NewScanPaginator(c, &dynamodb.ScanInput{TableName: aws.String(sweptTable), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			n, _ := it["ttl"].(*types.AttributeValueMemberN)
			f, err := strconv.ParseFloat(n.Value, 64)
			if err == nil && f < float64(cutoff.UnixMilli())/1000 {
				out = append(out, it["pk"].(*types.AttributeValueMemberS).Value)
			}
		}
	}
	return out
}

// writer writes items expiring within the next 1.5 s until stopped, so
// some item is always coming due.
type writer struct {
	stop func()
	done chan struct{}
	n    atomic.Int64
}

func startWriter(t *testing.T, c *dynamodb.Client) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			ttl := time.Now().Add(time.Duration(i%15) * 100 * time.Millisecond)
			if err := putDue(ctx, c, fmt.Sprintf("w%06d", i), ttl); err != nil && ctx.Err() == nil {
				t.Errorf("writer: %v", err)
				return
			}
			w.n.Add(1)
			time.Sleep(30 * time.Millisecond)
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *writer) halt() { w.stop(); <-w.done }

// overdueSlack and overdueWithin are what waitNoneOverdue allows while a
// writer keeps adding items: these tests hold the sweeper to deleting
// what comes due, not to its precision (a timing, which make bench's
// sweep section measures); on a loaded machine with -race a sweep round
// can lag several seconds behind. Once the writer stopped, nothing may
// stay overdue by more than a second (the sweeper has caught up), given
// overdueWithin.
const (
	overdueSlack  = 10 * time.Second
	overdueWithin = 2 * time.Minute
)

// waitNoneOverdue waits until no item's TTL lies more than slack in the
// past, or fails naming what is left behind.
func waitNoneOverdue(t *testing.T, c *dynamodb.Client, slack, within time.Duration) {
	t.Helper()
	var left []string
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if left = overdue(t, c, time.Now().Add(-slack)); len(left) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%d items left behind more than %v after their TTL (within %v), e.g. %v", len(left), slack, within, left[:min(5, len(left))])
}

// inProcSweeper is `archiver sweep` run in this process.
type inProcSweeper struct {
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
	addr   string
}

func startInProcSweeper(t *testing.T, endpoint, worker string) *inProcSweeper {
	return startInProcSweeperAt(t, endpoint, worker, "dynamodb://leases?create=true")
}

func startInProcSweeperAt(t *testing.T, endpoint, worker, checkpointURL string) *inProcSweeper {
	t.Helper()
	cfg, err := loadSweepConfig([]string{"--endpoint", endpoint, "--table", sweptTable, "--window", sweptWindow.String(),
		"--interval", "100ms", "--checkpoint", checkpointURL, "--worker-id", worker,
		"--lease-duration", "3s", "--lease-renew", "500ms", "--shutdown-timeout", "10s", "--metrics-addr", "127.0.0.1:0",
	}, envMap(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcSweeper{cancel: cancel, done: make(chan error, 1), reg: ops.NewRegistry("test")}
	addr := make(chan string, 1)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(worker)
	go func() {
		p.done <- runSweep(ctx, cfg, sweepDeps{log: log, reg: p.reg, stdout: io.Discard, newSweeper: newTableSweeper,
			ready: func(a string) { addr <- a }})
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	select {
	case p.addr = <-addr:
	case err := <-p.done:
		t.Fatalf("sweeper %s ended: %v", worker, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("sweeper %s: health server did not start", worker)
	}
	return p
}

// holding reads archiver_sweep_lease_held.
func (p *inProcSweeper) holding(t *testing.T) bool {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "archiver_sweep_lease_held" {
			return mf.GetMetric()[0].GetGauge().GetValue() == 1
		}
	}
	t.Fatal("archiver_sweep_lease_held not registered")
	return false
}

// stop is SIGTERM: it waits for a clean return.
func (p *inProcSweeper) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("sweeper stopped with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("sweeper did not stop within its shutdown timeout")
	}
}

// TestSweepInProcess: two sweepers of one table, in this process: one
// sweeps, the other waits and is ready (/readyz, archiver health); the
// sweeper deletes what comes due; stopping it hands the table over and
// nothing is left behind.
func TestSweepInProcess(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1})
	srv := bed.Server
	ddb := bed.DynamoDB
	createSweptTable(t, ddb)
	past := time.Now().Add(-30 * time.Second)
	for i := range 50 {
		if err := putDue(t.Context(), ddb, fmt.Sprintf("p%03d", i), past.Add(time.Duration(i)*500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	a := startInProcSweeper(t, srv.Endpoint(), "a")
	b := startInProcSweeper(t, srv.Endpoint(), "b")
	w := startWriter(t, ddb)
	waitNoneOverdue(t, ddb, overdueSlack, overdueWithin)
	holder, standby := a, b
	if b.holding(t) {
		holder, standby = b, a
	}
	if !holder.holding(t) || standby.holding(t) {
		t.Fatalf("holding: a %v, b %v; want exactly one", a.holding(t), b.holding(t))
	}
	for _, p := range []*inProcSweeper{holder, standby} {
		resp, err := http.Get("http://" + p.addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `archiver_sweep_lease_held{table="Expiring"}`) {
			t.Errorf("/metrics lacks the lease gauge:\n%.2000s", body)
		}
		code := dispatch(t.Context(), []string{"health", "--quiet", "--addr", p.addr}, env{stdout: io.Discard, stderr: io.Discard, getenv: envMap(nil)})
		if code != 0 {
			t.Errorf("archiver health against %s = %d, want 0 (holder and stand-by are ready)", p.addr, code)
		}
	}
	stopped := time.Now()
	holder.stop(t)
	eventually.True(t, 10*time.Second, "the stand-by sweeps", func() bool { return standby.holding(t) })
	t.Logf("hand-over on stop: %v", time.Since(stopped))
	time.Sleep(2 * time.Second)
	w.halt()
	waitNoneOverdue(t, ddb, time.Second, overdueWithin)
	t.Logf("%d items written while sweeping", w.n.Load())
	standby.stop(t)
}

// TestSweepFileStore: with a file:// store the one process sweeps at once,
// and its cursor is in the file after a stop.
func TestSweepFileStore(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1})
	srv := bed.Server
	ddb := bed.DynamoDB
	createSweptTable(t, ddb)
	path := filepath.Join(t.TempDir(), "cursor.json")
	p := startInProcSweeperAt(t, srv.Endpoint(), "a", "file://"+path)
	w := startWriter(t, ddb)
	time.Sleep(2 * time.Second)
	w.halt()
	waitNoneOverdue(t, ddb, time.Second, overdueWithin)
	if !p.holding(t) {
		t.Error("the only sweeper of a file store does not hold the table")
	}
	p.stop(t)
	fs, err := checkpoint.OpenFile(path)
	if err != nil {
		t.Fatalf("open the file after the stop (lock released): %v", err)
	}
	defer fs.Close()
	c, err := fs.SweepCursor(t.Context(), sweptTable)
	if err != nil || c.IsZero() || time.Since(c) > time.Minute {
		t.Fatalf("cursor in the file: %v, %v; want a recent window", c, err)
	}
}

// sweepOps records, per process (access key), when the engine received
// the sweeper's own calls (Query and DeleteItem on the swept table; the
// lease store makes neither in `archiver sweep`).
type sweepOps struct {
	mu  sync.Mutex
	ops []sweepOp
}

type sweepOp struct {
	at  time.Time
	key string
}

func (s *sweepOps) hook(op string, r *http.Request) error {
	if op != "Query" && op != "DeleteItem" {
		return nil
	}
	if k := sigV4Key(r); strings.HasPrefix(k, "proc-") {
		s.mu.Lock()
		s.ops = append(s.ops, sweepOp{time.Now(), k})
		s.mu.Unlock()
	}
	return nil
}

// sigV4Key is the access key that signed r.
func sigV4Key(r *http.Request) string {
	a := r.Header.Get("Authorization")
	_, a, ok := strings.Cut(a, "Credential=")
	if !ok {
		return ""
	}
	k, _, _ := strings.Cut(a, "/")
	return k
}

// runs compresses the calls into runs of one process each, in order.
func (s *sweepOps) runs() []sweepRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sweepRun
	for _, o := range s.ops {
		if n := len(out); n > 0 && out[n-1].key == o.key {
			out[n-1].last, out[n-1].calls = o.at, out[n-1].calls+1
			continue
		}
		out = append(out, sweepRun{key: o.key, first: o.at, last: o.at, calls: 1})
	}
	return out
}

type sweepRun struct {
	key         string
	first, last time.Time
	calls       int
}

func (r sweepRun) String() string {
	return fmt.Sprintf("%s: %d calls %s..%s", r.key, r.calls, r.first.Format("15:04:05.000"), r.last.Format("15:04:05.000"))
}

// sweepProc is `archiver sweep` as a subprocess signing as proc-NAME.
type sweepProc struct {
	name   string
	cmd    *exec.Cmd
	exited chan error
	out    *syncBuffer
}

func startSweepProc(t *testing.T, endpoint, name string) *sweepProc {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "sweep", "--endpoint", endpoint, "--table", sweptTable,
		"--window", sweptWindow.String(), "--interval", "100ms", "--checkpoint", "dynamodb://leases?create=true",
		"--worker-id", name, "--lease-duration", "3s", "--lease-renew", "500ms", "--shutdown-timeout", "10s",
		"--metrics-addr", "127.0.0.1:0")
	cmd.Env = []string{"ARCHIVER_TEST_MAIN=1", "HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"AWS_ACCESS_KEY_ID=proc-" + name, "AWS_SECRET_ACCESS_KEY=secret",
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}
	p := &sweepProc{name: name, cmd: cmd, exited: make(chan error, 1), out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("archiver sweep %s output:\n%s", name, p.out)
		}
	})
	return p
}

// terminate sends SIGTERM and waits for exit 0.
func (p *sweepProc) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("archiver sweep %s exited with %v after SIGTERM, want 0", p.name, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("archiver sweep %s still running 20s after SIGTERM", p.name)
	}
}

// TestSweepProcesses runs `archiver sweep` as real processes on one table
// with the DynamoDB lease store while items keep coming due: two processes
// never sweep at once (checked on every call the engine received); SIGTERM
// hands the table over at once; a sweeper killed with SIGKILL and left down
// for several windows, then replaced, leaves nothing behind.
func TestSweepProcesses(t *testing.T) {
	rec := &sweepOps{}
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1, Hooks: engine.Hooks{OnRequest: rec.hook}})
	srv := bed.Server
	ddb := bed.DynamoDB
	createSweptTable(t, ddb)
	w := startWriter(t, ddb)
	procs := map[string]*sweepProc{"proc-a": startSweepProc(t, srv.Endpoint(), "a"), "proc-b": startSweepProc(t, srv.Endpoint(), "b")}
	eventually.True(t, 60*time.Second, "a sweeper sweeping", func() bool { return len(rec.runs()) > 0 })
	time.Sleep(3 * time.Second)
	runs := rec.runs()
	if len(runs) != 1 {
		t.Fatalf("with two sweepers running, calls came from %v; want one process", runs)
	}
	first := procs[runs[0].key]
	second := procs["proc-a"]
	if first == second {
		second = procs["proc-b"]
	}

	// SIGTERM: the other process takes over promptly.
	termAt := time.Now()
	first.terminate(t)
	eventually.True(t, 15*time.Second, "the stand-by sweeping", func() bool { return len(rec.runs()) > 1 })
	runs = rec.runs()
	t.Logf("hand-over after SIGTERM: %v", runs[1].first.Sub(termAt))
	if len(runs) != 2 || runs[1].key != "proc-"+second.name {
		t.Fatalf("after SIGTERM calls came from %v; want the stand-by after the first", runs)
	}

	// SIGKILL, down for several windows, then a new process.
	time.Sleep(time.Second)
	if err := second.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-second.exited
	killedAt := time.Now()
	time.Sleep(5 * sweptWindow)
	if got := rec.runs(); len(got) != 2 || got[1].last.After(killedAt) {
		t.Fatalf("calls after the kill, with no sweeper running: %v", got)
	}
	c := startSweepProc(t, srv.Endpoint(), "c")
	eventually.True(t, 30*time.Second, "the new sweeper sweeping", func() bool { return len(rec.runs()) > 2 })
	time.Sleep(time.Second)
	w.halt()
	waitNoneOverdue(t, ddb, time.Second, overdueWithin)
	runs = rec.runs()
	t.Logf("sweeping runs: %v; %d items written", runs, w.n.Load())
	if len(runs) != 3 || runs[2].key != "proc-c" {
		t.Fatalf("calls came from %v; want a, b's sweeper, then c", runs)
	}
	c.terminate(t)
	if r := rec.runs(); len(r) != 3 {
		t.Fatalf("calls after every sweeper stopped: %v", r)
	}
	out, err := ddb.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("leases"),
		Key: map[string]types.AttributeValue{"stream_arn": &types.AttributeValueMemberS{Value: "sweep#" + sweptTable},
			"shard_id": &types.AttributeValueMemberS{Value: "cursor"}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, owned := out.Item["lease_owner"]; owned || out.Item["sweep_cursor_ms"] == nil {
		t.Errorf("sweeper item after the last SIGTERM: %v; want no owner and a cursor", out.Item)
	}
}
