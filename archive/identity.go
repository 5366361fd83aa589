package archive

import (
	"hash/maphash"

	"github.com/ttl-archiver/archiver/event"
)

// identity is an event's identity (see [Identity]) in the form the reader
// de-duplicates: an expiry's ID (event.IDHasher) as its digest's 16
// bytes, an event ID of 32 lowercase hex digits, the form DynamoDB
// Streams gives, as its 16 bytes (no allocation, a cheap hash), anything
// else as the string Identity returns. The three forms never meet: each
// has a set of its own, and a string identity is never 32 lowercase hex
// digits, so the mapping is exact.
type identity struct {
	hex  [16]byte
	kind idKind
	s    string
}

// idKind says which form an identity has.
type idKind uint8

const (
	idString idKind = iota // s
	idHex                  // hex: an event ID
	idExpiry               // hex: an expiry's digest
)

// expiryIdentity is the identity of an expiry whose ID's digest is d.
func expiryIdentity(d [event.ExpiryDigestSize]byte) identity {
	return identity{hex: d, kind: idExpiry}
}

// newIdentity returns e's identity; x computes an expiry's, and a nil x
// gives every event its event ID's (a partition of one Region, see
// group).
func newIdentity(e *event.Event, x *event.IDHasher) identity {
	if x != nil {
		if d, ok := x.Digest(e); ok {
			return expiryIdentity(d)
		}
	}
	var id identity
	if e.DeadLetter == nil && len(e.EventID) == 32 {
		id.kind = idHex
		for i := range id.hex {
			hi, ok1 := hexDigit(e.EventID[2*i])
			lo, ok2 := hexDigit(e.EventID[2*i+1])
			if !ok1 || !ok2 {
				id.kind = idString
				break
			}
			id.hex[i] = hi<<4 | lo
		}
		if id.kind == idHex {
			return id
		}
		id.hex = [16]byte{}
	}
	id.s = Identity(e)
	return id
}

// none reports whether the identity is empty (an event without an ID).
func (id *identity) none() bool { return id.kind == idString && id.s == "" }

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// identitySet is a set of identities: the reader's de-duplication within
// one table and hour.
type identitySet struct {
	hex, expiry hexSet
	str         map[string]struct{}
}

// add adds id and reports whether it was new.
func (s *identitySet) add(id *identity) bool {
	switch id.kind {
	case idHex:
		return s.hex.add(&id.hex)
	case idExpiry:
		return s.expiry.add(&id.hex)
	}
	if s.str == nil {
		s.str = map[string]struct{}{}
	}
	n := len(s.str)
	s.str[id.s] = struct{}{}
	return len(s.str) > n
}

// reset empties the set (keeping its memory for the next table and hour).
func (s *identitySet) reset() {
	s.hex.reset()
	s.expiry.reset()
	clear(s.str)
}

// hexSet is a set of 16-byte IDs: open addressing with linear probing in
// a table kept at most half full, hashed with a seed of its own (an
// archive cannot be crafted to make it slow). An empty slot holds zeros,
// so the zero ID is kept aside (hasZero). It holds no pointers, so the GC
// never scans it.
type hexSet struct {
	seed    maphash.Seed
	slots   [][16]byte // a power of two of them
	n       int
	hasZero bool
}

// add adds id and reports whether it was new.
func (s *hexSet) add(id *[16]byte) bool {
	if *id == [16]byte{} {
		had := s.hasZero
		s.hasZero = true
		return !had
	}
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := maphash.Bytes(s.seed, id[:]) & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if *sl == [16]byte{} {
			*sl = *id
			s.n++
			return true
		}
		if *sl == *id {
			return false
		}
	}
}

// grow doubles the table (1024 slots at first) and re-inserts the IDs.
func (s *hexSet) grow() {
	old := s.slots
	if old == nil {
		s.seed = maphash.MakeSeed()
	}
	s.slots, s.n = make([][16]byte, max(1024, 2*len(old))), 0
	for i := range old {
		if old[i] != [16]byte{} {
			s.add(&old[i])
		}
	}
}

// reset empties the set, keeping its table.
func (s *hexSet) reset() {
	clear(s.slots)
	s.n, s.hasZero = 0, false
}
