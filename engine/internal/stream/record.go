package stream

import (
	"hash/fnv"
	"math"
	"strings"
	"unsafe"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/blob"
)

// record is a stream record kept compactly (48 bytes): only what varies
// between records is stored (the key and images and a few numbers);
// GetRecords renders the rest of the wire JSON around it. An image is the
// JSON of a blob (package blob), never modified, held by one pointer: for a
// write's record, the very blob of the stored item
// (EncodedChange.NewBlob, OldBlob), so the record costs no copy of the item.
//
// The Keys JSON has no bytes of its own when an image holds the key
// attributes (the engine's images always do): the record keeps where their
// members are in that image (keysIn), and Keys is rendered as "{", the
// first member, "," and the second, "}". Otherwise (KEYS_ONLY, NEW_IMAGE on
// a REMOVE, OLD_IMAGE on an INSERT, records whose images do not hold the
// keys) the Keys JSON is the key of the blob in a slot (keysHead), a blob
// the stream made, whose JSON is that slot's image or empty.
type record struct {
	seq  uint64
	at   int64           // creation time, unix nanoseconds
	img  [2]*blob.Header // the NewImage and OldImage slots; nil, or a blob of empty JSON: absent
	size uint32          // SizeBytes
	k    [2]uint32       // keysIn: offsets of the Keys members in img[slot]'s JSON (k[1] = 0: one member)
	ev   uint8           // index into Stream.events
	svc  bool            // TTL delete: carries userIdentity
	kin  uint8           // keysHead or keysIn, plus the slot (newSlot, oldSlot)
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
	if rec.img[slot] == nil {
		return ""
	}
	return rec.img[slot].JSONString()
}

func (rec *record) newImg() string { return rec.image(newSlot) }
func (rec *record) oldImg() string { return rec.image(oldSlot) }

// appendKeys appends the record's Keys JSON to b.
func (rec *record) appendKeys(b []byte) []byte {
	src := rec.img[rec.slot()]
	if rec.kin&keysIn == 0 {
		return append(b, src.Key()...)
	}
	js := src.JSON()
	b = append(b, '{')
	b = append(b, js[rec.k[0]:attr.MemberEnd(js, int(rec.k[0]))]...)
	if rec.k[1] != 0 {
		b = append(b, ',')
		b = append(b, js[rec.k[1]:attr.MemberEnd(js, int(rec.k[1]))]...)
	}
	return append(b, '}')
}

// keysLen is the length of the Keys JSON.
func (rec *record) keysLen() int {
	src := rec.img[rec.slot()]
	if rec.kin&keysIn == 0 {
		return int(src.KLen)
	}
	js := src.JSON()
	n := 2 + attr.MemberEnd(js, int(rec.k[0])) - int(rec.k[0])
	if rec.k[1] != 0 {
		n += 1 + attr.MemberEnd(js, int(rec.k[1])) - int(rec.k[1])
	}
	return n
}

// dataLen is the length of the record's JSON.
func (rec *record) dataLen() int { return rec.keysLen() + len(rec.newImg()) + len(rec.oldImg()) }

// setCopies sets the record's JSON to copies of keys and of the images
// (empty: absent); the Keys JSON is the key of the NewImage slot's blob.
func (rec *record) setCopies(keys, newImg, oldImg []byte) {
	rec.img[newSlot] = blob.New(keys, newImg, 0)
	rec.img[oldSlot] = nil
	if len(oldImg) > 0 {
		rec.img[oldSlot] = blob.New(nil, oldImg, 0)
	}
	rec.kin = keysHead | newSlot
}

// setImages sets the record's images to the blobs given (nil: absent),
// kept as they are, and its keys from keys (copied when kept): as members
// of an image that holds them, else as the key of a blob the stream makes
// in a slot, with that slot's image.
func (rec *record) setImages(keys []byte, newImg, oldImg *blob.Header) {
	rec.img = [2]*blob.Header{newImg, oldImg}
	if m0, m1, ok := splitMembers(keys); ok {
		for slot := range rec.img {
			if rec.findMembers(slot, m0, m1) {
				return
			}
		}
	}
	slot := newSlot
	if newImg != nil && oldImg == nil {
		slot = oldSlot
	}
	var img []byte
	if rec.img[slot] != nil {
		img = rec.img[slot].JSON() // both images kept, neither holds the keys: a copy
	}
	rec.img[slot] = blob.New(keys, img, 0)
	rec.kin = keysHead | uint8(slot)
}

// findMembers looks for the members m0 and m1 ("" when none) in the image
// of slot and, when both are there, makes the record's keys those members.
// Any occurrence of a member's exact text will do (it renders the same
// bytes), provided attr.MemberEnd ends it where the text ends.
func (rec *record) findMembers(slot int, m0, m1 string) bool {
	if rec.img[slot] == nil {
		return false
	}
	js := rec.img[slot].JSON()
	img := frozen(js)
	if img == "" || uint64(len(img)) > math.MaxUint32 {
		return false
	}
	var k [2]uint32
	for i, m := range [2]string{m0, m1} {
		if m == "" {
			break
		}
		off := strings.Index(img, m)
		if off < 1 || attr.MemberEnd(js, off) != off+len(m) {
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
