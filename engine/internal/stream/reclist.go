package stream

import "sort"

// recBlock is how many records one block of a recList holds: 170 records
// of 48 bytes and the 8-byte header the runtime puts before an object of
// pointers larger than 512 bytes fit the 8,192-byte size class.
const recBlock = 170

// recList is a shard's untrimmed records in order, kept in fixed-size
// blocks: appending never copies the records already there (a slice
// growing by append copies them all and leaves up to a quarter of its
// capacity unused), and trimming frees whole blocks from the front.
type recList struct {
	blocks []*[recBlock]record
	head   int // index in blocks[0] of the first record
	n      int // records held
}

// Len is how many records the list holds.
func (l *recList) Len() int { return l.n }

// at returns the i-th record, 0 <= i < Len().
func (l *recList) at(i int) *record {
	i += l.head
	return &l.blocks[i/recBlock][i%recBlock]
}

// last returns the last record, nil when the list is empty.
func (l *recList) last() *record {
	if l.n == 0 {
		return nil
	}
	return l.at(l.n - 1)
}

// push appends rec and returns the list's copy of it.
func (l *recList) push(rec record) *record {
	i := l.head + l.n
	if i == len(l.blocks)*recBlock {
		l.blocks = append(l.blocks, new([recBlock]record))
	}
	p := &l.blocks[i/recBlock][i%recBlock]
	*p = rec
	l.n++
	return p
}

// search returns the smallest index i in [0, Len()) for which f(at(i)) is
// true, or Len() (f must be false, then true, along the list).
func (l *recList) search(f func(*record) bool) int {
	return sort.Search(l.n, func(i int) bool { return f(l.at(i)) })
}

// dropFront removes the first k records, 0 <= k <= Len(), releasing what
// they hold: a block left with no record goes, records cut from a block
// that stays are cleared.
func (l *recList) dropFront(k int) {
	for k > 0 {
		in := min(k, recBlock-l.head, l.n) // from the first block
		if l.head+in == recBlock || in == l.n {
			l.blocks[0] = nil
			l.blocks = l.blocks[1:]
			l.head = 0
		} else {
			clear(l.blocks[0][l.head : l.head+in])
			l.head += in
		}
		l.n -= in
		k -= in
	}
	if l.n == 0 {
		*l = recList{}
	}
}

// slice returns a copy of records i..j-1 (their JSON shared).
func (l *recList) slice(i, j int) []record {
	out := make([]record, 0, j-i)
	for ; i < j; i++ {
		out = append(out, *l.at(i))
	}
	return out
}
