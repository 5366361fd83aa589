package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

const (
	benchClients   = 16
	benchPhase     = 4 * time.Second
	benchSweepSize = 1_000_000
	benchPayload   = 100 // bytes of payload per item
)

// runEngineBench measures the engine through the AWS SDK over loopback
// HTTP: PutItem, GetItem and Query rates at 16 concurrent clients, the
// GetRecords drain rate, the time to sweep one million expired items from
// a table with a GSI and stream their REMOVE records, and resident memory.
// Where moto or dynalite can be started, the same PutItem load runs against
// them and the ratio is printed.
func runEngineBench(ctx context.Context, w io.Writer) error {
	clock := engine.NewManualClock(time.Now())
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, Clock: clock})
	if err != nil {
		return err
	}
	defer srv.Close()
	db, st := benchClients2(srv.Endpoint())

	if err := createBenchTable(ctx, db, "bench", true, false); err != nil {
		return err
	}
	var rows [][3]string
	row := func(name, value, note string) {
		rows = append(rows, [3]string{name, value, note})
		fmt.Fprintf(w, "  %-34s %14s  %s\n", name, value, note)
	}
	fmt.Fprintf(w, "engine (GOMAXPROCS=%d, %d clients, %v per phase, load average %s)\n", runtime.GOMAXPROCS(0), benchClients, benchPhase, loadAvg())
	if err := runServerCPUBench(ctx, w); err != nil {
		return fmt.Errorf("server CPU: %w", err)
	}

	cpu0 := cpuSeconds()
	putRate, written, err := putLoad(ctx, db, "bench", benchPhase)
	if err != nil {
		return fmt.Errorf("PutItem load: %w", err)
	}
	cpuPerOp := (cpuSeconds() - cpu0) / (putRate * benchPhase.Seconds()) * 1e6
	row("PutItem (SDK)", fmt.Sprintf("%.0f ops/s", putRate), fmt.Sprintf("target >= 15000; %.0f us CPU per op, SDK client included", cpuPerOp))
	rawRate, err := rawPutLoad(ctx, srv.Endpoint(), "bench", benchPhase)
	if err != nil {
		return fmt.Errorf("raw PutItem load: %w", err)
	}
	row("PutItem (plain HTTP client)", fmt.Sprintf("%.0f ops/s", rawRate), "the server without the SDK's client-side cost")
	ceiling, err := sdkCeiling(ctx)
	if err != nil {
		return fmt.Errorf("SDK ceiling: %w", err)
	}
	row("PutItem (SDK) vs a do-nothing server", fmt.Sprintf("%.0f ops/s", ceiling), fmt.Sprintf("the SDK's own ceiling here; engine at %.0f%% of it", 100*putRate/ceiling))

	getRate, err := runClients(ctx, benchPhase, func(c, i int, r *rand.Rand) error {
		k := r.IntN(int(written))
		_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("bench"), Key: benchKey(k)})
		return err
	})
	if err != nil {
		return fmt.Errorf("GetItem load: %w", err)
	}
	row("GetItem", fmt.Sprintf("%.0f ops/s", getRate), "")

	qRate, err := runClients(ctx, benchPhase, func(c, i int, r *rand.Rand) error {
		_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("bench"), Limit: aws.Int32(10),
			KeyConditionExpression:    aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: benchPartition(r.IntN(1000))}}})
		return err
	})
	if err != nil {
		return fmt.Errorf("Query load: %w", err)
	}
	row("Query (Limit 10)", fmt.Sprintf("%.0f ops/s", qRate), "")

	drained, drainDur, err := drainStream(ctx, db, st, "bench", int(written), stypes.OperationTypeInsert)
	if err != nil {
		return fmt.Errorf("GetRecords drain: %w", err)
	}
	row("GetRecords drain", fmt.Sprintf("%.0f rec/s", float64(drained)/drainDur.Seconds()), fmt.Sprintf("%d records", drained))

	if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("bench")}); err != nil {
		return err
	}
	// One million expired items on a table with a GSI.
	if err := createBenchTable(ctx, db, "sweep", false, true); err != nil {
		return err
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("sweep"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
		return err
	}
	rssBase := rssKiB()
	loadStart := time.Now()
	if err := loadExpired(ctx, srv.Endpoint(), "sweep", benchSweepSize, clock.Now().Unix()+60); err != nil {
		return fmt.Errorf("loading %d items: %w", benchSweepSize, err)
	}
	loadDur := time.Since(loadStart)
	row("BatchWriteItem load (plain HTTP)", fmt.Sprintf("%.0f items/s", benchSweepSize/loadDur.Seconds()), fmt.Sprintf("%d items in %.1fs", benchSweepSize, loadDur.Seconds()))
	rssLoaded := rssKiB()
	row("RSS with 1M items + GSI", fmt.Sprintf("%d MiB", rssLoaded/1024), fmt.Sprintf("(%d MiB before load) target < 1024", rssBase/1024))
	// The stream starts after the load so that it holds only the REMOVEs.
	if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("sweep"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}}); err != nil {
		return err
	}
	clock.Advance(2 * time.Minute)
	// Every deletion is appended to the stream inside the sweep, so when
	// SweepTTL returns the stream holds every REMOVE record.
	start := time.Now()
	cpuStart := cpuSeconds()
	swept, err := srv.Engine().SweepTTL(ctx)
	if err != nil {
		return err
	}
	sweepDur := time.Since(start)
	row("TTL sweep of 1M (table + GSI)", fmt.Sprintf("%.2f s", sweepDur.Seconds()),
		fmt.Sprintf("%d deleted and streamed, %.1f s CPU, target <= 15 s", swept, cpuSeconds()-cpuStart))
	n, drainDur, err := drainStream(ctx, db, st, "sweep", benchSweepSize, stypes.OperationTypeRemove)
	if err != nil {
		return fmt.Errorf("draining the sweep's stream: %w", err)
	}
	row("GetRecords drain of the sweep", fmt.Sprintf("%.0f rec/s", float64(n)/drainDur.Seconds()), fmt.Sprintf("%d REMOVE records via the SDK in %.1f s", n, drainDur.Seconds()))
	row("RSS after sweep", fmt.Sprintf("%d MiB", rssKiB()/1024), "table empty, stream holds 1M REMOVE records")
	row("peak RSS (VmHWM)", fmt.Sprintf("%d MiB", hwmKiB()/1024), "whole bench process: SDK clients, GC headroom, items, stream")

	// Baselines: the same PutItem load against other local servers.
	for _, b := range []struct {
		name  string
		start func(port int) (*exec.Cmd, error)
	}{
		{"moto", startMoto},
		{"dynalite", startDynalite},
	} {
		rate, err := baselinePut(ctx, b.start)
		if err != nil {
			row(b.name+" PutItem", "n/a", err.Error())
			continue
		}
		row(b.name+" PutItem", fmt.Sprintf("%.0f ops/s", rate), fmt.Sprintf("engine is %.1fx", putRate/rate))
	}
	fmt.Fprintf(w, "  (load average at the end: %s)\n", loadAvg())
	return nil
}

func benchClients2(endpoint string) (*dynamodb.Client, *dynamodbstreams.Client) {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 256
	})
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", ""), HTTPClient: hc}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	st := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(endpoint) })
	return db, st
}

func createBenchTable(ctx context.Context, db *dynamodb.Client, name string, withStream, withGSI bool) error {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN}},
	}
	if withStream {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	}
	if withGSI {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{IndexName: aws.String("by-g"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}
	}
	_, err := db.CreateTable(ctx, in)
	return err
}

func benchPartition(i int) string { return "p" + strconv.Itoa(i%1000) }

func benchKey(k int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: benchPartition(k)},
		"sk": &types.AttributeValueMemberN{Value: strconv.Itoa(k)},
	}
}

var payload = strings.Repeat("x", benchPayload)

func benchItem(k int) map[string]types.AttributeValue {
	it := benchKey(k)
	it["data"] = &types.AttributeValueMemberS{Value: payload}
	it["n"] = &types.AttributeValueMemberN{Value: strconv.Itoa(k * 7)}
	return it
}

// runClients runs fn from benchClients goroutines for d and returns calls/s.
func runClients(ctx context.Context, d time.Duration, fn func(client, i int, r *rand.Rand) error) (float64, error) {
	var ops atomic.Int64
	var firstErr error
	var once sync.Once
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < benchClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 42))
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil; i++ {
				if err := fn(c, i, r); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				ops.Add(1)
			}
		}(c)
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(ops.Load()) / time.Since(start).Seconds(), nil
}

// putLoad writes items with keys 0, 1, 2, ... and returns the rate and how
// many were written (keys 0..n-1 all exist).
func putLoad(ctx context.Context, db *dynamodb.Client, table string, d time.Duration) (float64, int64, error) {
	var next atomic.Int64
	rate, err := runClients(ctx, d, func(c, i int, r *rand.Rand) error {
		k := int(next.Add(1) - 1)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: benchItem(k)})
		return err
	})
	// Keys handed out but not written (the last call of each client may
	// have been cut short by an error) are not counted.
	return rate, next.Load() - benchClients, err
}

// loadExpired writes n items whose TTL is exp with BatchWriteItem over
// plain HTTP (the SDK's own cost is measured by the PutItem phase; here it
// would only make the bench slower).
func loadExpired(ctx context.Context, endpoint, table string, n int, exp int64) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchClients)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for c := 0; c < benchClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b []byte
			for {
				base := int(next.Add(25) - 25)
				if base >= n || ctx.Err() != nil {
					return
				}
				b = append(b[:0], `{"RequestItems":{"`...)
				b = append(b, table...)
				b = append(b, `":[`...)
				for k := base; k < base+25 && k < n; k++ {
					if k > base {
						b = append(b, ',')
					}
					b = fmt.Appendf(b, `{"PutRequest":{"Item":{"pk":{"S":"%s"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"},"g":{"S":"g%d"},"exp":{"N":"%d"}}}}`,
						benchPartition(k), k, payload, k*7, k%100, exp)
				}
				b = append(b, "]}}"...)
				if err := rawPost(ctx, hc, endpoint, "BatchWriteItem", b); err != nil {
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

// rawPost sends one unsigned DynamoDB request (the engine accepts any
// credentials, including none) and fails on a non-200 answer.
func rawPost(ctx context.Context, hc *http.Client, endpoint, op string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d %s", op, resp.StatusCode, msg)
	}
	return nil
}

// rawPutLoad measures PutItem over plain HTTP: the server's capacity
// without the SDK's client-side cost.
func rawPutLoad(ctx context.Context, endpoint, table string, d time.Duration) (float64, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return runClients(ctx, d, func(c, i int, r *rand.Rand) error {
		k := 10_000_000 + c*1_000_000 + i
		body := fmt.Appendf(nil, `{"TableName":"%s","Item":{"pk":{"S":"%s"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"}}}`, table, benchPartition(k), k, payload, k*7)
		return rawPost(ctx, hc, endpoint, "PutItem", body)
	})
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// drainStream reads the table's latest stream from TRIM_HORIZON, every
// shard in parallel and children as they appear, until want records of the
// given kind were read; it returns the count and the time taken.
func drainStream(ctx context.Context, db *dynamodb.Client, st *dynamodbstreams.Client, table string, want int, kind stypes.OperationType) (int, time.Duration, error) {
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return 0, 0, err
	}
	arn := d.Table.LatestStreamArn
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	var got atomic.Int64
	started := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	readShard := func(id *string) {
		defer wg.Done()
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: id, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			mu.Lock()
			firstErr = err
			mu.Unlock()
			return
		}
		iter := it.ShardIterator
		for iter != nil && ctx.Err() == nil && int(got.Load()) < want {
			out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
			if err != nil {
				if ctx.Err() == nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
				return
			}
			n := 0
			for _, r := range out.Records {
				if r.EventName == kind {
					n++
				}
			}
			got.Add(int64(n))
			if len(out.Records) == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			iter = out.NextShardIterator
		}
	}
	for int(got.Load()) < want {
		if err := ctx.Err(); err != nil {
			return int(got.Load()), time.Since(start), fmt.Errorf("read %d of %d records: %w", got.Load(), want, err)
		}
		mu.Lock()
		e := firstErr
		mu.Unlock()
		if e != nil {
			return int(got.Load()), time.Since(start), e
		}
		ds, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
		if err != nil {
			return 0, 0, err
		}
		for _, s := range ds.StreamDescription.Shards {
			id := aws.ToString(s.ShardId)
			if !started[id] {
				started[id] = true
				wg.Add(1)
				go readShard(s.ShardId)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	dur := time.Since(start)
	cancel()
	wg.Wait()
	return int(got.Load()), dur, nil
}

// procStatusKiB reads a field of this process's /proc status after a
// collection that hands freed memory back to the OS.
func procStatusKiB(field string) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return max(procKiB(os.Getpid(), field), 0)
}

func rssKiB() int64 { return procStatusKiB("VmRSS") }
func hwmKiB() int64 { return procStatusKiB("VmHWM") }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startMoto(port int) (*exec.Cmd, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, errors.New("python3 not installed")
	}
	if err := exec.Command(py, "-c", "import moto.server").Run(); err != nil {
		return nil, errors.New("moto not installed")
	}
	return exec.Command(py, "-m", "moto.server", "-H", "127.0.0.1", "-p", strconv.Itoa(port)), nil
}

// sdkCeiling runs the PutItem load through the same SDK client settings
// against a net/http server that reads each request and answers "{}" with
// no work at all: the most any Go HTTP server can reach with this client on
// this machine, since client and server share its cores.
func sdkCeiling(ctx context.Context) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Write([]byte("{}"))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	db, _ := benchClients2("http://" + ln.Addr().String())
	rate, _, err := putLoad(ctx, db, "bench", benchPhase)
	return rate, err
}

// npmDir is where the bench installs an npm package it runs (dynalite,
// Dynoxide) when it is not installed already, so that later runs reuse it.
func npmDir(name string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "ttl-archiver-bench", name)
}

// npmInstalled returns the path of file (relative to node_modules) in the
// bench's own install of pkg, installing pkg with npm first when the file
// is missing. It returns "" when npm is missing or the install failed: the
// caller then looks elsewhere or reports the baseline as not installed.
func npmInstalled(dir, pkg, file string) string {
	path := filepath.Join(npmDir(dir), "node_modules", file)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if exec.CommandContext(ctx, npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", npmDir(dir), pkg).Run() != nil {
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

func startDynalite(port int) (*exec.Cmd, error) {
	bin := npmInstalled("dynalite", "dynalite", ".bin/dynalite")
	for _, p := range []string{"node_modules/.bin/dynalite", filepath.Join(os.Getenv("HOME"), "node_modules/.bin/dynalite")} {
		if _, err := os.Stat(p); bin == "" && err == nil {
			bin = p
		}
	}
	if bin == "" {
		if p, err := exec.LookPath("dynalite"); err == nil {
			bin = p
		}
	}
	if bin == "" {
		return nil, errors.New("dynalite not installed and npm could not install it")
	}
	return exec.Command(bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port)), nil
}

// startDynoxide runs Dynoxide (a DynamoDB Local replacement in Rust, on
// SQLite) in memory. Its binary ships inside the npm package
// @dynoxide/linux-x64, which the bench installs when missing.
func startDynoxide(port int) (*exec.Cmd, error) {
	bin := npmInstalled("dynoxide", "@dynoxide/linux-x64", "@dynoxide/linux-x64/dynoxide")
	if bin == "" {
		p, err := exec.LookPath("dynoxide")
		if err != nil {
			return nil, errors.New("dynoxide not installed and npm could not install @dynoxide/linux-x64")
		}
		bin = p
	}
	return exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port)), nil
}

// baselinePut starts another local DynamoDB on a free loopback port and
// measures the same PutItem load against it.
func baselinePut(ctx context.Context, start func(port int) (*exec.Cmd, error)) (float64, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	cmd, err := start(port)
	if err != nil {
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start: %w", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	db, _ := benchClients2(endpoint)
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := db.ListTables(cctx, &dynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("did not come up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := createBenchTable(ctx, db, "bench", false, false); err != nil {
		return 0, err
	}
	// dynalite creates tables asynchronously, as DynamoDB does.
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("bench")}, 30*time.Second); err != nil {
		return 0, fmt.Errorf("waiting for the table: %w", err)
	}
	rate, _, err := putLoad(ctx, db, "bench", benchPhase)
	return rate, err
}
