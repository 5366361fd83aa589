package engine

import "hash/maphash"

// pointIndex finds a table's item by its whole key without walking the
// skiplist: GetItem, the other point reads and the write path's
// GetForWrite probe one or two slots of a hash table instead of visiting
// about 30 nodes (each a cache miss in a large table: BenchmarkSkiplist,
// Get against GetItemList).
//
// A slot holds a node's number (its chunk times slChunk plus its place in
// the chunk, plus one; 0 is empty), not its address: 4 bytes a slot, at
// most 3/4 of the slots used, so 5 to 11 bytes an item, and nothing for
// the collector to scan. It is open addressing with linear probing; a
// removal shifts the entries after it back (no tombstones), so a probe
// stops at the first empty slot. It is not safe for concurrent use: the
// table's lock guards it, like the skiplist it serves, whose chunks every
// method takes to turn a number into its node.
type pointIndex struct {
	slots []uint32 // length a power of two
	used  int
	seed  maphash.Seed
}

// pointsMin is the fewest slots a pointIndex keeps.
const pointsMin = 16

func newPointIndex() *pointIndex {
	return &pointIndex{slots: make([]uint32, pointsMin), seed: maphash.MakeSeed()}
}

// nodeAt is the node numbered v-1.
func nodeAt(chunks []*[slChunk]slNode, v uint32) *slNode {
	v--
	return &chunks[v/slChunk][v%slChunk]
}

// home is key's first slot.
func (p *pointIndex) home(key string) int {
	return int(maphash.String(p.seed, key) & uint64(len(p.slots)-1))
}

// get returns the node holding key (whose prefix64 is kp), or nil.
func (p *pointIndex) get(chunks []*[slChunk]slNode, key []byte, kp uint64) *slNode {
	mask := len(p.slots) - 1
	for i := int(maphash.Bytes(p.seed, key) & uint64(mask)); ; i = (i + 1) & mask {
		v := p.slots[i]
		if v == 0 {
			return nil
		}
		if n := nodeAt(chunks, v); n.pfx == kp && n.key == string(key) {
			return n
		}
	}
}

// add lists node number num (holding a key not listed yet).
func (p *pointIndex) add(chunks []*[slChunk]slNode, num uint32) {
	if (p.used+1)*4 > len(p.slots)*3 {
		p.resize(chunks, len(p.slots)*2)
	}
	p.place(chunks, num+1)
	p.used++
}

// place puts slot value v in the first empty slot from its node's home.
func (p *pointIndex) place(chunks []*[slChunk]slNode, v uint32) {
	mask := len(p.slots) - 1
	i := p.home(nodeAt(chunks, v).key)
	for p.slots[i] != 0 {
		i = (i + 1) & mask
	}
	p.slots[i] = v
}

// remove unlists n (which must be listed) and returns its number. Each
// entry after it whose home lies at or before the freed slot, cyclically,
// moves back into it, so that every probe still reaches its node before
// an empty slot.
func (p *pointIndex) remove(chunks []*[slChunk]slNode, n *slNode) uint32 {
	mask := len(p.slots) - 1
	i := p.home(n.key)
	for nodeAt(chunks, p.slots[i]) != n {
		i = (i + 1) & mask
	}
	num := p.slots[i] - 1
	for j := (i + 1) & mask; p.slots[j] != 0; j = (j + 1) & mask {
		h := p.home(nodeAt(chunks, p.slots[j]).key)
		// The entry at j may fill hole i unless its home lies in (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			p.slots[i] = p.slots[j]
			i = j
		}
	}
	p.slots[i] = 0
	p.used--
	if len(p.slots) > pointsMin && p.used*8 < len(p.slots) {
		p.resize(chunks, len(p.slots)/2)
	}
	return num
}

// resize rebuilds the table with size slots.
func (p *pointIndex) resize(chunks []*[slChunk]slNode, size int) {
	old := p.slots
	p.slots = make([]uint32, size)
	for _, v := range old {
		if v != 0 {
			p.place(chunks, v)
		}
	}
}
