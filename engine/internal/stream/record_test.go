package stream

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/blob"
)

// TestRecordSize: a record is 48 bytes; growing it costs every stored
// record.
func TestRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(record{}); n != 48 {
		t.Errorf("record is %d bytes, want 48", n)
	}
}

// recordKeyCases are key schemas and items whose images hold the keys in
// ways a search for the key's members could get wrong: names with escapes,
// a range key sorting before the hash key, binary and number keys, the
// key's exact text nested in a map before the real member, a longer name
// that starts like the key's, a string holding the member's text.
func recordKeyCases() []struct {
	name        string
	hash, rng   string
	keys, extra attr.Item
} {
	decoy := attr.Item{"pk": attr.Str("a")}
	return []struct {
		name        string
		hash, rng   string
		keys, extra attr.Item
	}{
		{"hash only", "pk", "", attr.Item{"pk": attr.Str("a")}, attr.Item{"v": attr.Num("1")}},
		{"hash and number range", "pk", "sk", attr.Item{"pk": attr.Str("a"), "sk": attr.MustNum("-12.5e3")}, attr.Item{"data": attr.Str("xyz")}},
		{"range sorts first", "zz", "aa", attr.Item{"zz": attr.Str("h"), "aa": attr.Num("7")}, attr.Item{"mm": attr.Bool(true)}},
		{"escaped names and values", `we"ird\key`, "ü<&>", attr.Item{`we"ird\key`: attr.Str("h\x00\"v\\"), "ü<&>": attr.Bin([]byte{0, 1, 0xff})}, attr.Item{"\u2028": attr.Null()}},
		{"binary hash", "b", "", attr.Item{"b": attr.Bin([]byte("\x00\x00binary"))}, attr.Item{"c": attr.BinSet([]byte{1}, []byte{2})}},
		{"decoys", "pk", "", attr.Item{"pk": attr.Str("a")}, attr.Item{
			"a":   attr.Map(decoy),                           // {"pk":{"S":"a"}} nested, before the member
			"pk2": attr.Str("a"),                             // a name starting like the key's
			"pj":  attr.Str(`"pk":{"S":"a"}`),                // the member's text, escaped, in a string
			"l":   attr.List(attr.Map(decoy), attr.Str("a")), // and in a list
		}},
	}
}

// TestRecordKeys appends a record for every view type and event kind and
// every case of recordKeyCases, images shared or copied, and checks that it
// renders the Keys and images it was given, that its keys have no string of
// their own whenever a kept image holds them, and that Export and Apply
// carry it over.
func TestRecordKeys(t *testing.T) {
	for _, c := range recordKeyCases() {
		keys := attr.AppendItemJSON(nil, c.keys)
		item := func(v string) []byte {
			it := attr.CloneItem(c.extra)
			for n, val := range c.keys {
				it[n] = val
			}
			it["version"] = attr.Str(v)
			return attr.AppendItemJSON(nil, it)
		}
		for _, view := range []string{KeysOnly, NewImage, OldImage, NewAndOldImages} {
			for _, ev := range []string{"INSERT", "MODIFY", "REMOVE"} {
				for _, shared := range []bool{true, false} {
					name := fmt.Sprintf("%s/%s/%s/shared=%v", c.name, view, ev, shared)
					ch := EncodedChange{EventName: ev, Keys: keys, Size: 9}
					if ev != "INSERT" {
						ch.Old = item("old")
					}
					if ev != "REMOVE" {
						ch.New = item("new")
					}
					if shared {
						ch = sharedImages(ch)
					}
					held := view != KeysOnly && !(view == NewImage && ev == "REMOVE") && !(view == OldImage && ev == "INSERT")
					if in := checkRecordKeys(t, name, c.hash, c.rng, view, ch); in != held {
						t.Errorf("%s: keys in an image = %v, want %v", name, in, held)
					}
				}
			}
		}
	}
}

// sharedImages turns ch's images into blobs, keyed like stored items.
func sharedImages(ch EncodedChange) EncodedChange {
	if ch.New != nil {
		ch.NewBlob, ch.New = blob.New([]byte("storage key"), ch.New, 0), nil
	}
	if ch.Old != nil {
		ch.OldBlob, ch.Old = blob.New([]byte("storage key"), ch.Old, 0), nil
	}
	return ch
}

// checkRecordKeys appends ch to a fresh stream of view type view and checks
// the record it makes, and its copy through Export and Apply. It reports
// whether the record found its keys in an image.
func checkRecordKeys(t *testing.T, name, hash, rng, view string, ch EncodedChange) bool {
	t.Helper()
	r := NewRegistry(Options{Now: newClock().Now})
	s := r.Create("", "t", view)
	s.SetKeySchema(hash, rng)
	if err := s.AppendEncoded(ch); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	wantNew, wantOld := "", ""
	if view == NewImage || view == NewAndOldImages {
		wantNew = string(imageJSON(ch.NewBlob, ch.New, true))
	}
	if view == OldImage || view == NewAndOldImages {
		wantOld = string(imageJSON(ch.OldBlob, ch.Old, true))
	}
	rec := s.shards[0].recs.at(0)
	check := func(how string, rec *record) {
		if got := string(rec.appendKeys(nil)); got != string(ch.Keys) {
			t.Errorf("%s%s: Keys %s, want %s", name, how, got, ch.Keys)
		}
		if rec.keysLen() != len(ch.Keys) {
			t.Errorf("%s%s: keysLen %d, want %d", name, how, rec.keysLen(), len(ch.Keys))
		}
		if rec.newImg() != wantNew || rec.oldImg() != wantOld {
			t.Errorf("%s%s: images %q %q, want %q %q", name, how, rec.newImg(), rec.oldImg(), wantNew, wantOld)
		}
		if rec.dataLen() != len(ch.Keys)+len(wantNew)+len(wantOld) {
			t.Errorf("%s%s: dataLen %d", name, how, rec.dataLen())
		}
	}
	check("", rec)
	for slot, b := range [2]*blob.Header{ch.NewBlob, ch.OldBlob} {
		if b != nil && rec.image(slot) != "" && rec.kin != keysHead|uint8(slot) && rec.img[slot] != b {
			t.Errorf("%s: slot %d holds a copy of the image's blob", name, slot)
		}
	}
	r2 := NewRegistry(Options{Now: newClock().Now})
	if err := r.Export(func(ev *Event) error { return r2.Apply(ev) }); err != nil {
		t.Fatalf("%s: export: %v", name, err)
	}
	check(" (exported)", r2.Lookup(s.ARN()).shards[0].recs.at(0))
	return rec.kin&keysIn != 0
}

// TestRecordKeysFallback: Keys that are not one or two members of a
// compact object, or whose members no image holds with the same text,
// are stored at the head of a slot, and still render as given.
func TestRecordKeysFallback(t *testing.T) {
	for _, c := range []struct {
		name, keys, img string
		found           bool // the members are found after all
	}{
		{"empty object", `{}`, `{"pk":{"S":"a"}}`, false},
		{"three members", `{"a":{"N":"1"},"b":{"N":"2"},"c":{"N":"3"}}`, `{"a":{"N":"1"},"b":{"N":"2"},"c":{"N":"3"}}`, false},
		{"scalar member cut short", `{"pk":1}`, `{"pk":12}`, false},
		{"member missing", `{"pk":{"S":"a"}}`, `{"pk":{"S":"b"}}`, false},
		{"second member missing", `{"pk":{"S":"a"},"sk":{"N":"1"}}`, `{"pk":{"S":"a"},"sk":{"N":"2"}}`, false},
		{"whitespace, same text", `{"pk": {"S":"a"}}`, `{"pk": {"S":"a"}}`, true},
		{"scalar member", `{"pk":1}`, `{"pk":1,"v":2}`, true},
	} {
		for _, view := range []string{NewImage, OldImage, NewAndOldImages} {
			name := c.name + "/" + view
			ch := sharedImages(EncodedChange{EventName: "MODIFY", Keys: []byte(c.keys), New: []byte(c.img), Old: []byte(c.img)})
			if in := checkRecordKeys(t, name, "pk", "", view, ch); in != c.found {
				t.Errorf("%s: keys in an image = %v, want %v", name, in, c.found)
			}
		}
	}
}

// TestSplitMembers: the members of compact objects of one or two members,
// nothing for anything else.
func TestSplitMembers(t *testing.T) {
	for _, c := range []struct {
		in     string
		m0, m1 string
		ok     bool
	}{
		{`{"a":{"S":"x"}}`, `"a":{"S":"x"}`, "", true},
		{`{"a":{"S":"x,}"},"b":{"N":"1"}}`, `"a":{"S":"x,}"}`, `"b":{"N":"1"}`, true},
		{`{"a\"b":{"L":[{"S":"]"}]}}`, `"a\"b":{"L":[{"S":"]"}]}`, "", true},
		{`{}`, "", "", false},
		{`{"a":1,"b":2,"c":3}`, "", "", false},
		{`{"a" :1}`, "", "", false},
		{`[1]`, "", "", false},
		{`{`, "", "", false},
		{``, "", "", false},
		{`{"a`, "", "", false},
		{`{"a":{"S":"x"},}`, "", "", false},
	} {
		m0, m1, ok := splitMembers([]byte(c.in))
		if m0 != c.m0 || m1 != c.m1 || ok != c.ok {
			t.Errorf("splitMembers(%s) = %q, %q, %v; want %q, %q, %v", c.in, m0, m1, ok, c.m0, c.m1, c.ok)
		}
	}
}
