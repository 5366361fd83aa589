package stream

import (
	"fmt"
	"testing"
)

// TestRecList checks the blocked record list against a slice under
// appends and trims of every size around the block boundaries.
func TestRecList(t *testing.T) {
	for _, c := range []struct {
		push, drop []int // rounds: push[i] records, then drop[i]
	}{
		{[]int{1}, []int{1}},
		{[]int{recBlock}, []int{recBlock}},
		{[]int{recBlock + 1}, []int{recBlock}},
		{[]int{3*recBlock + 5, 10}, []int{recBlock - 1, 2*recBlock + 6}},
		{[]int{recBlock - 1, 2, recBlock}, []int{recBlock - 2, 0, 1}},
		{[]int{5, 5, 5}, []int{5, 5, 5}},
		{[]int{2 * recBlock, 1}, []int{2*recBlock - 1, 2}},
	} {
		var l recList
		var model []record
		seq := uint64(0)
		for round := range c.push {
			for range c.push[round] {
				seq++
				if got := l.push(record{seq: seq}); got.seq != seq {
					t.Fatalf("%v: push returned %d", c, got.seq)
				}
				model = append(model, record{seq: seq})
			}
			l.dropFront(c.drop[round])
			model = model[c.drop[round]:]
			name := fmt.Sprintf("%v round %d", c, round)
			if l.Len() != len(model) {
				t.Fatalf("%s: Len %d, want %d", name, l.Len(), len(model))
			}
			for i := range model {
				if l.at(i).seq != model[i].seq {
					t.Fatalf("%s: at(%d) = %d, want %d", name, i, l.at(i).seq, model[i].seq)
				}
			}
			if last := l.last(); (last == nil) != (len(model) == 0) || last != nil && last.seq != model[len(model)-1].seq {
				t.Fatalf("%s: last %v", name, last)
			}
			for _, pos := range []uint64{0, seq / 2, seq, seq + 1} {
				want := 0
				for want < len(model) && model[want].seq < pos {
					want++
				}
				if got := l.search(func(r *record) bool { return r.seq >= pos }); got != want {
					t.Fatalf("%s: search(%d) = %d, want %d", name, pos, got, want)
				}
			}
			if got := l.slice(0, l.Len()); len(got) != len(model) || len(got) > 0 && got[0].seq != model[0].seq {
				t.Fatalf("%s: slice has %d records", name, len(got))
			}
			if blocks := (l.head + l.n + recBlock - 1) / recBlock; len(l.blocks) != blocks {
				t.Fatalf("%s: %d blocks for %d records from %d", name, len(l.blocks), l.n, l.head)
			}
		}
	}
}
