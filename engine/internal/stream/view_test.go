package stream

import (
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// TestView: a stream's view shows its shards in creation order with their
// lineage and their latest records, oldest first, bounded per shard and in
// bytes, the newest shards served first.
func TestView(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.reg.Create("", "T", NewAndOldImages)
	put := func(pk string) {
		s.Append(Change{EventName: "INSERT", Keys: attr.Item{"pk": attr.Str(pk)}, New: attr.Item{"pk": attr.Str(pk)}})
	}
	for _, pk := range []string{"a", "b", "c"} {
		put(pk)
	}
	if err := e.reg.Rollover(s.ARN()); err != nil {
		t.Fatal(err)
	}
	put("d")
	s.Append(Change{EventName: "REMOVE", Keys: attr.Item{"pk": attr.Str("d")}, Old: attr.Item{"pk": attr.Str("d")}, Service: true})

	child := s.View(100, 1<<20).Shards[1].Records
	if len(child) != 2 {
		t.Fatalf("the child shows %d records, want 2", len(child))
	}
	for _, c := range []struct {
		name                 string
		maxRecords, maxBytes int
		want                 [2]int // records shown of the parent, of the child
	}{
		{"all", 100, 1 << 20, [2]int{3, 2}},
		{"two a shard", 2, 1 << 20, [2]int{2, 2}},
		{"bytes for the child's alone", 100, len(child[0]) + len(child[1]), [2]int{0, 2}},
		{"bytes for its latest", 100, len(child[1]), [2]int{0, 1}},
		{"bytes for none", 100, len(child[1]) - 1, [2]int{0, 0}},
	} {
		v := s.View(c.maxRecords, c.maxBytes)
		if len(v.Shards) != 2 || v.Shards[1].Parent != v.Shards[0].ShardID || v.Shards[0].End == "" || v.Shards[0].Closed == nil || v.Shards[1].End != "" {
			t.Fatalf("%s: shards %+v, want a closed parent and its open child", c.name, v.Shards)
		}
		if got := [2]int{len(v.Shards[0].Records), len(v.Shards[1].Records)}; got != c.want {
			t.Errorf("%s: %v records shown, want %v", c.name, got, c.want)
		}
		if v.Shards[0].Kept != 3 || v.Shards[1].Kept != 2 || v.Shards[0].Count != 3 {
			t.Errorf("%s: kept %d and %d, counted %d; want 3, 2 and 3", c.name, v.Shards[0].Kept, v.Shards[1].Kept, v.Shards[0].Count)
		}
	}
	v := s.View(1, 1<<20)
	last := string(v.Shards[1].Records[0])
	if want := `"userIdentity":{"PrincipalId":"dynamodb.amazonaws.com","Type":"Service"}`; !strings.Contains(last, want) || !strings.Contains(last, `"eventName":"REMOVE"`) {
		t.Errorf("the child's latest record %s, want the service REMOVE", last)
	}
	if first := string(s.View(100, 1<<20).Shards[0].Records[0]); !strings.Contains(first, `"Keys":{"pk":{"S":"a"}}`) {
		t.Errorf("the parent's first record %s, want a's INSERT (oldest first)", first)
	}
}
