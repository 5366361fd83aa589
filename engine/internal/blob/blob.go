// Package blob is the memory layout of an item the engine stores, shared by
// the table that stores it and the streams whose records show it: one
// allocation with no pointers, a 12-byte Header, then a key, then a JSON
// document. The collector marks such an allocation without scanning it,
// and a stream record keeps an image as one pointer to it (the table's
// own, never copied) instead of a string of its JSON.
//
// A blob is immutable once made, and is only ever handled through the
// pointer New returns: its bytes follow its Header in memory, so a copy of
// a Header has none.
package blob

import "unsafe"

// Header starts a blob: the bytes after it are the key (KLen of them) and
// then the JSON (DLen-KLen).
type Header struct {
	Size int32  // what the maker wants kept with it (the engine: the item's size)
	KLen uint32 // length of the key
	DLen uint32 // length of the key and the JSON
}

// HeaderSize is the size of a Header, where the key starts.
const HeaderSize = unsafe.Sizeof(Header{})

// New returns a new blob holding copies of key and json.
func New(key, json []byte, size int32) *Header {
	n := int(HeaderSize) + len(key) + len(json)
	// At least 16 bytes: the runtime packs smaller pointer-free objects
	// together, and does not align one of an odd size.
	buf := make([]byte, n, max(n, 16))
	copy(buf[HeaderSize:], key)
	copy(buf[int(HeaderSize)+len(key):], json)
	h := (*Header)(unsafe.Pointer(&buf[0])) // 8-aligned, and longer than a Header
	h.Size, h.KLen, h.DLen = size, uint32(len(key)), uint32(len(key)+len(json))
	return h
}

// Key is the blob's key (capacity = length: appending to it copies; never
// modify it).
func (h *Header) Key() []byte {
	if h.KLen == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(h), HeaderSize)), h.KLen)
}

// JSON is the blob's JSON (capacity = length; never modify it). It is never
// nil, even when empty.
func (h *Header) JSON() []byte {
	if h.DLen == h.KLen {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(h), HeaderSize+uintptr(h.KLen))), h.DLen-h.KLen)
}

// KeyString is Key as a string, without copying.
func (h *Header) KeyString() string {
	if h.KLen == 0 {
		return ""
	}
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(h), HeaderSize)), h.KLen)
}

// JSONString is JSON as a string, without copying.
func (h *Header) JSONString() string {
	if h.DLen == h.KLen {
		return ""
	}
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(h), HeaderSize+uintptr(h.KLen))), h.DLen-h.KLen)
}
