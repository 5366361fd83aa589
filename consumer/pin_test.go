package consumer

import (
	"context"
	"strings"
	"testing"
	"unsafe"

	"github.com/ttl-archiver/archiver/event"
)

// TestEntryDoesNotPinTheResponse: the fast decoder's strings point into
// the whole GetRecords response, and a shard's entry outlives its records
// (acknowledged, it waits for the next checkpoint save after the budget
// let them go). Its sequence number must be a copy: holding a substring
// kept every response of the last second alive, beyond the budget (a
// backlog of 100 KB items peaked at 3.1x the budget, 1.8x without).
func TestEntryDoesNotPinTheResponse(t *testing.T) {
	a := newFakeSink("a")
	c := newUnitConsumer(t, newMemStore(), nil, Route{Sink: a})
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
	s.mu.Lock()
	var lasts []string
	for _, q := range [][]*entry{s.entries, s.unsaved} {
		for _, e := range q {
			lasts = append(lasts, e.last)
		}
	}
	s.mu.Unlock()
	if len(lasts) == 0 {
		t.Fatal("no entry held")
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(body)))
	for _, l := range lasts {
		p := uintptr(unsafe.Pointer(unsafe.StringData(l)))
		if p >= start && p < start+uintptr(len(body)) {
			t.Fatalf("entry's sequence number %q points into the response", l)
		}
	}
}
