package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// recorder is a Journal keeping a copy of every event.
type recorder struct{ events []Event }

func (r *recorder) Record(ev *Event) { r.events = append(r.events, *ev) }

// exported returns the registry's Export as a list of events.
func exported(t *testing.T, r *Registry) []Event {
	t.Helper()
	var out []Event
	if err := r.Export(func(ev *Event) error { out = append(out, *ev); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

var iterRE = regexp.MustCompile(`"NextShardIterator":"[^"]*"`)

// view renders what a reader sees of every stream: the shards and every
// shard's records from TRIM_HORIZON (iterators blanked: their MAC key is
// per registry). Reading applies retention first.
func view(t *testing.T, r *Registry) []string {
	t.Helper()
	var out []string
	call := func(op string, in any) string {
		body, _ := json.Marshal(in)
		resp, err := r.Handle(bg, "", op, body)
		if err != nil {
			return op + ": " + err.Error()
		}
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, s := range r.list {
		call("DescribeStream", map[string]string{"StreamArn": s.arn})
		out = append(out, s.arn, s.Status(), fmt.Sprint(s.Shards()))
		for _, sh := range s.Shards() {
			var it struct{ ShardIterator string }
			json.Unmarshal([]byte(call("GetShardIterator", map[string]string{"StreamArn": s.arn, "ShardId": sh.ID, "ShardIteratorType": "TRIM_HORIZON"})), &it)
			out = append(out, iterRE.ReplaceAllString(call("GetRecords", map[string]string{"ShardIterator": it.ShardIterator}), ""))
		}
	}
	return out
}

// TestJournalReplay drives a registry through every kind of change and
// rebuilds it three ways: from its journal, from its Export, and from an
// Export taken midway plus the journal from before that point (as a
// snapshot and the log written around it are replayed at start-up).
func TestJournalReplay(t *testing.T) {
	clk := newClock()
	o := Options{Shards: 2, RolloverRecords: 4, Retention: time.Hour, Now: clk.Now}
	r := NewRegistry(o)
	rec := &recorder{}
	r.SetJournal(rec)
	a := r.Create("", "t1", NewAndOldImages)
	a.SetKeySchema("pk", "")
	b := r.Create("", "t2", KeysOnly)
	b.SetKeySchema("pk", "sk")
	put := func(s *Stream, i int) {
		s.Append(Change{EventName: "INSERT", Keys: key(fmt.Sprint(i)), New: attr.Item{"pk": attr.Str(fmt.Sprint(i)), "v": attr.Num(fmt.Sprint(i))}, Service: i%5 == 0})
	}
	for i := 0; i < 12; i++ {
		put(a, i)
		put(b, i)
	}
	clk.Advance(90 * time.Minute) // the records so far age out on the next maintenance
	var mid []Event
	var midAt int
	for i := 12; i < 30; i++ {
		put(a, i)
		if i == 20 {
			mid, midAt = exported(t, r), len(rec.events)
			if err := r.Split(a.arn, a.Shards()[len(a.Shards())-1].ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	open := a.Shards()[len(a.Shards())-1].ID
	if _, err := r.Inject(a.arn, open, EncodedChange{EventName: "POISON", Keys: []byte(`{"pk":{"S":"x"}}`), Size: -1}); err != nil {
		t.Fatal(err)
	}
	r.Disable(b.arn)
	view(t, r) // applies retention, which the journal records
	want := view(t, r)

	replay := func(events ...[]Event) []string {
		r2 := NewRegistry(o)
		for _, list := range events {
			for i := range list {
				if err := r2.Apply(&list[i]); err != nil {
					t.Fatalf("Apply %+v: %v", list[i], err)
				}
			}
		}
		return view(t, r2)
	}
	for _, c := range []struct {
		name string
		got  []string
	}{
		{"journal", replay(rec.events)},
		{"export", replay(exported(t, r))},
		{"export midway, then the journal from before it", replay(mid, rec.events[midAt-10:])},
		{"journal twice", replay(rec.events, rec.events)},
	} {
		if len(c.got) != len(want) {
			t.Errorf("%s: rebuilt registry reads as %d parts, want %d", c.name, len(c.got), len(want))
			continue
		}
		for i := range want {
			if c.got[i] != want[i] {
				t.Errorf("%s: rebuilt registry differs\n got  %s\n want %s", c.name, c.got[i], want[i])
				break
			}
		}
	}
}

// TestCommitMakesTheRecordDurable appends through EncodedChange.Commit: a
// commit that fails leaves no record and gives its sequence number back (the
// next record takes it); one that succeeds gets the record's event instead
// of the registry's journal, and the record is then readable.
func TestCommitMakesTheRecordDurable(t *testing.T) {
	r := NewRegistry(Options{Shards: 1, Now: newClock().Now})
	rec := &recorder{}
	r.SetJournal(rec)
	s := r.Create("", "t", NewImage)
	s.SetKeySchema("pk", "")
	fail := errors.New("disk full")
	var committed []Event
	for i, c := range []struct {
		err     error
		wantSeq uint64
	}{{fail, 0}, {nil, 1}, {fail, 0}, {nil, 2}} {
		err := s.AppendEncoded(EncodedChange{EventName: "INSERT", Keys: []byte(`{"pk":{"S":"a"}}`), New: []byte(`{"pk":{"S":"a"}}`), Size: 1,
			Commit: func(ev *Event) error {
				if c.err == nil {
					committed = append(committed, *ev)
				}
				return c.err
			}})
		if !errors.Is(err, c.err) {
			t.Fatalf("append %d: %v, want %v", i, err, c.err)
		}
	}
	for _, ev := range rec.events {
		if ev.Kind == EvRecord {
			t.Errorf("the journal got record %d, which a Commit logged", ev.Record.Seq)
		}
	}
	if len(committed) != 2 || committed[0].Record.Seq+1 != committed[1].Record.Seq || committed[0].Kind != EvRecord {
		t.Fatalf("committed %+v, want two records with consecutive sequence numbers", committed)
	}
	got := view(t, r)
	if n := strings.Count(strings.Join(got, "\n"), `"eventName":"INSERT"`); n != 2 {
		t.Errorf("%d records readable, want the 2 committed:\n%s", n, strings.Join(got, "\n"))
	}
}
