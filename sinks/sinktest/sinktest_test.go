package sinktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks"
)

func batch(seqs ...string) sinks.Batch {
	b := sinks.Batch{ShardID: "s1"}
	for _, s := range seqs {
		b.Events = append(b.Events, event.Event{ShardID: "s1", SequenceNumber: s})
	}
	return b
}

func seqs(evs []event.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.SequenceNumber)
	}
	return out
}

// TestRecorder: what the recorder keeps and acknowledges when it is told
// to fail, hold or gate its writes.
func TestRecorder(t *testing.T) {
	errDown := errors.New("down")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name      string
		setup     func(r *Recorder)
		ctx       context.Context
		wantWrite error    // Write's return
		wantAck   []error  // acknowledgements seen right after Write
		wantSeqs  []string // Events afterwards
		wantFails int
	}{
		{name: "records", wantAck: []error{nil}, wantSeqs: []string{"1", "2"}},
		{name: "fails", setup: func(r *Recorder) { r.FailWith(func(sinks.Batch) error { return errDown }) },
			wantAck: []error{errDown}, wantFails: 1},
		{name: "holds", setup: func(r *Recorder) { r.Hold() }},
		{name: "closed", setup: func(r *Recorder) { r.Close(context.Background()) }, wantWrite: ErrClosed},
		{name: "gate and a canceled context", setup: func(r *Recorder) { r.Gate(make(chan struct{})) },
			ctx: canceled, wantWrite: context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := New("rec")
			if c.setup != nil {
				c.setup(r)
			}
			ctx := c.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			var acks []error
			err := r.Write(ctx, batch("1", "2"), func(err error) { acks = append(acks, err) })
			if !errors.Is(err, c.wantWrite) {
				t.Fatalf("Write = %v, want %v", err, c.wantWrite)
			}
			if len(acks) != len(c.wantAck) || (len(acks) == 1 && !errors.Is(acks[0], c.wantAck[0])) {
				t.Errorf("acks %v, want %v", acks, c.wantAck)
			}
			if got := seqs(r.Events()); len(got) != len(c.wantSeqs) {
				t.Errorf("events %v, want %v", got, c.wantSeqs)
			}
			if _, fails := r.Writes(); fails != c.wantFails {
				t.Errorf("%d failures, want %d", fails, c.wantFails)
			}
		})
	}
}

// TestRecorderReleaseAndGate: held acknowledgements come on Release in
// write order; a gated write goes on once the gate closes.
func TestRecorderReleaseAndGate(t *testing.T) {
	r := New("rec")
	r.Hold()
	var acks int
	for _, s := range []string{"1", "2"} {
		if err := r.Write(context.Background(), batch(s), func(error) { acks++ }); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-r.Arrived():
	default:
		t.Fatal("Arrived is not closed after a write")
	}
	if acks != 0 || len(r.Batches()) != 0 {
		t.Fatalf("held: %d acks, %d batches", acks, len(r.Batches()))
	}
	r.Release()
	if got := seqs(r.Events()); acks != 2 || len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Fatalf("after Release: %d acks, events %v", acks, got)
	}
	gate := make(chan struct{})
	r.Gate(gate)
	done := make(chan error)
	go func() { done <- r.Write(context.Background(), batch("3"), func(error) {}) }()
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w, _ := r.Writes(); w != 3 {
		t.Errorf("%d writes, want 3", w)
	}
}

// TestRecorderRanges: the ranges the recorder keeps, when it is due, and
// failing to record.
func TestRecorderRanges(t *testing.T) {
	ctx := context.Background()
	r := New("rec")
	if !r.RecordDue("arn", "s1") {
		t.Error("a new recorder's ranges are not due")
	}
	r.DueWith(func(arn, id string) bool { return id == "s2" })
	if r.RecordDue("arn", "s1") || !r.RecordDue("arn", "s2") {
		t.Error("RecordDue does not follow DueWith")
	}
	rg := manifest.Range{ShardID: "s1", To: "10", Events: map[event.Kind]int64{event.Expired: 2}, Trimmed: &manifest.Trimmed{First: "5"}}
	if err := r.Record(ctx, rg); err != nil {
		t.Fatal(err)
	}
	rg.Events[event.Expired] = 99 // the caller's map is its own
	rg.Trimmed.First = "6"
	errDown := errors.New("down")
	r.FailRecordsWith(func(manifest.Range) error { return errDown })
	if err := r.Record(ctx, manifest.Range{ShardID: "s1", From: "10", To: "20"}); !errors.Is(err, errDown) {
		t.Errorf("Record with a failure set: %v", err)
	}
	r.FailRecordsWith(nil)
	r.Close(ctx)
	if err := r.Record(ctx, manifest.Range{ShardID: "s1", From: "10", To: "20"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close: %v", err)
	}
	got := r.Ranges()
	if len(got) != 1 || got[0].To != "10" || got[0].Events[event.Expired] != 2 || got[0].Trimmed.First != "5" {
		t.Errorf("Ranges = %+v, want the first range as recorded", got)
	}
	if calls, failed := r.RecordCalls(); calls != 2 || failed != 1 {
		t.Errorf("RecordCalls = %d, %d; want 2, 1", calls, failed)
	}
}

// TestRecorderFaults: a refused batch is not taken, a partial rejection
// keeps the events it does not name, HoldUntilFlush acknowledges at the
// next Flush, late acknowledgements are awaited by Flush, and what is
// durable stays in write order.
func TestRecorderFaults(t *testing.T) {
	ctx := context.Background()
	errNo := errors.New("no")
	r := New("rec")
	var seen []string
	r.OnWrite(func(b sinks.Batch) { seen = append(seen, b.Events[0].SequenceNumber) })
	r.RefuseWith(func(b sinks.Batch) error {
		if b.Events[0].SequenceNumber == "0" {
			return errNo
		}
		return nil
	})
	if err := r.Write(ctx, batch("0"), func(error) { t.Error("a refused batch is acknowledged") }); !errors.Is(err, errNo) {
		t.Fatalf("refused Write = %v", err)
	}
	r.FailWith(func(b sinks.Batch) error {
		if len(b.Events) == 3 {
			return &sinks.RejectedError{Indexes: []int{1}, Err: errNo}
		}
		return nil
	})
	var acks []error
	ack := func(err error) { acks = append(acks, err) }
	if err := r.Write(ctx, batch("1", "2", "3"), ack); err != nil {
		t.Fatal(err)
	}
	r.HoldUntilFlush()
	if err := r.Write(ctx, batch("4"), ack); err != nil {
		t.Fatal(err)
	}
	if r.Held() != 1 || len(acks) != 1 {
		t.Fatalf("before Flush: %d held, %d acks", r.Held(), len(acks))
	}
	r.Release()
	r.AckLate(time.Millisecond)
	lateAcks := make(chan error, 2)
	for _, s := range []string{"5", "6"} {
		if err := r.Write(ctx, batch(s), func(err error) { lateAcks <- err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(lateAcks) != 2 || r.Flushes() != 1 {
		t.Fatalf("after Flush: %d late acks, %d flushes", len(lateAcks), r.Flushes())
	}
	if got := fmt.Sprint(seqs(r.Events())); got != "[1 3 4 5 6]" {
		t.Errorf("Events = %s, want [1 3 4 5 6] (2 rejected, in write order)", got)
	}
	if w, f := r.Writes(); w != 4 || f != 1 || r.Written() != 6 || fmt.Sprint(seen) != "[1 4 5 6]" {
		t.Errorf("Writes = %d, %d; Written = %d; OnWrite saw %v", w, f, r.Written(), seen)
	}
}

// TestRecorderPlain: Plain hides the recorder's Record.
func TestRecorderPlain(t *testing.T) {
	type recorder interface {
		Record(context.Context, manifest.Range) error
	}
	r := New("rec")
	if _, ok := sinks.Sink(r).(recorder); !ok {
		t.Fatal("the recorder records no ranges")
	}
	if _, ok := r.Plain().(recorder); ok {
		t.Fatal("Plain records ranges")
	}
}
