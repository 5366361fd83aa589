package archive

import "github.com/ttl-archiver/archiver/event"

// identity is an event's identity (see [Identity]) in the form the reader
// de-duplicates: an event ID of 32 lowercase hex digits, the form
// DynamoDB Streams gives, as its 16 bytes (no allocation, a cheap hash),
// anything else as the string Identity returns. The two forms never meet:
// a string identity is never 32 lowercase hex digits, so the mapping is
// exact.
type identity struct {
	hex   [16]byte
	isHex bool
	s     string
}

// newIdentity returns e's identity.
func newIdentity(e *event.Event) identity {
	var id identity
	if e.DeadLetter == nil && len(e.EventID) == 32 {
		id.isHex = true
		for i := range id.hex {
			hi, ok1 := hexDigit(e.EventID[2*i])
			lo, ok2 := hexDigit(e.EventID[2*i+1])
			if !ok1 || !ok2 {
				id.isHex = false
				break
			}
			id.hex[i] = hi<<4 | lo
		}
		if id.isHex {
			return id
		}
		id.hex = [16]byte{}
	}
	id.s = Identity(e)
	return id
}

// none reports whether the identity is empty (an event without an ID).
func (id *identity) none() bool { return !id.isHex && id.s == "" }

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
	hex map[[16]byte]struct{}
	str map[string]struct{}
}

// add adds id and reports whether it was new.
func (s *identitySet) add(id *identity) bool {
	if id.isHex {
		if s.hex == nil {
			s.hex = map[[16]byte]struct{}{}
		}
		n := len(s.hex)
		s.hex[id.hex] = struct{}{}
		return len(s.hex) > n
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
	clear(s.hex)
	clear(s.str)
}
