package ddbjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// readCanonical reads data whole with the canonical reader, building the
// item or (skip) only checking it.
func readCanonical(data []byte, names *Interner, skip bool) (Item, bool) {
	c := Canonical{Scanner: NewScanner(data), Names: names, Skip: skip}
	item, ok := c.Item()
	return item, ok && len(c.Rest()) == 0
}

// checkCanonical fails t unless the canonical reader either declines data
// or reads what the checked reader reads, from bytes that are then the
// canonical JSON of that item; checking alone (Skip) agrees.
func checkCanonical(t *testing.T, data []byte) (read bool) {
	t.Helper()
	got, ok := readCanonical(data, &Interner{}, false)
	if _, skipOK := readCanonical(data, nil, true); skipOK != ok {
		t.Fatalf("checking %s says %v, reading says %v", data, skipOK, ok)
	}
	if !ok {
		return false
	}
	want, err := UnmarshalItem(data)
	if err != nil {
		t.Fatalf("canonical reader accepted %s, UnmarshalItem refused it: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("canonical reader differs from UnmarshalItem for %s\ncanonical: %s", data, AppendItem(nil, got))
	}
	if again := AppendItem(nil, got); string(again) != string(data) {
		t.Fatalf("canonical reader accepted %s, which AppendItem writes as %s", data, again)
	}
	return true
}

// canonicalSeeds are items as AppendItem writes them, and near misses.
var canonicalSeeds = []string{
	`{"a":{"N":"1.50"},"b":{"B":"aGk="},"m":{"M":{"y":{"BOOL":false},"z":{"NULL":true}}},"ss":{"SS":["x"]}}`,
	`{"bs":{"BS":["AQ==","AgM="]},"l":{"L":[{"S":"x"},{"N":"0"},{"NULL":true},{"M":{}}]},"ns":{"NS":["1","2.50"]},"u":{"S":"ünï"}}`,
	`{}`,
	`{"a":{"S":"x\"y"},"j":{"S":"{\"k\":\"v\"}\n\t\u0001\u2028\\"},"ss":{"SS":["\"","\\"]}}`, // AppendString's escapes
	`{"b":{"S":"x"},"a":{"S":"y"}}`,     // out of order
	`{"a":{"S":"x"},"a":{"S":"y"}}`,     // twice
	`{"a":{"S":"\u0041"}}`,              // an escape AppendString does not write
	`{"a":{"SS":["\/"]}}`,               // another
	`{"a\"":{"S":"x"}}`,                 // an escape in a name
	`{"a":{"B":"aGl="}}`,                // not canonical base64
	`{"a":{"NULL":false}}`,              // refused by UnmarshalItem
	`{"a":{"N":"1e"}}`,                  // not a number
	`{"a": {"S":"x"}}`,                  // whitespace
	"{\"a\":{\"S\":\"\u2028\"}}",        // escaped by AppendString
	"{\"a\":{\"S\":\"\xff\\\"\"}}",      // invalid UTF-8 beside an escape
	`{"a":{"L":[{"SS":[]},{"BS":[]}]}}`, // empty sets
}

func TestCanonicalReadsWhatAppendItemWrites(t *testing.T) {
	for _, s := range canonicalSeeds[:4] {
		if !checkCanonical(t, []byte(s)) {
			t.Errorf("canonical reader declined %s", s)
		}
	}
	for _, s := range canonicalSeeds[4:15] {
		if checkCanonical(t, []byte(s)) {
			t.Errorf("canonical reader read %s, which AppendItem never writes", s)
		}
	}
	item := Item{"s": &types.AttributeValueMemberS{Value: "plain"}, "e": &types.AttributeValueMemberBOOL{}}
	if !checkCanonical(t, AppendItem(nil, item)) {
		t.Errorf("canonical reader declined %s", AppendItem(nil, item))
	}
}

// FuzzCanonicalItem: on any input the canonical reader either declines or
// reads what UnmarshalItem reads, from the bytes AppendItem writes for it.
func FuzzCanonicalItem(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCanonical(t, data)
	})
}

// TestInternerString: String and Intern hand out one string per text,
// whichever met it first; a nil Interner hands back its argument.
func TestInternerString(t *testing.T) {
	var in Interner
	a := in.String(string([]byte("arn:aws:dynamodb:eu-west-1:1:table/T/stream/x")))
	b := in.String(string([]byte("arn:aws:dynamodb:eu-west-1:1:table/T/stream/x")))
	c := in.Intern([]byte("arn:aws:dynamodb:eu-west-1:1:table/T/stream/x"))
	if unsafe.StringData(a) != unsafe.StringData(b) || unsafe.StringData(a) != unsafe.StringData(c) {
		t.Error("the same text gave different strings")
	}
	var none *Interner
	if s := "x"; none.String(s) != s {
		t.Error("a nil Interner changed its argument")
	}
}

// FuzzUnquote holds unquote to encoding/json on string contents holding
// no raw quote (as skipString delimits them): whatever unquote decodes to
// valid UTF-8, encoding/json decodes to the same; whatever it refuses,
// encoding/json refuses too.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`plain`, `a\"b\\c\/d\b\f\n\r\t`, `\u0041\u00e9\u2028`, `\ud83d\ude00`, `\ud83d`, `\ude00x`, `\ud83d\u0041`, `\u12`, `\x`, "\x01", `\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i < len(b); i++ {
			if b[i] == '\\' {
				i++
			} else if b[i] == '"' {
				return // not the content of one string
			}
		}
		got, ok := unquote(nil, b)
		var want string
		err := json.Unmarshal(append(append([]byte{'"'}, b...), '"'), &want)
		switch {
		case !ok && err == nil:
			t.Fatalf("unquote refused %q, encoding/json reads %q", b, want)
		case ok && err != nil:
			if utf8.Valid(got) {
				t.Fatalf("unquote read %q as %q, encoding/json refuses it: %v", b, got, err)
			}
		case ok && utf8.Valid(got) && string(got) != want:
			t.Fatalf("%q: unquote %q, encoding/json %q", b, got, want)
		}
	})
}

// BenchmarkCanonicalEscapes reads an item holding a 1 KB JSON document in
// a string, with the escapes AppendString writes (quotes, newlines) and
// without (the same text with none to escape), against UnmarshalItem.
func BenchmarkCanonicalEscapes(b *testing.B) {
	doc := `{"user":"u1","cart":[` + strings.Repeat(`{"sku":"sku-4242","qty":1,"note":"gift`+"\n"+`wrap"},`, 20) + `{}]}`
	plain := strings.NewReplacer(`"`, `'`, "\n", " ").Replace(doc)
	for _, tc := range []struct{ name, v string }{{"no escapes", plain}, {"escapes", doc}} {
		data := AppendItem(nil, Item{"pk": &types.AttributeValueMemberS{Value: "a"}, "doc": &types.AttributeValueMemberS{Value: tc.v}})
		b.Run(tc.name+"/Canonical", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var in Interner
			for b.Loop() {
				if _, ok := readCanonical(data, &in, false); !ok {
					b.Fatal("declined")
				}
			}
		})
		b.Run(tc.name+"/UnmarshalItem", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := UnmarshalItem(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
