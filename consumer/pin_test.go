package consumer

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// TestEntryDoesNotPinTheResponse: the fast decoder's strings point into
// the whole GetRecords response, and a shard's entry's sequence number
// outlives its records (acknowledged, it is the shard's acknowledged
// position until the next checkpoint save, after the budget let them
// go). It must be a copy: holding a substring kept every response of the
// last second alive, beyond the budget (a backlog of 100 KB items peaked
// at 3.1x the budget, 1.8x without).
func TestEntryDoesNotPinTheResponse(t *testing.T) {
	a := sinktest.New("a")
	a.Hold()
	c := newUnitConsumer(t, newMemStore(), func(cfg *Config) { cfg.CheckpointInterval = time.Hour }, Route{Sink: a})
	b := mkBatch("s", 1, event.Expired, event.Expired)
	// The records' sequence numbers as substrings of one large "response".
	body := strings.Repeat("x", 1<<20) + *b.Records[0].Dynamodb.SequenceNumber + *b.Records[1].Dynamodb.SequenceNumber
	for i := range b.Records {
		n := len(*b.Records[i].Dynamodb.SequenceNumber)
		seq := body[len(body)-(2-i)*n : len(body)-(1-i)*n]
		b.Records[i].Dynamodb.SequenceNumber = &seq
	}
	if err := c.process(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	s := c.lookup(testARN, "s")
	var lasts []string
	s.mu.Lock()
	for _, e := range s.entries {
		lasts = append(lasts, e.last)
	}
	s.mu.Unlock()
	if len(lasts) == 0 {
		t.Fatal("no entry held")
	}
	a.Release()
	eventually.True(t, time.Minute, "the batch acknowledged", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.entries) == 0
	})
	s.mu.Lock()
	lasts = append(lasts, s.acked)
	s.mu.Unlock()
	start := uintptr(unsafe.Pointer(unsafe.StringData(body)))
	for _, l := range lasts {
		p := uintptr(unsafe.Pointer(unsafe.StringData(l)))
		if p >= start && p < start+uintptr(len(body)) {
			t.Fatalf("entry's sequence number %q points into the response", l)
		}
	}
}
