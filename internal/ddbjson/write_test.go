package ddbjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// everyType is an item holding every DynamoDB attribute type, nested.
func everyType() Item {
	return Item{
		"pk":    &types.AttributeValueMemberS{Value: "user#1 \"quoted\" \n\t<&> é 😀 \u2028"},
		"n":     &types.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"},
		"frac":  &types.AttributeValueMemberN{Value: "-0.000000000000000000000000000000000001"},
		"exp":   &types.AttributeValueMemberN{Value: "1E+5"},
		"b":     &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 0xff, 0xfe}},
		"empty": &types.AttributeValueMemberB{Value: []byte{}},
		"ss":    &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":    &types.AttributeValueMemberNS{Value: []string{"1", "2.50"}},
		"bs":    &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"null":  &types.AttributeValueMemberNULL{Value: true},
		"t":     &types.AttributeValueMemberBOOL{Value: true},
		"f":     &types.AttributeValueMemberBOOL{Value: false},
		"m": &types.AttributeValueMemberM{Value: Item{
			"inner": &types.AttributeValueMemberN{Value: "7"},
			"deep":  &types.AttributeValueMemberM{Value: Item{"x": &types.AttributeValueMemberL{Value: []types.AttributeValue{}}}},
		}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "x"},
			&types.AttributeValueMemberN{Value: "0"},
			&types.AttributeValueMemberNULL{Value: true},
			&types.AttributeValueMemberM{Value: Item{}},
		}},
	}
}

func TestItemRoundTripEveryType(t *testing.T) {
	item := everyType()
	b := AppendItem(nil, item)
	if !json.Valid(b) {
		t.Fatalf("not valid JSON: %s", b)
	}
	got, err := UnmarshalItem(b)
	if err != nil {
		t.Fatalf("UnmarshalItem: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(got, item) {
		t.Fatalf("round trip differs:\n got %s\nwant %s", AppendItem(nil, got), b)
	}
	if again := AppendItem(nil, got); string(again) != string(b) {
		t.Fatalf("rendering is not deterministic:\n%s\n%s", again, b)
	}
}

func TestMarshalItemExact(t *testing.T) {
	item := Item{
		"b":  &types.AttributeValueMemberB{Value: []byte("hi")},
		"a":  &types.AttributeValueMemberN{Value: "1.50"},
		"ss": &types.AttributeValueMemberSS{Value: []string{"x"}},
		"m":  &types.AttributeValueMemberM{Value: Item{"z": &types.AttributeValueMemberNULL{Value: true}, "y": &types.AttributeValueMemberBOOL{}}},
	}
	want := `{"a":{"N":"1.50"},"b":{"B":"aGk="},"m":{"M":{"y":{"BOOL":false},"z":{"NULL":true}}},"ss":{"SS":["x"]}}`
	if got := string(AppendItem(nil, item)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestPlainJSON(t *testing.T) {
	tests := []struct {
		name string
		av   types.AttributeValue
		want string
	}{
		{"string", &types.AttributeValueMemberS{Value: "a\"b"}, `"a\"b"`},
		{"big number keeps digits", &types.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"}, `12345678901234567890123456789012345678`},
		{"trailing zeros kept", &types.AttributeValueMemberN{Value: "1.50"}, `1.50`},
		{"exponent", &types.AttributeValueMemberN{Value: "1E+5"}, `1E+5`},
		{"plus sign repaired", &types.AttributeValueMemberN{Value: "+5"}, `5`},
		{"bare fraction repaired", &types.AttributeValueMemberN{Value: ".5"}, `0.5`},
		{"trailing dot repaired", &types.AttributeValueMemberN{Value: "-5."}, `-5`},
		{"leading zeros repaired", &types.AttributeValueMemberN{Value: "007"}, `7`},
		{"not a number stays a string", &types.AttributeValueMemberN{Value: "NaN"}, `"NaN"`},
		{"binary", &types.AttributeValueMemberB{Value: []byte("hi")}, `"aGk="`},
		{"string set", &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, `["a","b"]`},
		{"number set", &types.AttributeValueMemberNS{Value: []string{"1", "2.0"}}, `[1,2.0]`},
		{"binary set", &types.AttributeValueMemberBS{Value: [][]byte{[]byte("hi")}}, `["aGk="]`},
		{"null", &types.AttributeValueMemberNULL{Value: true}, `null`},
		{"bool", &types.AttributeValueMemberBOOL{Value: true}, `true`},
		{"map", &types.AttributeValueMemberM{Value: Item{"b": &types.AttributeValueMemberN{Value: "1"}, "a": &types.AttributeValueMemberS{Value: "x"}}}, `{"a":"x","b":1}`},
		{"list", &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "1"}, &types.AttributeValueMemberS{Value: "x"}}}, `[1,"x"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(AppendPlain(nil, Item{"v": tc.av}))
			want := `{"v":` + tc.want + `}`
			if got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("not valid JSON: %s", got)
			}
		})
	}
}

func TestValidNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-1": true, "+1": true, "1.5": true, ".5": true, "5.": true, "1e10": true, "1E-5": true,
		"": false, "-": false, ".": false, "e5": false, "1e": false, "1.2.3": false, "NaN": false, "Infinity": false, "0x10": false,
	} {
		if got := ValidNumber(s); got != want {
			t.Errorf("ValidNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzAppendString: AppendString's fast path writes exactly what its
// escaping loop writes, and that decodes (encoding/json) to what
// encoding/json makes of the same bytes.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "tab\there\nnl", "\x00\x1f\x7f\f\b", "héllo wörld", "\u2028\u2029", "bad \xff utf8", "0123456789abcdef\"tail"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString([]byte("x"), s)
		if slow := appendStringEscaped([]byte("x"), s, 0); string(got) != string(slow) {
			t.Fatalf("AppendString(%q) = %s, escaping loop %s", s, got[1:], slow[1:])
		}
		var back string
		if err := json.Unmarshal(got[1:], &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: not a JSON string: %v", s, got[1:], err)
		}
		ref, _ := json.Marshal(s)
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if back != want {
			t.Fatalf("AppendString(%q) decodes to %q, encoding/json's to %q", s, back, want)
		}
	})
}

// FuzzAppendBase64: the six-bytes-a-step encoder writes what
// base64.StdEncoding writes, for every length (each remainder and padding).
func FuzzAppendBase64(f *testing.F) {
	for n := range 20 {
		f.Add(bytes.Repeat([]byte{0xfb, 0xff, 0x00, 0x3e}, n)[:n*3/2])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := AppendBase64([]byte("x"), b)
		want := `x"` + base64.StdEncoding.EncodeToString(b) + `"`
		if string(got) != want {
			t.Fatalf("AppendBase64(%x) = %s, want %s", b, got, want)
		}
	})
}
