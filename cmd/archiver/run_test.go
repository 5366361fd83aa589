package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/demo"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/lease"
)

// lastSequences reads every shard of the stream to its current end and
// returns each shard's last sequence number (shards without records are
// left out).
func lastSequences(t *testing.T, ctx context.Context, c *dynamodbstreams.Client, arn string) map[string]string {
	t.Helper()
	out := map[string]string{}
	desc, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range desc.StreamDescription.Shards {
		it, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			r, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range r.Records {
				out[aws.ToString(sh.ShardId)] = aws.ToString(rec.Dynamodb.SequenceNumber)
			}
			if len(r.Records) == 0 {
				break
			}
			iter = r.NextShardIterator
		}
	}
	return out
}

// assertLeasesReleased checks that no shard item of the lease table still
// names an owner: a stopping worker hands its leases back at once.
func assertLeasesReleased(t *testing.T, ctx context.Context, ddb *dynamodb.Client, table string) {
	t.Helper()
	out, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	shards := 0
	for _, it := range out.Items {
		arn := it["stream_arn"].(*ddbtypes.AttributeValueMemberS).Value
		if strings.HasPrefix(arn, "workers#") {
			continue
		}
		shards++
		if o, ok := it["lease_owner"]; ok {
			t.Errorf("shard %v still leased by %v after SIGTERM", it["shard_id"], o)
		}
	}
	if shards == 0 {
		t.Fatal("lease table holds no shard items")
	}
}

// TestRunSIGTERM runs the real command as a subprocess against an
// in-process engine, lets it archive expired items into a file sink, sends
// SIGTERM and checks that it exits 0 within --shutdown-timeout with every
// item archived, every shard's final checkpoint at its last record and (with
// the DynamoDB store) every lease released. No
// AWS credentials are configured: the loopback endpoint gets placeholders.
func TestRunSIGTERM(t *testing.T) {
	for _, store := range []string{"file", "dynamodb"} {
		t.Run(store, func(t *testing.T) { testRunSIGTERM(t, store) })
	}
}

func testRunSIGTERM(t *testing.T, store string) {
	ctx := t.Context()
	bed := enginetest.Start(t, engine.Options{TTLInterval: 100 * time.Millisecond, StreamShards: 3})
	srv := bed.Server
	ddb := bed.DynamoDB
	arn, err := demo.CreateSessionTable(ctx, ddb, "SessionData")
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	putExpired(t, ctx, ddb, "SessionData", n)

	dir := t.TempDir()
	cpPath := filepath.Join(dir, "checkpoints.json")
	cpURL := "file://" + cpPath
	if store == "dynamodb" {
		cpURL = "dynamodb://archiver-leases?create=true"
	}
	archive := filepath.Join(dir, "archive")
	const shutdownTimeout = 20 * time.Second
	metrics := "prometheus"
	if store == "file" {
		metrics = "emf" // and check the CloudWatch documents below
	}
	cmd := exec.Command(os.Args[0], "run",
		"--metrics", metrics,
		"--endpoint", srv.Endpoint(),
		"--table", "SessionData",
		"--checkpoint", cpURL,
		"--worker-id", "worker-1",
		"--sink", "file://"+archive,
		"--metrics-addr", "127.0.0.1:0",
		"--shutdown-timeout", shutdownTimeout.String(),
	)
	if store == "dynamodb" {
		// This run also takes the escape hatch: records decoded by the
		// SDK's decoder must arrive just the same.
		cmd.Args = append(cmd.Args, "--sdk-decoding")
	}
	// A clean environment: no AWS credentials, no shared config.
	cmd.Env = []string{"ARCHIVER_TEST_MAIN=1", "HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("archiver output:\n%s", out.String())
		}
	})

	eventually.True(t, 60*time.Second, "every expired item in the archive", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("archiver exited early: %v", err)
		default:
		}
		return len(readArchive(t, archive)["expired"]) >= n
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("archiver exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(shutdownTimeout + 10*time.Second):
		t.Fatalf("archiver still running %s after SIGTERM (--shutdown-timeout %s)", shutdownTimeout+10*time.Second, shutdownTimeout)
	}

	got := readArchive(t, archive)
	if len(got["expired"]) != n {
		t.Fatalf("archive holds %d distinct expired events, want %d", len(got["expired"]), n)
	}
	// Final checkpoints: each shard at its last record.
	want := lastSequences(t, ctx, bed.Streams, arn)
	var st checkpoint.Store
	if store == "file" {
		fs, err := checkpoint.OpenFile(cpPath)
		if err != nil {
			t.Fatalf("open checkpoint file after exit (lock must be released): %v", err)
		}
		st = fs
	} else {
		assertLeasesReleased(t, ctx, ddb, "archiver-leases")
		ls, err := lease.Open(ctx, lease.Options{Client: ddb, Table: "archiver-leases", WorkerID: "checker"})
		if err != nil {
			t.Fatal(err)
		}
		defer ls.Close()
		st = checkpoint.NewDynamo(ls)
	}
	defer st.Close()
	cps, err := st.Load(ctx, arn)
	if err != nil {
		t.Fatal(err)
	}
	for shardID, seq := range want {
		if cps[shardID].SequenceNumber != seq {
			t.Errorf("shard %s: checkpoint %q, want its last record %q", shardID, cps[shardID].SequenceNumber, seq)
		}
	}
	if len(want) == 0 {
		t.Fatal("stream has no records")
	}
	if metrics == "emf" && !bytes.Contains(out.Bytes(), []byte(`"_aws":{"CloudWatchMetrics"`)) {
		t.Errorf("--metrics emf wrote no embedded-metric documents")
	}
	if metrics == "emf" && !bytes.Contains(out.Bytes(), []byte(`"archiver_events_total":`)) {
		t.Errorf("--metrics emf did not export archiver_events_total")
	}
	if !bytes.Contains(out.Bytes(), []byte("placeholder credentials")) {
		t.Errorf("expected the placeholder-credentials log line")
	}
}
