package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ttl-archiver/archiver/demo"
	"github.com/ttl-archiver/archiver/engine"
)

// TestMain lets tests run this test binary as the archiver command itself
// (ARCHIVER_TEST_MAIN=1), so subprocess tests need no separate build.
func TestMain(m *testing.M) {
	if os.Getenv("ARCHIVER_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func startEngine(t *testing.T, o engine.Options) *engine.Server {
	t.Helper()
	srv, err := engine.Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func testAWSConfig() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
}

func ddbClient(endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(testAWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

func streamsClient(endpoint string) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(testAWSConfig(), func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// putExpired writes n SessionData items whose TTL is already in the past.
func putExpired(t *testing.T, ctx context.Context, c *dynamodb.Client, table string, n int) {
	t.Helper()
	past := time.Now().Add(-time.Minute).Unix()
	for i := 0; i < n; i++ {
		if err := demo.PutSession(ctx, c, table, fmt.Sprintf("user%d", i%7), fmt.Sprintf("s%05d", i), past); err != nil {
			t.Fatal(err)
		}
	}
}

// readArchive reads the archive folder (see demo.ReadArchiveDir).
func readArchive(t *testing.T, dir string) map[string]map[string]int {
	t.Helper()
	m, err := demo.ReadArchiveDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitFor polls cond until it holds or the generous deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
