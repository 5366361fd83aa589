package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/demo"
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
