package archive

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

// countingStore serves objects of one line each and records how many
// bytes were downloaded and not yet read at most.
type countingStore struct {
	n, size int
	held    *atomic.Int64 // downloaded, not yet read (the test's fn subtracts)
	mu      sync.Mutex
	peak    int64
}

func (c *countingStore) s3() bool { return true }

func (c *countingStore) root() string { return "" }

func (c *countingStore) list(_ context.Context, _ string, fn func(key, rel string, size int64)) error {
	for i := range c.n {
		rel := fmt.Sprintf("table=T/kind=expired/dt=2026-03-04/hr=05/shard-%03d-1-1.jsonl", i)
		fn(rel, rel, int64(c.size))
	}
	return nil
}

func (c *countingStore) get(_ context.Context, key string, _ int64) ([]byte, string, error) {
	time.Sleep(time.Millisecond)
	e := event.Event{Kind: event.Expired, Table: "T", EventID: key, EventName: "REMOVE", SequenceNumber: "1", ShardID: key[40:49],
		ApproximateCreationTime: time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC), Keys: event.Item{}}
	line := event.AppendLine(nil, &e)
	c.mu.Lock()
	c.peak = max(c.peak, c.held.Add(int64(c.size)))
	c.mu.Unlock()
	return line, "", nil
}

// TestBufferBoundsDownloads: a download does not start while the buffer
// budget is spent. With a budget of two objects, at most two objects are
// downloaded and not yet read, however many downloads may run at once.
func TestBufferBoundsDownloads(t *testing.T) {
	var held atomic.Int64
	st := &countingStore{n: 200, size: 1000, held: &held}
	a := &Archive{o: Options{Parallel: 16, MaxBufferBytes: 2000}, st: st, url: "test://"}
	a.o.defaults()
	n := 0
	stats, err := a.Events(context.Background(), Selection{}, func(Line) error {
		n++
		held.Add(-1000)
		return nil
	})
	if err != nil || n != 200 || stats.Objects != 200 {
		t.Fatalf("read %d events, stats %+v, err %v", n, stats, err)
	}
	if st.peak > 2000 {
		t.Errorf("%d bytes downloaded and not yet read at once; the budget is 2000", st.peak)
	}
}
