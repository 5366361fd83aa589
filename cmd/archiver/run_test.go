package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/engine"
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

// TestRunSIGTERM runs the real command as a subprocess against an
// in-process engine, lets it archive expired items into a file sink, sends
// SIGTERM and checks that it exits 0 within --shutdown-timeout with every
// item archived and every shard's final checkpoint at its last record. No
// AWS credentials are configured: the loopback endpoint gets placeholders.
func TestRunSIGTERM(t *testing.T) {
	ctx := t.Context()
	srv := startEngine(t, engine.Options{TTLInterval: 100 * time.Millisecond, StreamShards: 3})
	ddb := ddbClient(srv.Endpoint())
	arn, err := createSessionTable(ctx, ddb, "SessionData")
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	putExpired(t, ctx, ddb, "SessionData", n)

	dir := t.TempDir()
	cpPath := filepath.Join(dir, "checkpoints.json")
	archive := filepath.Join(dir, "archive")
	const shutdownTimeout = 20 * time.Second
	cmd := exec.Command(os.Args[0], "run",
		"--endpoint", srv.Endpoint(),
		"--table", "SessionData",
		"--checkpoint", "file://"+cpPath,
		"--sink", "file://"+archive,
		"--metrics-addr", "127.0.0.1:0",
		"--shutdown-timeout", shutdownTimeout.String(),
	)
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

	waitFor(t, "every expired item in the archive", 60*time.Second, func() bool {
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
	want := lastSequences(t, ctx, streamsClient(srv.Endpoint()), arn)
	store, err := checkpoint.OpenFile(cpPath)
	if err != nil {
		t.Fatalf("open checkpoint file after exit (lock must be released): %v", err)
	}
	defer store.Close()
	cps, err := store.Load(ctx, arn)
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
	if !bytes.Contains(out.Bytes(), []byte("placeholder credentials")) {
		t.Errorf("expected the placeholder-credentials log line")
	}
}
