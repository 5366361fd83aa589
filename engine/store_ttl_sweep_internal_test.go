package engine

import (
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// TestKeysJSONMatchesEncoder: the sweep's stream keys, cut out of the
// stored JSON, are byte for byte what attr.AppendItemJSON writes (the
// stream picks the shard by hashing them), and members() walks nested
// values correctly.
func TestKeysJSONMatchesEncoder(t *testing.T) {
	nested := attr.Map(attr.Item{"x": attr.List(attr.Str(`}"],{`), attr.MustNum("1.5")), "y": attr.Map(nil)})
	for _, k := range []keyDef{
		{Hash: "pk", Range: "sk"},
		{Hash: "zz", Range: "aa"},
		{Hash: `we"ird\key`, Range: "ü<&>"},
		{Hash: "only"},
	} {
		it := attr.Item{k.Hash: attr.Str("h\x00\"v"), "a": nested, "m": attr.Bin([]byte{0, 1}), "zzz": attr.StrSet("b", "a")}
		if k.Range != "" {
			it[k.Range] = attr.MustNum("-12.5e3")
		}
		raw := attr.AppendItemJSON(nil, it)
		tb := &table{key: k}
		got := keysJSON(nil, raw, tb.keyToks())
		want := attr.AppendItemJSON(nil, k.project(it))
		if string(got) != string(want) {
			t.Errorf("%+v: keysJSON %s, encoder %s", k, got, want)
		}
		n := 0
		members(raw, func(name, val []byte) bool {
			var v attr.Value
			if err := v.UnmarshalJSON(val); err != nil {
				t.Errorf("member %s: %v", name, err)
			}
			n++
			return true
		})
		if n != len(it) {
			t.Errorf("%+v: members saw %d of %d attributes", k, n, len(it))
		}
	}
}
