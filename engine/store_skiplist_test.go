package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// TestSkiplistModel checks the skiplist against a map under random puts
// (with and without GetForWrite), deletes, sorted batch deletes and point
// reads, as an index's list and as a table's (newItemList, whose Get and
// GetForWrite ask the pointIndex), then empties it key by key (the
// pointIndex shrinks back to its smallest).
func TestSkiplistModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		for _, items := range []bool{false, true} {
			t.Run(fmt.Sprint(seed, items), func(t *testing.T) { skiplistModel(t, seed, items) })
		}
	}
}

func skiplistModel(t *testing.T, seed uint64, items bool) {
	r := rand.New(rand.NewPCG(seed, 2))
	s := newSkiplist(7)
	if items {
		s = newItemList(7)
	}
	model := map[string]*entry{}
	// Short keys, keys sharing long prefixes and keys with zero bytes
	// exercise the 8-byte prefix comparison.
	key := func() []byte {
		switch r.IntN(3) {
		case 0:
			return []byte(fmt.Sprintf("k%d", r.IntN(1000)))
		case 1:
			return []byte(fmt.Sprintf("common-prefix-%04d", r.IntN(1000)))
		}
		return []byte{0, byte(r.IntN(4)), 0, byte(r.IntN(4)), 0, 0, 0, byte(r.IntN(8)), byte(r.IntN(4))}[:1+r.IntN(9)]
	}
	for step := 0; step < 20000; step++ {
		switch r.IntN(5) {
		case 0, 1:
			k := key()
			e := newStoredEntry(k, nil, 0)
			if r.IntN(2) == 0 {
				if got := s.GetForWrite(k); got != model[string(k)] {
					t.Fatalf("GetForWrite(%s) = %v, want %v", k, got, model[string(k)])
				}
			}
			s.Put(append([]byte(nil), k...), e, noExpiry)
			model[string(k)] = e
		case 2:
			k := key()
			if got := s.Delete(k); got != model[string(k)] {
				t.Fatalf("Delete(%s) = %v, want %v", k, got, model[string(k)])
			}
			delete(model, string(k))
		case 3:
			var ks [][]byte
			for i := 0; i < r.IntN(40); i++ {
				ks = append(ks, key())
			}
			slices.SortFunc(ks, bytes.Compare)
			ks = slices.CompactFunc(ks, bytes.Equal)
			s.DeleteSorted(ks)
			for _, k := range ks {
				delete(model, string(k))
			}
		case 4:
			k := key()
			if got := s.Get(k); got != model[string(k)] {
				t.Fatalf("Get(%s) = %v, want %v", k, got, model[string(k)])
			}
		}
	}
	defer emptyList(t, s, model, r)
	want := make([]string, 0, len(model))
	for k := range model {
		want = append(want, k)
	}
	slices.Sort(want)
	var got []string
	for n := s.First(); n != nil; n = n.Next() {
		got = append(got, string(n.key))
		if s.Get(n.Key()) != model[string(n.key)] {
			t.Fatalf("Get(%s) differs from the model", n.key)
		}
	}
	if !slices.Equal(got, want) || s.Len() != len(want) {
		t.Fatalf("forward walk has %d keys, model %d, Len %d", len(got), len(want), s.Len())
	}
	var back []string
	for n := s.Last(); n != nil; n = n.Prev() {
		back = append(back, string(n.key))
	}
	slices.Reverse(back)
	if !slices.Equal(back, want) {
		t.Fatal("backward walk differs")
	}
	for _, k := range want[:10] {
		if n := s.SeekGE([]byte(k)); n == nil || string(n.key) != k {
			t.Fatalf("SeekGE(%s)", k)
		}
		if n := s.SeekLT([]byte(k)); n != nil && string(n.key) >= k {
			t.Fatalf("SeekLT(%s) = %s", k, n.key)
		}
	}
}

// emptyList deletes model's keys from s one by one in a random order,
// checking after each that every key is still found until deleted.
func emptyList(t *testing.T, s *skiplist, model map[string]*entry, r *rand.Rand) {
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for i, k := range keys {
		if got := s.Delete([]byte(k)); got != model[k] {
			t.Fatalf("emptying: Delete(%q) = %v, want %v", k, got, model[k])
		}
		for _, rest := range keys[i+1:] {
			if s.Get([]byte(rest)) != model[rest] {
				t.Fatalf("emptying: Get(%q) lost after deleting %q", rest, k)
			}
		}
		if s.Get([]byte(k)) != nil {
			t.Fatalf("emptying: Get(%q) after its Delete", k)
		}
	}
	if s.Len() != 0 || s.First() != nil {
		t.Fatalf("emptied list: Len %d", s.Len())
	}
	if s.points != nil && (s.points.used != 0 || len(s.points.slots) != pointsMin) {
		t.Fatalf("emptied pointIndex: %d used of %d slots", s.points.used, len(s.points.slots))
	}
	if s.chunks != nil || s.free != nil {
		t.Fatalf("emptied list keeps %d chunks", len(s.chunks))
	}
	// Filled again, from new chunks.
	for i, k := range keys[:min(len(keys), 300)] {
		s.Put([]byte(k), model[k], noExpiry)
		for _, back := range keys[:i+1] {
			if s.Get([]byte(back)) != model[back] {
				t.Fatalf("refilled: Get(%q) lost", back)
			}
		}
	}
}

// BenchmarkSkiplist times Get, Put over an existing key (the write path's
// GetForWrite then Put) and a 10-node forward walk from SeekGE in a list
// of 100,000 storage keys like a pk+sk table's (50 sort keys to each
// partition key, so most 8-byte prefixes tie), visited in a shuffled order;
// Get also on a table's list (newItemList: the pointIndex's hash lookup).
func BenchmarkSkiplist(b *testing.B) {
	const n = 100_000
	s, items := newSkiplist(1), newItemList(1)
	keys := make([][]byte, n)
	for i := range keys {
		k := appendComponent(nil, attr.Str(fmt.Sprintf("p%d", i%2000)))
		keys[i] = appendComponent(k, attr.MustNum(fmt.Sprint(i)))
		s.Put(keys[i], newStoredEntry(keys[i], nil, 0), noExpiry)
		items.Put(keys[i], newStoredEntry(keys[i], nil, 0), noExpiry)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	b.Run("Get", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if s.Get(keys[i%n]) == nil {
				b.Fatal("missing")
			}
			i++
		}
	})
	b.Run("GetItemList", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if items.Get(keys[i%n]) == nil {
				b.Fatal("missing")
			}
			i++
		}
	})
	b.Run("Put", func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := keys[i%n]
			s.Put(k, s.GetForWrite(k), noExpiry)
			i++
		}
	})
	b.Run("Seek", func(b *testing.B) {
		i := 0
		for b.Loop() {
			nd := s.SeekGE(keys[i%n])
			for j := 0; j < 10 && nd != nil; j++ {
				nd = nd.Next()
			}
			i++
		}
	})
}
