package engine

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLogFlushedWhileSnapshotting: while the background loop's snapshot is
// held up (here by a table lock it waits for), writes no request syncs
// (a fault hook's shard events, like the TTL sweeper's deletes) are still
// made durable by the loop, instead of piling up in the log's memory until
// the snapshot ends.
func TestLogFlushedWhileSnapshotting(t *testing.T) {
	e, err := New(Options{DataDir: t.TempDir(), TTLInterval: -1, Clock: NewManualClock(time.Unix(1_800_000_000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, name := range []string{"aaa", "bbb"} { // the snapshot writes aaa first
		body := `{"TableName":"` + name + `","BillingMode":"PAY_PER_REQUEST",` +
			`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],` +
			`"StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_AND_OLD_IMAGES"}}`
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", "DynamoDB_20120810.CreateTable")
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("CreateTable %s: %d %s", name, w.Code, w.Body)
		}
	}
	unlock := e.LockTableForTest("aaa")
	defer unlock()
	e.p.snapEvery.Store(1) // any growth of the log starts a snapshot
	if err := e.ForceRollover("bbb"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the background loop to start a snapshot", func() bool {
		if e.p.snapMu.TryLock() {
			e.p.snapMu.Unlock()
			return false
		}
		return true
	})
	if err := e.ForceRollover("bbb"); err != nil { // logged after the snapshot's rotation
		t.Fatal(err)
	}
	pos := e.p.log.Pos()
	waitFor(t, "the loop to flush the log while the snapshot waits", func() bool { return e.p.log.Durable(pos) })
}

// waitFor polls cond until it holds; after a minute (far beyond what the
// loop's 50 ms ticks need) the test fails naming what it waited for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}
