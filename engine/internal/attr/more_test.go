package attr

import (
	"strconv"
	"strings"
	"testing"
)

func TestCompareScalars(t *testing.T) {
	tests := []struct {
		a, b Value
		want int
		ok   bool
	}{
		{Str("a"), Str("b"), -1, true},
		{Str("b"), Str("a"), 1, true},
		{Str("a"), Str("a"), 0, true},
		{Str("Z"), Str("a"), -1, true},
		{Bin([]byte{0xff}), Bin([]byte{0x00, 0x01}), 1, true},
		{MustNum("-1"), MustNum("0.5"), -1, true},
		{Num("bad"), MustNum("1"), 0, false},
		{Str("1"), MustNum("1"), 0, false},
		{List(), List(), 0, false},
	}
	for _, tc := range tests {
		got, ok := Compare(tc.a, tc.b)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Compare(%v, %v) = %d,%v want %d,%v", tc.a, tc.b, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLargeSets(t *testing.T) {
	var a, b []string
	for i := 0; i < 40; i++ {
		a = append(a, strconv.Itoa(i))
		b = append(b, strconv.Itoa(39-i))
	}
	if !Equal(StrSet(a...), StrSet(b...)) || !Equal(NumSet(a...), NumSet(b...)) {
		t.Error("large equal sets differ")
	}
	b[0] = "x"
	if Equal(StrSet(a...), StrSet(b...)) {
		t.Error("large different sets equal")
	}
	if err := CheckSet(StrSet(a...)); err != nil {
		t.Error(err)
	}
	dup := append(append([]string{}, a...), "7")
	if err := CheckSet(StrSet(dup...)); err == nil || !strings.Contains(err.Error(), "contains duplicates") {
		t.Errorf("duplicate in large set: %v", err)
	}
	var bs [][]byte
	for i := 0; i < 12; i++ {
		bs = append(bs, []byte{byte(i)})
	}
	if err := CheckSet(BinSet(bs...)); err != nil {
		t.Error(err)
	}
	if err := CheckSet(BinSet(append(bs, []byte{3})...)); err == nil {
		t.Error("duplicate binary accepted")
	}
	if !StrSet("a").IsSet() || Str("a").IsSet() {
		t.Error("IsSet")
	}
}

func TestAppendStringEscapes(t *testing.T) {
	v := Str("a\x00b\x1f\t\r\n\"\\\u2028\u2029\xff<>&é")
	got := string(v.AppendJSON(nil))
	want := `{"S":"a\u0000b\u001f\t\r\n\"\\\u2028\u2029\ufffd<>&é"}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var back Value
	if err := back.UnmarshalJSON([]byte(got)); err != nil || back.S != "a\x00b\x1f\t\r\n\"\\\u2028\u2029\ufffd<>&é" {
		t.Errorf("decode: %q %v", back.S, err)
	}
	// Escapes of every kind decode, lone surrogates become U+FFFD.
	var x Value
	if err := x.UnmarshalJSON([]byte(`{"S":"\/\b\f\u00E9\ud800x\ud83d\ude00"}`)); err != nil || x.S != "/\b\fé\ufffdx😀" {
		t.Errorf("escapes: %q %v", x.S, err)
	}
	for _, bad := range []string{`{"S":"\u12"}`, `{"S":"\u12G4"}`, `{"S":"\`, `{"S":"a\`} {
		if err := x.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestNumberHelpers(t *testing.T) {
	n, err := MustNum("123.4500").AsNumber()
	if err != nil || n.Digits() != 5 || NumberValue(n).S != "123.45" {
		t.Errorf("got %v %v", n, err)
	}
	if ValueSize(Str("abc")) != 3 || ValueSize(Value{}) != 0 {
		t.Error("ValueSize")
	}
	if !EqualItems(Item{"a": Str("x")}, Item{"a": Str("x")}) || EqualItems(Item{"a": Str("x")}, Item{"b": Str("x")}) || EqualItems(Item{"a": Str("x")}, Item{}) {
		t.Error("EqualItems")
	}
}

func TestSkipUnknownMembers(t *testing.T) {
	var v Value
	in := `{"Extra":{"a":[1,-2.5e3,true,false,null,"s",{}],"b":[]},"S":"x","More":1e999}`
	if err := v.UnmarshalJSON([]byte(in)); err != nil || v.S != "x" {
		t.Errorf("got %v %v", v, err)
	}
	for _, bad := range []string{`{"Extra":[1,],"S":"x"}`, `{"Extra":{"a"},"S":"x"}`, `{"Extra":-,"S":"x"}`, `{"Extra":tru,"S":"x"}`} {
		if err := v.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
