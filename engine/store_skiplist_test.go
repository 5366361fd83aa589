package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSkiplistModel checks the skiplist against a map under random puts
// (with and without GetForWrite), deletes and sorted batch deletes.
func TestSkiplistModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { skiplistModel(t, seed) })
	}
}

func skiplistModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 2))
	s := newSkiplist(7)
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
		switch r.IntN(4) {
		case 0, 1:
			k := key()
			e := newStoredEntry(k, len(k), 0)
			if r.IntN(2) == 0 {
				if got := s.GetForWrite(k); got != model[string(k)] {
					t.Fatalf("GetForWrite(%s) = %v, want %v", k, got, model[string(k)])
				}
			}
			s.Put(append([]byte(nil), k...), e)
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
		}
	}
	want := make([]string, 0, len(model))
	for k := range model {
		want = append(want, k)
	}
	slices.Sort(want)
	var got []string
	for n := s.First(); n != nil; n = n.Next() {
		got = append(got, string(n.key))
		if s.Get(n.key) != model[string(n.key)] {
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
