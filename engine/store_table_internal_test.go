package engine

import (
	"testing"
	"unsafe"

	"github.com/ttl-archiver/archiver/engine/internal/blob"
)

// TestEntryIsBlob: an entry has blob.Header's layout (entry.blob converts
// one to the other), and gives back the key and JSON it was made of.
func TestEntryIsBlob(t *testing.T) {
	var e entry
	var h blob.Header
	if unsafe.Sizeof(e) != unsafe.Sizeof(h) || unsafe.Offsetof(e.size) != unsafe.Offsetof(h.Size) ||
		unsafe.Offsetof(e.klen) != unsafe.Offsetof(h.KLen) || unsafe.Offsetof(e.dlen) != unsafe.Offsetof(h.DLen) {
		t.Fatal("entry's layout is not blob.Header's")
	}
	ne := newStoredEntry([]byte("key\x00\x01"), []byte(`{"a":{"S":"b"}}`), 42)
	if string(ne.key()) != "key\x00\x01" || string(ne.raw()) != `{"a":{"S":"b"}}` || ne.size != 42 || ne.blob().Size != 42 {
		t.Errorf("entry gives back %q, %q, size %d", ne.key(), ne.raw(), ne.size)
	}
}
