package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"unsafe"
)

// skiplist is an ordered map from byte keys to items, the storage of a
// table and of each of its indexes. It is not safe for concurrent use: the
// table's lock guards it.
type skiplist struct {
	head   slNode  // up holds slMaxLevel-1 successors
	tail   *slNode // last node, nil when empty
	level  int
	length int
	rnd    *rand.Rand
	update [slMaxLevel]*slNode // scratch for insert/delete
	hint   []byte              // key GetForWrite looked up last (see Put)
	// hintNode is hint's node when it is in the list; otherwise update
	// holds hint's predecessors.
	hintNode *slNode
	// Nodes come from chunks of slChunk (newNode): the collector then
	// scans a chunk's nodes in one go instead of chasing the level-0 chain
	// one node at a time. taken is how many nodes of the last chunk are in
	// use; a node's number is its chunk's index times slChunk plus its
	// place (the pointIndex keeps numbers). free lists deleted nodes
	// (linked through prev, each keeping its number in exp) for reuse, so
	// a chunk is never left mostly empty.
	chunks []*[slChunk]slNode
	taken  int
	free   *slNode
	// points, on a table's list (newItemList), finds a node by its whole
	// key for Get and GetForWrite; an index's list is only ever searched
	// in order.
	points *pointIndex
}

const (
	// slChunk is the nodes per allocation: 127 nodes of 64 bytes and the
	// 8-byte header the runtime puts before an object of pointers larger
	// than 512 bytes fill the 8,192-byte size class (128 would take the
	// 9,472-byte one).
	slChunk    = 127
	slMaxLevel = 24
	slP        = 4 // one in slP nodes is promoted to the next level
)

// slNode is one key of a skiplist, 64 bytes. Its level-0 successor is
// next; a node on more levels holds its successors on the levels above in
// an array of its own (up), which 3 nodes in 4 do not need.
type slNode struct {
	pfx  uint64 // the key's first 8 bytes, big-endian, zero-padded
	key  string // the key's bytes, never modified (Key)
	val  *entry
	exp  int64    // the table's nodes: the item's TTL expiry in unix nanoseconds, noExpiry when none
	prev *slNode  // level-0 predecessor; nil for the first node
	next *slNode  // level-0 successor
	up   **slNode // first of the successors on levels 1.. (level i's at index i-1); nil on level 0 only
}

// upAt is the address of n's successor on level i >= 1; n must be on that
// level (its up array has at least i elements).
func (n *slNode) upAt(i int) **slNode {
	return (**slNode)(unsafe.Add(unsafe.Pointer(n.up), uintptr(i-1)*unsafe.Sizeof(n.next)))
}

// nextAt is the address of n's successor on level i; n must be on it.
func (n *slNode) nextAt(i int) **slNode {
	if i == 0 {
		return &n.next
	}
	return n.upAt(i)
}

// newUp returns an up array for a node of lvl levels (nil for 1).
func newUp(lvl int) **slNode {
	if lvl == 1 {
		return nil
	}
	return &make([]*slNode, lvl-1)[0]
}

func newSkiplist(seed uint64) *skiplist {
	s := &skiplist{level: 1, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	s.head.up = newUp(slMaxLevel)
	return s
}

// newItemList is newSkiplist for a table's items: Get is then a hash
// lookup (pointIndex) rather than a walk down the levels.
func newItemList(seed uint64) *skiplist {
	s := newSkiplist(seed)
	s.points = newPointIndex()
	return s
}

func (s *skiplist) Len() int { return s.length }

func (s *skiplist) randomLevel() int {
	l := 1
	for l < slMaxLevel && s.rnd.Uint32()%slP == 0 {
		l++
	}
	return l
}

// prefix64 returns the first 8 bytes of k as a big-endian number, padded
// with zeros. Comparing prefixes orders keys as bytes.Compare does whenever
// the prefixes differ, so most comparisons never touch the key bytes (and
// their cache line).
func prefix64(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// before reports whether n's key sorts before key (whose prefix is kp).
func (n *slNode) before(key []byte, kp uint64) bool {
	if n.pfx != kp {
		return n.pfx < kp
	}
	return n.key < string(key)
}

// Key is n's key (capacity = length: appending to it copies; never
// modify it).
func (n *slNode) Key() []byte {
	return unsafe.Slice(unsafe.StringData(n.key), len(n.key))
}

// is reports whether n holds key.
func (n *slNode) is(key []byte) bool { return n != nil && n.key == string(key) }

// seekGE returns the first node whose key is >= key, or nil. It fills
// s.update with the predecessors at each level when fill is true.
func (s *skiplist) seekGE(key []byte, fill bool) *slNode {
	x := &s.head
	kp := prefix64(key)
	for i := s.level - 1; i > 0; i-- {
		for n := *x.upAt(i); n != nil && n.before(key, kp); n = *x.upAt(i) {
			x = n
		}
		if fill {
			s.update[i] = x
		}
	}
	for n := x.next; n != nil && n.before(key, kp); n = x.next {
		x = n
	}
	if fill {
		s.update[0] = x
	}
	return x.next
}

// Get returns the value stored under key, or nil.
func (s *skiplist) Get(key []byte) *entry {
	if s.points != nil {
		if n := s.points.get(s.chunks, key, prefix64(key)); n != nil {
			return n.val
		}
		return nil
	}
	if n := s.seekGE(key, false); n.is(key) {
		return n.val
	}
	return nil
}

// GetForWrite is Get for a caller holding the write lock that may Put the
// same key next: what the search found is kept so that Put needs no
// second search (the node itself when the key is there, its predecessors
// when it is not). Readers under a shared lock must use Get.
func (s *skiplist) GetForWrite(key []byte) *entry {
	s.hint = key
	if s.points != nil {
		if n := s.points.get(s.chunks, key, prefix64(key)); n != nil {
			s.hintNode = n
			return n.val
		}
	}
	s.hintNode = nil
	n := s.seekGE(key, true)
	if n.is(key) {
		s.hintNode = n
		return n.val
	}
	return nil
}

// Put stores val under key with expiry exp and returns the value it
// replaced, if any.
func (s *skiplist) Put(key []byte, val *entry, exp int64) *entry {
	var n *slNode
	switch {
	case s.hint != nil && bytes.Equal(s.hint, key) && s.hintNode != nil:
		n = s.hintNode
	case s.hint != nil && bytes.Equal(s.hint, key):
		n = s.update[0].next
	default:
		n = s.seekGE(key, true)
	}
	s.hint, s.hintNode = nil, nil
	if n.is(key) {
		old := n.val
		n.val, n.exp = val, exp
		return old
	}
	lvl := s.randomLevel()
	if lvl > s.level {
		for i := s.level; i < lvl; i++ {
			s.update[i] = &s.head
		}
		s.level = lvl
	}
	nn, num := s.newNode()
	nn.key, nn.val, nn.exp, nn.pfx, nn.up = frozenKey(key), val, exp, prefix64(key), newUp(lvl)
	for i := 0; i < lvl; i++ {
		p := s.update[i].nextAt(i)
		*nn.nextAt(i) = *p
		*p = nn
	}
	if p := s.update[0]; p != &s.head {
		nn.prev = p
	}
	if nn.next != nil {
		nn.next.prev = nn
	} else {
		s.tail = nn
	}
	s.length++
	if s.points != nil {
		s.points.add(s.chunks, num)
	}
	return nil
}

// Delete removes key and returns its value, or nil when absent.
func (s *skiplist) Delete(key []byte) *entry {
	s.hint, s.hintNode = nil, nil
	n := s.seekGE(key, true)
	if !n.is(key) {
		return nil
	}
	val := n.val
	s.unlink(n) // clears n
	return val
}

// DeleteSorted removes keys given in ascending order. Each search resumes
// from the previous key's predecessors, so deleting a run of neighbouring
// keys costs far less than as many Delete calls.
func (s *skiplist) DeleteSorted(keys [][]byte) {
	s.hint, s.hintNode = nil, nil
	for i := range s.update {
		s.update[i] = &s.head
	}
	for _, key := range keys {
		var x *slNode
		kp := prefix64(key)
		for i := s.level - 1; i >= 0; i-- {
			y := s.update[i]
			if x != nil && (y == &s.head || x.key > y.key) {
				y = x
			}
			for n := *y.nextAt(i); n != nil && n.before(key, kp); n = *y.nextAt(i) {
				y = n
			}
			s.update[i] = y
			if y != &s.head {
				x = y
			}
		}
		n := s.update[0].next
		if !n.is(key) {
			continue
		}
		s.unlink(n)
	}
}

// unlink removes n, clears it and lists it for reuse; s.update holds its
// predecessors. n is on level i exactly when its predecessor there links
// to it.
func (s *skiplist) unlink(n *slNode) {
	for i := 0; i < s.level; i++ {
		p := s.update[i].nextAt(i)
		if *p != n {
			break
		}
		*p = *n.nextAt(i)
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		s.tail = n.prev
	}
	for s.level > 1 && *s.head.upAt(s.level - 1) == nil {
		s.level--
	}
	s.length--
	var num uint32
	if s.points != nil {
		num = s.points.remove(s.chunks, n)
	}
	*n = slNode{prev: s.free, exp: int64(num)} // no caller holds n past a delete: reuse it
	s.free = n
	if s.length == 0 {
		// Empty (a table whose items all expired): every node is free, so
		// the chunks go back to the collector instead of staying at the
		// high-water mark; after a sweep of a million items that was 64
		// MiB for the table and as much for each index.
		s.chunks, s.taken, s.free = nil, 0, nil
	}
}

// newNode returns a zeroed node and its number, from the free list or the
// last chunk.
func (s *skiplist) newNode() (*slNode, uint32) {
	if n := s.free; n != nil {
		num := uint32(n.exp)
		s.free, n.prev, n.exp = n.prev, nil, 0
		return n, num
	}
	if len(s.chunks) == 0 || s.taken == slChunk {
		s.chunks = append(s.chunks, new([slChunk]slNode))
		s.taken = 0
	}
	c := len(s.chunks) - 1
	n := &s.chunks[c][s.taken]
	s.taken++
	return n, uint32(c*slChunk + s.taken - 1)
}

// First returns the first node, or nil.
func (s *skiplist) First() *slNode { return s.head.next }

// Last returns the last node, or nil.
func (s *skiplist) Last() *slNode { return s.tail }

// SeekGE returns the first node with key >= k, or nil.
func (s *skiplist) SeekGE(k []byte) *slNode { return s.seekGE(k, false) }

// SeekLT returns the last node with key < k, or nil.
func (s *skiplist) SeekLT(k []byte) *slNode {
	n := s.seekGE(k, false)
	if n == nil {
		return s.tail
	}
	return n.prev
}

// Next returns the node after n, or nil.
func (n *slNode) Next() *slNode { return n.next }

// frozenKey returns key as a string without copying it: a key stored in a
// skiplist is never modified.
func frozenKey(key []byte) string {
	if len(key) == 0 {
		return ""
	}
	return unsafe.String(&key[0], len(key))
}

// Prev returns the node before n, or nil.
func (n *slNode) Prev() *slNode { return n.prev }
