package stream

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestAppendAllIsOneUnit appends a transaction's records to two streams
// through AppendAll: commit is called once with every record's event,
// none readable before it returns; a commit that fails leaves no record
// in either stream and gives every sequence number back; rollover by
// record count waits until all of a call's records are added.
func TestAppendAllIsOneUnit(t *testing.T) {
	clk := newClock()
	r := NewRegistry(Options{Shards: 1, Now: clk.Now, RolloverRecords: 2})
	rec := &recorder{}
	r.SetJournal(rec)
	a, b := r.Create("", "a", NewImage), r.Create("", "b", NewImage)
	a.SetKeySchema("pk", "")
	b.SetKeySchema("pk", "")
	change := func(s *Stream, k string) Pending {
		js := []byte(fmt.Sprintf(`{"pk":{"S":%q}}`, k))
		return Pending{Stream: s, Change: EncodedChange{EventName: "INSERT", Keys: js, New: js, Size: 1}}
	}
	txn := []Pending{change(b, "b1"), change(a, "a1"), change(a, "a2"), change(a, "a3")}
	fail := errors.New("disk full")
	for _, c := range []struct {
		name    string
		err     error
		wantSeq []uint64 // per change
	}{
		{"refused", fail, []uint64{1, 1, 2, 3}},
		{"committed", nil, []uint64{1, 1, 2, 3}},
	} {
		calls := 0
		err := AppendAll(txn, func(evs []*Event) error {
			calls++
			if len(evs) != len(txn) {
				t.Fatalf("%s: %d events, want %d", c.name, len(evs), len(txn))
			}
			for i, ev := range evs {
				if ev == nil || ev.Kind != EvRecord || ev.Record.Seq != c.wantSeq[i] {
					t.Errorf("%s: event %d is %+v, want a record numbered %d", c.name, i, ev, c.wantSeq[i])
				}
			}
			return c.err
		})
		if !errors.Is(err, c.err) || calls != 1 {
			t.Fatalf("%s: AppendAll = %v after %d commits, want %v after 1", c.name, err, calls, c.err)
		}
		got := strings.Join(view(t, r), "\n")
		want := 0
		if c.err == nil {
			want = len(txn)
		}
		if n := strings.Count(got, `"eventName":"INSERT"`); n != want {
			t.Errorf("%s: %d records readable, want %d:\n%s", c.name, n, want, got)
		}
	}
	for _, ev := range rec.events {
		if ev.Kind == EvRecord {
			t.Errorf("the journal got record %d, which the commit logged", ev.Record.Seq)
		}
	}
	// RolloverRecords 2: a's shard took three records before it closed.
	shards := a.Shards()
	if len(shards) != 2 || shards[0].Open || shards[0].Records != 3 || !shards[1].Open {
		t.Fatalf("stream a's shards %+v, want the first closed after the transaction and one child", shards)
	}
	if err := AppendAll(nil, nil); err != nil {
		t.Fatalf("AppendAll of nothing: %v", err)
	}
}
