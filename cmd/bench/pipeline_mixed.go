package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/nats-io/nats.go"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/engine"
)

// plMixed is what the second view needs of the pipeline bench's setup.
type plMixed struct {
	bin, work  string
	eng        *engine.Server
	ddb        *dynamodb.Client
	nc         *nats.Conn
	natsURL    string
	s3Endpoint string
	s3Dir      string // the bucket's folder in versitygw's posix backend
	sz         plSizes
}

const plMixedTable = "BenchMixed"

// plMixedBench is the second view: a table whose stream was on while it
// was loaded, so it holds an INSERT and an expiry per item (60,000 expiries
// = 120,000 records at the default size). A fresh archiver archives the
// expiries to JetStream and S3; its CPU per stream record is set against a
// plain aws-sdk-go-v2 drain of the same stream.
func plMixedBench(ctx context.Context, w io.Writer, m plMixed) error {
	n := max(m.sz.items*3/10, 100)
	if err := plCreateStreamTable(ctx, m.ddb, plMixedTable); err != nil {
		return err
	}
	hourAgo := time.Now().Add(-time.Hour).Unix()
	if err := plPutItems(ctx, m.ddb, plMixedTable, 0, n, m.sz.itemBytes, func(int) int64 { return hourAgo }); err != nil {
		return err
	}
	lat := plNewLatencies(nil)
	sub, err := m.nc.Subscribe("bench2.>", func(msg *nats.Msg) {
		if id, created, ok := plLineTimes(msg.Data); ok {
			lat.add(id, time.Since(created), time.Now())
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	if swept, err := m.eng.Engine().SweepTTL(ctx); err != nil || swept != n {
		return fmt.Errorf("mixed sweep: deleted %d items (want %d): %v", swept, n, err)
	}
	metricsAddr, err := benchkit.FreeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, "run", "--endpoint", m.eng.Endpoint(), "--table", plMixedTable,
		"--checkpoint", "file://"+m.work+"/checkpoints-mixed.json", "--metrics-addr", metricsAddr, "--log-level", "warn",
		"--max-in-flight-bytes", fmt.Sprintf("%dMiB", plBudgetMiB),
		"--sink", m.natsURL+"?subject=bench2.{table}.{kind}&create-stream=BENCH2",
		"--sink", "s3://"+benchkit.Bucket+"/archive2?endpoint="+m.s3Endpoint+"&path-style=true&region=us-east-1&flush-interval=1s")
	cmd.Env = benchkit.ArchiverEnv()
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	scan := &plS3Scanner{dir: m.s3Dir + "/archive2", seen: map[string]bool{}, lat: plNewLatencies(nil)}
	if err := plWaitArrivals(ctx, exited, &logs, scan, 100*time.Millisecond,
		func() bool { return lat.count() >= n && scan.lat.count() >= n },
		func() string { return fmt.Sprintf("%d on NATS, %d in S3 of %d", lat.count(), scan.lat.count(), n) }); err != nil {
		return fmt.Errorf("mixed: %w", err)
	}
	cpu, _ := benchkit.ProcCPU(cmd.Process.Pid)
	drain, err := runFloor(ctx, floorSpec{Mode: "drain", Endpoint: m.eng.Endpoint(), Table: plMixedTable})
	if err != nil {
		return err
	}
	a := cpu.Seconds() * 1e6 / float64(2*n)
	d := drain.Decode.Seconds() * 1e6 / float64(max(drain.Records, 1))
	fmt.Fprintf(w, "  second view: archiver %.1f µs of CPU per stream record (%s for %d INSERTs + %d expiries, to JetStream and S3)\n",
		a, cpu.Round(time.Millisecond), n, n)
	fmt.Fprintf(w, "    vs a plain aws-sdk-go-v2 drain of the same stream %.1f µs/record (%d records): %.2fx (at the floor target about 0.5x)\n",
		d, drain.Records, a/d)
	return nil
}

// plCreateStreamTable creates a table with its stream on from the start
// and TTL on ExpirationTime.
func plCreateStreamTable(ctx context.Context, ddb *dynamodb.Client, table string) error {
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
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true),
			StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	_, err = ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("ExpirationTime"), Enabled: aws.Bool(true)}})
	return err
}
