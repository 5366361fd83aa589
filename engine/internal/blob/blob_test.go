package blob

import (
	"strings"
	"testing"
)

// TestBlob: a blob hands back the key and JSON it was made of, for empty
// and large parts, and its header is 12 bytes.
func TestBlob(t *testing.T) {
	if HeaderSize != 12 {
		t.Errorf("Header is %d bytes, want 12", HeaderSize)
	}
	big := strings.Repeat("j", 70_000)
	for _, c := range []struct{ key, json string }{
		{"", ""}, {"k", ""}, {"", `{"a":1}`}, {"key\x00\x01", `{"a":{"S":"b"}}`}, {"k", big},
	} {
		h := New([]byte(c.key), []byte(c.json), 7)
		if string(h.Key()) != c.key || h.KeyString() != c.key || string(h.JSON()) != c.json || h.JSONString() != c.json || h.Size != 7 {
			t.Errorf("New(%q, %.20q) gives back %q, %.20q, size %d", c.key, c.json, h.Key(), h.JSON(), h.Size)
		}
		if h.JSON() == nil {
			t.Errorf("New(%q, %.20q): nil JSON", c.key, c.json)
		}
	}
}
