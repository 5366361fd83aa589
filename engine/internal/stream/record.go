package stream

import (
	"hash/fnv"
	"math"
	"strings"
	"unsafe"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// record is a stream record kept compactly (64 bytes): only what varies
// between records is stored (the key and image JSON and a few numbers);
// GetRecords renders the rest of the wire JSON around it. The JSON is held
// as strings (never modified): an image may be the very bytes of a stored
// item (EncodedChange.Shared), so a record of a write costs no copy of the
// item.
//
// The Keys JSON has no string of its own when an image holds the key
// attributes (the engine's images always do): the record keeps where their
// members are in that image (keysIn), and Keys is rendered as "{", the
// first member, "," and the second, "}". Otherwise (KEYS_ONLY, NEW_IMAGE on
// a REMOVE, OLD_IMAGE on an INSERT, records whose images do not hold the
// keys) the Keys JSON is stored at the head of an image slot, before the
// image (keysHead).
type record struct {
	seq  uint64
	at   int64     // creation time, unix nanoseconds
	img  [2]string // the NewImage and OldImage slots; an image is empty when absent
	size uint32    // SizeBytes
	// k says where the Keys JSON is: with keysHead, k[0] is its length at
	// the head of img[slot]; with keysIn, k[0] and k[1] are the offsets of
	// its members in img[slot] (k[1] = 0: one member).
	k   [2]uint32
	ev  uint8 // index into Stream.events
	svc bool  // TTL delete: carries userIdentity
	kin uint8 // keysHead or keysIn, plus the slot (newSlot, oldSlot)
}

// Image slots of a record, and where its keys are (record.kin).
const (
	newSlot  = 0
	oldSlot  = 1
	keysHead = 0 << 1
	keysIn   = 1 << 1
)

// slot is the image slot that holds the Keys JSON or its members.
func (rec *record) slot() int { return int(rec.kin & 1) }

// image returns the image of a slot ("" when absent).
func (rec *record) image(slot int) string {
	if rec.kin == keysHead|uint8(slot) {
		return rec.img[slot][rec.k[0]:]
	}
	return rec.img[slot]
}

func (rec *record) newImg() string { return rec.image(newSlot) }
func (rec *record) oldImg() string { return rec.image(oldSlot) }

// appendKeys appends the record's Keys JSON to b.
func (rec *record) appendKeys(b []byte) []byte {
	src := rec.img[rec.slot()]
	if rec.kin&keysIn == 0 {
		return append(b, src[:rec.k[0]]...)
	}
	b = append(b, '{')
	b = append(b, src[rec.k[0]:memberEnd(src, rec.k[0])]...)
	if rec.k[1] != 0 {
		b = append(b, ',')
		b = append(b, src[rec.k[1]:memberEnd(src, rec.k[1])]...)
	}
	return append(b, '}')
}

// keysLen is the length of the Keys JSON.
func (rec *record) keysLen() int {
	if rec.kin&keysIn == 0 {
		return int(rec.k[0])
	}
	src := rec.img[rec.slot()]
	n := 2 + memberEnd(src, rec.k[0]) - int(rec.k[0])
	if rec.k[1] != 0 {
		n += 1 + memberEnd(src, rec.k[1]) - int(rec.k[1])
	}
	return n
}

// dataLen is the length of the record's JSON.
func (rec *record) dataLen() int { return rec.keysLen() + len(rec.newImg()) + len(rec.oldImg()) }

// memberEnd is attr.MemberEnd over a string of a record, at an offset the
// record keeps (one that starts a member).
func memberEnd(s string, off uint32) int {
	return attr.MemberEnd(unfrozen(s), int(off))
}

// setConcat sets the record's JSON from data, which holds Keys, then
// NewImage (up to nEnd), then OldImage, and which no one modifies
// afterwards: the Keys JSON stays at the head of the NewImage slot.
func (rec *record) setConcat(data []byte, kEnd, nEnd int) {
	s := frozen(data)
	rec.img = [2]string{s[:nEnd], s[nEnd:]}
	rec.k = [2]uint32{uint32(kEnd), 0}
	rec.kin = keysHead | newSlot
}

// setShared sets the record's JSON from keys (copied when kept) and the
// images, which are kept as they are: the keys as members of an image that
// holds them, else at the head of a slot, before its image.
func (rec *record) setShared(keys []byte, newImg, oldImg string) {
	rec.img = [2]string{newImg, oldImg}
	if m0, m1, ok := splitMembers(keys); ok {
		for slot := range rec.img {
			if rec.findMembers(slot, m0, m1) {
				return
			}
		}
	}
	slot := newSlot
	if newImg != "" && oldImg == "" {
		slot = oldSlot
	}
	rec.img[slot] = string(keys) + rec.img[slot] // one allocation (and a copy of the image only when both are kept)
	rec.k = [2]uint32{uint32(len(keys)), 0}
	rec.kin = keysHead | uint8(slot)
}

// findMembers looks for the members m0 and m1 ("" when none) in the image
// of slot and, when both are there, makes the record's keys those members.
// Any occurrence of a member's exact text will do (it renders the same
// bytes), provided attr.MemberEnd ends it where the text ends.
func (rec *record) findMembers(slot int, m0, m1 string) bool {
	img := rec.img[slot]
	if img == "" || uint64(len(img)) > math.MaxUint32 {
		return false
	}
	var k [2]uint32
	for i, m := range [2]string{m0, m1} {
		if m == "" {
			break
		}
		off := strings.Index(img, m)
		if off < 1 || memberEnd(img, uint32(off)) != off+len(m) {
			return false
		}
		k[i] = uint32(off)
	}
	rec.k = k
	rec.kin = keysIn | uint8(slot)
	return true
}

// splitMembers splits a compact JSON object of one or two members
// ({m0} or {m0,m1}) into its members; ok is false for any other text.
func splitMembers(keys []byte) (m0, m1 string, ok bool) {
	n := len(keys)
	if n < 2 || keys[0] != '{' || keys[n-1] != '}' {
		return "", "", false
	}
	e0 := attr.MemberEnd(keys, 1)
	switch {
	case e0 == n-1:
		return frozen(keys[1:e0]), "", true
	case e0 > 1 && e0 < n-1 && keys[e0] == ',':
		if e1 := attr.MemberEnd(keys, e0+1); e1 == n-1 {
			return frozen(keys[1:e0]), frozen(keys[e0+1 : e1]), true
		}
	}
	return "", "", false
}

// keyHash is the hash of a record's Keys JSON that picks its shard.
func keyHash(keys []byte) uint64 {
	hf := fnv.New64a()
	hf.Write(keys)
	return mix64(hf.Sum64())
}

// frozen returns b as a string without copying it: b must never be
// modified afterwards.
func frozen(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// unfrozen returns s's bytes without copying them: they must not be
// modified.
func unfrozen(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
