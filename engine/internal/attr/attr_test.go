package attr

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

func TestParseNumber(t *testing.T) {
	tests := []struct {
		in, want string
		err      string // substring of the error message; "" for success
	}{
		{"12", "12", ""},
		{"-0.5", "-0.5", ""},
		{"+7", "7", ""},
		{"1e3", "1000", ""},
		{"1.5E+2", "150", ""},
		{"1.50", "1.5", ""},
		{"00012.3400", "12.34", ""},
		{"-0", "0", ""},
		{"0.000", "0", ""},
		{"0e999999999999", "0", ""},
		{".5", "0.5", ""},
		{"5.", "5", ""},
		{"123.456e-2", "1.23456", ""},
		{"123.456e-5", "0.00123456", ""},
		{"1E-130", "0." + strings.Repeat("0", 129) + "1", ""},
		{"9.9999999999999999999999999999999999999E+125", "99999999999999999999999999999999999999" + strings.Repeat("0", 88), ""},
		{"-9.9999999999999999999999999999999999999E+125", "-99999999999999999999999999999999999999" + strings.Repeat("0", 88), ""},
		{"12345678901234567890123456789012345678", "12345678901234567890123456789012345678", ""},
		{"1234567890123456789012345678901234567800000", "1234567890123456789012345678901234567800000", ""},
		{"123456789012345678901234567890123456789", "", "38 significant digits"},
		{"1E+126", "", "Number overflow"},
		{"-1E+126", "", "Number overflow"},
		{"1E-131", "", "Number underflow"},
		{"1e99999999999999999999", "", "Number overflow"},
		{"1e-99999999999999999999", "", "Number underflow"},
		{"", "", "The parameter cannot be converted to a numeric value"},
		{"b", "", "The parameter cannot be converted to a numeric value: b"},
		{"  ", "", "cannot be converted"},
		{" 1", "", "cannot be converted"},
		{"1 ", "", "cannot be converted"},
		{"abc", "", "cannot be converted"},
		{"1.2.3", "", "cannot be converted"},
		{"1e", "", "cannot be converted"},
		{"1e+", "", "cannot be converted"},
		{"--1", "", "cannot be converted"},
		{".", "", "cannot be converted"},
		{"+", "", "cannot be converted"},
		{"0x10", "", "cannot be converted"},
		{"NaN", "", "cannot be converted"},
		{"Infinity", "", "cannot be converted"},
		{"1_000", "", "cannot be converted"},
	}
	for _, tc := range tests {
		n, err := ParseNumber(tc.in)
		if tc.err != "" {
			var ae *awserr.Error
			if !errors.As(err, &ae) || ae.Code != awserr.CodeValidation || !strings.Contains(ae.Message, tc.err) {
				t.Errorf("ParseNumber(%q) = %v, %v; want ValidationException containing %q", tc.in, n, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseNumber(%q): %v", tc.in, err)
			continue
		}
		if got := n.String(); got != tc.want {
			t.Errorf("ParseNumber(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		// Canonical strings parse back to themselves.
		n2, err := ParseNumber(n.String())
		if err != nil || n2.Cmp(n) != 0 || n2.String() != n.String() {
			t.Errorf("round trip of %q: %v %v", tc.in, n2, err)
		}
	}
}

func mustParse(t testing.TB, s string) Number {
	t.Helper()
	n, err := ParseNumber(s)
	if err != nil {
		t.Fatalf("ParseNumber(%q): %v", s, err)
	}
	return n
}

// orderedNumbers is in strictly increasing numeric order.
var orderedNumbers = []string{
	"-9.9999999999999999999999999999999999999E+125",
	"-1e100", "-1000", "-999.5", "-100", "-12", "-11.9", "-10", "-2", "-1.5", "-1.25", "-1.2",
	"-1", "-0.99", "-0.123", "-0.12", "-0.1", "-1E-130",
	"0",
	"1E-130", "1e-5", "0.1", "0.12", "0.123", "0.99", "1", "1.2", "1.25", "1.5", "2", "10", "11.9", "12",
	"100", "999.5", "1000", "1e100", "9.9999999999999999999999999999999999999E+125",
}

func TestNumberCmpAndOrderedKey(t *testing.T) {
	for i, a := range orderedNumbers {
		for j, b := range orderedNumbers {
			na, nb := mustParse(t, a), mustParse(t, b)
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := na.Cmp(nb); got != want {
				t.Errorf("Cmp(%s, %s) = %d, want %d", a, b, got, want)
			}
			ka, kb := OrderedKey(MustNum(a)), OrderedKey(MustNum(b))
			if got := bytes.Compare(ka, kb); got != want {
				t.Errorf("OrderedKey order(%s, %s) = %d, want %d (%x vs %x)", a, b, got, want, ka, kb)
			}
			if c, ok := Compare(MustNum(a), MustNum(b)); !ok || c != want {
				t.Errorf("Compare(%s, %s) = %d,%v", a, b, c, ok)
			}
		}
	}
	// Equal values in different spellings encode identically.
	if !bytes.Equal(OrderedKey(Num("1.50")), OrderedKey(Num("15e-1"))) {
		t.Error("1.50 and 15e-1 encode differently")
	}
}

func TestOrderedKeyRandom(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	nums := make([]Number, 2000)
	for i := range nums {
		var b strings.Builder
		if r.Intn(2) == 0 {
			b.WriteByte('-')
		}
		for k := r.Intn(6) + 1; k > 0; k-- {
			b.WriteByte(byte('0' + r.Intn(10)))
		}
		if r.Intn(2) == 0 {
			b.WriteByte('.')
			for k := r.Intn(6) + 1; k > 0; k-- {
				b.WriteByte(byte('0' + r.Intn(10)))
			}
		}
		if r.Intn(3) == 0 {
			b.WriteString("e")
			b.WriteString(strings.TrimPrefix(string(rune('0'+r.Intn(10))), ""))
		}
		nums[i] = mustParse(t, b.String())
	}
	byCmp := append([]Number(nil), nums...)
	sort.SliceStable(byCmp, func(i, j int) bool { return byCmp[i].Cmp(byCmp[j]) < 0 })
	byKey := append([]Number(nil), nums...)
	sort.SliceStable(byKey, func(i, j int) bool {
		return bytes.Compare(AppendNumberKey(nil, byKey[i]), AppendNumberKey(nil, byKey[j])) < 0
	})
	for i := range byCmp {
		if byCmp[i].Cmp(byKey[i]) != 0 {
			t.Fatalf("position %d: cmp order %s, key order %s", i, byCmp[i], byKey[i])
		}
	}
}

func TestOrderedKeyStringsAndBinary(t *testing.T) {
	if bytes.Compare(OrderedKey(Str("a")), OrderedKey(Str("ab"))) >= 0 {
		t.Error("a should sort before ab")
	}
	if bytes.Compare(OrderedKey(Str("Z")), OrderedKey(Str("a"))) >= 0 {
		t.Error("Z should sort before a")
	}
	if bytes.Compare(OrderedKey(Str("\u00e9")), OrderedKey(Str("z"))) <= 0 {
		t.Error("é (UTF-8 0xC3) should sort after z")
	}
	if bytes.Compare(OrderedKey(Bin([]byte{0x00, 0xff})), OrderedKey(Bin([]byte{0x01}))) >= 0 {
		t.Error("binary order wrong")
	}
	if OrderedKey(Bool(true)) != nil {
		t.Error("BOOL has no key encoding")
	}
}

func TestNumberArithmetic(t *testing.T) {
	tests := []struct {
		a, b, sum, diff string
	}{
		{"1", "2", "3", "-1"},
		{"0.1", "0.2", "0.3", "-0.1"},
		{"-5", "5", "0", "-10"},
		{"1e10", "1e-10", "10000000000.0000000001", "9999999999.9999999999"},
		{"99999999999999999999999999999999999999", "0", "99999999999999999999999999999999999999", "99999999999999999999999999999999999999"},
		{"1.5", "-1.5", "0", "3"},
		{"123.456", "0.544", "124", "122.912"},
	}
	for _, tc := range tests {
		a, b := mustParse(t, tc.a), mustParse(t, tc.b)
		s, err := a.Add(b)
		if err != nil || s.String() != tc.sum {
			t.Errorf("%s + %s = %v, %v; want %s", tc.a, tc.b, s, err, tc.sum)
		}
		d, err := a.Sub(b)
		if err != nil || d.String() != tc.diff {
			t.Errorf("%s - %s = %v, %v; want %s", tc.a, tc.b, d, err, tc.diff)
		}
	}
	errs := []struct{ a, b, msg string }{
		{"99999999999999999999999999999999999999", "1", ""}, // 1e38: fits (1 digit)
		{"99999999999999999999999999999999999999", "0.1", "38 significant digits"},
		{"9.9999999999999999999999999999999999999E+125", "9.9999999999999999999999999999999999999E+125", "overflow"},
		{"1e20", "1e-20", "38 significant digits"},
	}
	for _, tc := range errs {
		_, err := mustParse(t, tc.a).Add(mustParse(t, tc.b))
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%s + %s: %v", tc.a, tc.b, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s + %s: err %v, want %q", tc.a, tc.b, err, tc.msg)
		}
	}
	if got := mustParse(t, "-3.5").Neg().String(); got != "3.5" {
		t.Errorf("Neg = %s", got)
	}
	if got := mustParse(t, "0").Neg().String(); got != "0" {
		t.Errorf("Neg 0 = %s", got)
	}
}

func TestEpochSeconds(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1700000000", 1700000000, true},
		{"1.7e9", 1700000000, true},
		{"1700000000.999", 1700000000, true},
		{"-1.9", -1, true},
		{"0.5", 0, true},
		{"0", 0, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false},
		{"1e19", 0, false},
		{"1e30", 0, false},
	}
	for _, tc := range tests {
		got, ok := mustParse(t, tc.in).EpochSeconds()
		if got != tc.want || ok != tc.ok {
			t.Errorf("EpochSeconds(%s) = %d,%v want %d,%v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	tests := []struct {
		in, out string // out "" means same as in
	}{
		{`{"S":"hello"}`, ""},
		{`{"S":""}`, ""},
		{`{"S":"q\"b\\s\n\u0001é😀"}`, `{"S":"q\"b\\s\n\u0001é😀"}`},
		{`{"S":"\u00e9\ud83d\ude00"}`, `{"S":"é😀"}`},
		{`{"N":"1.50"}`, `{"N":"1.5"}`},
		{`{"N":"-1e3"}`, `{"N":"-1000"}`},
		{`{"B":"AAEC"}`, ""},
		{`{"B":""}`, ""},
		{`{"BOOL":true}`, ""},
		{`{"BOOL":false}`, ""},
		{`{"NULL":true}`, ""},
		{`{"SS":["a","b"]}`, ""},
		{`{"NS":["1","2.50"]}`, `{"NS":["1","2.5"]}`},
		{`{"BS":["AA==","AQ=="]}`, ""},
		{`{"M":{}}`, ""},
		{`{"L":[]}`, ""},
		{`{"M":{"b":{"N":"1"},"a":{"L":[{"S":"x"},{"M":{"z":{"NULL":true}}}]}}}`, `{"M":{"a":{"L":[{"S":"x"},{"M":{"z":{"NULL":true}}}]},"b":{"N":"1"}}}`},
		{` { "S" : "x" , "Unknown": [1, {"a": null}] } `, `{"S":"x"}`},
		{`{"S":"x","N":null}`, `{"S":"x"}`},
	}
	for _, tc := range tests {
		var v Value
		if err := json.Unmarshal([]byte(tc.in), &v); err != nil {
			t.Errorf("Unmarshal(%s): %v", tc.in, err)
			continue
		}
		want := tc.out
		if want == "" {
			want = tc.in
		}
		got, err := json.Marshal(v)
		if err != nil || string(got) != want {
			t.Errorf("Marshal(Unmarshal(%s)) = %s, %v; want %s", tc.in, got, err, want)
		}
		var v2 Value
		if err := v2.UnmarshalJSON(got); err != nil || !Equal(v, v2) {
			t.Errorf("re-decode of %s: %v", got, err)
		}
	}
}

func TestJSONErrors(t *testing.T) {
	tests := []struct {
		in, code, msg string
	}{
		{`{}`, awserr.CodeValidation, msgEmptyValue},
		{`{"S":null}`, awserr.CodeValidation, msgEmptyValue},
		{`{"X":"y"}`, awserr.CodeValidation, msgEmptyValue},
		{`{"S":"a","N":"1"}`, awserr.CodeValidation, msgMultiValue},
		{`{"N":"abc"}`, awserr.CodeValidation, msgNotNumber},
		{`{"N":"1e200"}`, awserr.CodeValidation, msgOverflow},
		{`{"N":"123456789012345678901234567890123456789"}`, awserr.CodeValidation, msgPrecision},
		{`{"NULL":false}`, awserr.CodeValidation, msgNullFalse},
		{`{"SS":[]}`, awserr.CodeValidation, "One or more parameter values were invalid: An string set  may not be empty"},
		{`{"NS":[]}`, awserr.CodeValidation, "An number set  may not be empty"},
		{`{"BS":[]}`, awserr.CodeValidation, "One or more parameter values were invalid: Binary sets should not be empty"},
		{`{"N":""}`, awserr.CodeValidation, "The parameter cannot be converted to a numeric value"},
		{`{"S":"a","N":"b"}`, awserr.CodeValidation, "The parameter cannot be converted to a numeric value: b"},
		{`{"SS":["a","b","a"]}`, awserr.CodeValidation, "One or more parameter values were invalid: Input collection [a, b, a] contains duplicates."},
		{`{"NS":["1","1.0"]}`, awserr.CodeValidation, "One or more parameter values were invalid: Input collection contains duplicates"},
		{`{"BS":["Yg==","Yg=="]}`, awserr.CodeValidation, "One or more parameter values were invalid: Input collection [Yg==, Yg==]of type BS contains duplicates."},
		{`{"NS":["1","x"]}`, awserr.CodeValidation, msgNotNumber + ": x"},
		{`{"NS":["1",""]}`, awserr.CodeValidation, msgNotNumber},
		{`{"B":"!!"}`, awserr.CodeSerialization, "Base64"},
		{`{"N":1}`, awserr.CodeSerialization, ""},
		{`{"S":1}`, awserr.CodeSerialization, ""},
		{`{"BOOL":"true"}`, awserr.CodeSerialization, ""},
		{`{"L":{}}`, awserr.CodeSerialization, ""},
		{`{"M":[]}`, awserr.CodeSerialization, ""},
		{`{"S":"x"`, awserr.CodeSerialization, ""},
		{`{"S":"x"}x`, awserr.CodeSerialization, ""},
		{`{"S":"\x"}`, awserr.CodeSerialization, ""},
		{`{"S":"a` + "\n" + `"}`, awserr.CodeSerialization, ""},
		{`"S"`, awserr.CodeSerialization, ""},
		{``, awserr.CodeSerialization, ""},
		{strings.Repeat(`{"L":[`, 40) + strings.Repeat(`]}`, 40), awserr.CodeValidation, msgNesting},
	}
	for _, tc := range tests {
		var v Value
		err := v.UnmarshalJSON([]byte(tc.in))
		var ae *awserr.Error
		if !errors.As(err, &ae) || ae.Code != tc.code || !strings.Contains(ae.Message, tc.msg) {
			t.Errorf("UnmarshalJSON(%s) = %v; want %s containing %q", tc.in, err, tc.code, tc.msg)
		}
	}
	// Through encoding/json the *awserr.Error is still reachable.
	var it map[string]Value
	err := json.Unmarshal([]byte(`{"a":{"N":"x"}}`), &it)
	if !errors.Is(err, awserr.Validation("")) {
		t.Errorf("json.Unmarshal error %v is not a ValidationException", err)
	}
}

func TestNestingLimit(t *testing.T) {
	ok := strings.Repeat(`{"L":[`, MaxDepth) + `{"S":"x"}` + strings.Repeat(`]}`, MaxDepth)
	var v Value
	if err := v.UnmarshalJSON([]byte(ok)); err != nil {
		t.Errorf("depth %d rejected: %v", MaxDepth, err)
	}
}

func TestUnmarshalItemJSON(t *testing.T) {
	it, err := UnmarshalItemJSON([]byte(`{"pk":{"S":"a"},"n":{"N":"01"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !EqualItems(it, Item{"pk": Str("a"), "n": MustNum("1")}) {
		t.Errorf("got %v", it)
	}
	if it, err := UnmarshalItemJSON([]byte(`null`)); err != nil || it != nil {
		t.Errorf("null: %v %v", it, err)
	}
	if _, err := UnmarshalItemJSON([]byte(`{"pk":{}}`)); err == nil {
		t.Error("empty value accepted")
	}
	got := AppendItemJSON(nil, it)
	if string(got) != `{"n":{"N":"1"},"pk":{"S":"a"}}` {
		t.Errorf("AppendItemJSON = %s", got)
	}
}

func TestEqual(t *testing.T) {
	eq := [][2]Value{
		{StrSet("a", "b"), StrSet("b", "a")},
		{NumSet("1", "2.0"), NumSet("2", "1")},
		{BinSet([]byte{1}, []byte{2}), BinSet([]byte{2}, []byte{1})},
		{Num("1.0"), Num("1")},
		{Map(Item{"a": List(Num("1"), Null())}), Map(Item{"a": List(MustNum("1"), Null())})},
		{Bin(nil), Bin([]byte{})},
	}
	for _, p := range eq {
		if !Equal(p[0], p[1]) {
			t.Errorf("Equal(%v, %v) = false", p[0], p[1])
		}
	}
	ne := [][2]Value{
		{Str("1"), Num("1")},
		{StrSet("a"), StrSet("a", "b")},
		{List(Num("1"), Num("2")), List(Num("2"), Num("1"))},
		{Map(Item{"a": Null()}), Map(Item{"b": Null()})},
		{Bool(true), Bool(false)},
		{NumSet("1", "2"), NumSet("1", "3")},
	}
	for _, p := range ne {
		if Equal(p[0], p[1]) {
			t.Errorf("Equal(%v, %v) = true", p[0], p[1])
		}
	}
	if _, ok := Compare(Str("a"), Num("1")); ok {
		t.Error("Compare across types ok")
	}
	if _, ok := Compare(Bool(true), Bool(true)); ok {
		t.Error("Compare of BOOL ok")
	}
}

func TestSize(t *testing.T) {
	tests := []struct {
		name string
		v    Value
		want int
	}{
		{"a", Str("hello"), 6},
		{"é", Str("é"), 4},
		{"n", Num("12345"), 1 + 3 + 1},
		{"n", Num("1234"), 1 + 2 + 1},
		{"n", Num("0.00100"), 1 + 1 + 1},
		{"b", Bin([]byte{1, 2, 3}), 4},
		{"t", Bool(true), 2},
		{"z", Null(), 2},
		{"s", StrSet("ab", "c"), 4},
		{"ns", NumSet("1", "22", "333"), 2 + 2 + 2 + 3},
		{"m", Map(nil), 4},
		{"l", List(), 4},
		{"m", Map(Item{"k": Str("vv")}), 1 + 3 + 1 + 1 + 2},
		{"l", List(Str("a"), Num("1")), 1 + 3 + (1 + 1) + (1 + 2)},
	}
	for _, tc := range tests {
		if got := SizeOf(tc.name, tc.v); got != tc.want {
			t.Errorf("SizeOf(%q, %v) = %d, want %d", tc.name, tc.v, got, tc.want)
		}
	}
	if got := ItemSize(Item{"a": Str("x"), "bb": Num("1")}); got != 2+2+2 {
		t.Errorf("ItemSize = %d", got)
	}
}

func TestClone(t *testing.T) {
	orig := Map(Item{
		"l":  List(Str("a"), Bin([]byte{1})),
		"ss": StrSet("x"),
		"bs": BinSet([]byte{9}),
	})
	c := orig.Clone()
	c.M["l"].L[0] = Str("changed")
	c.M["l"].L[1].B[0] = 7
	c.M["ss"].SS[0] = "y"
	c.M["bs"].BS[0][0] = 8
	c.M["new"] = Null()
	if orig.M["l"].L[0].S != "a" || orig.M["l"].L[1].B[0] != 1 || orig.M["ss"].SS[0] != "x" || orig.M["bs"].BS[0][0] != 9 || len(orig.M) != 3 {
		t.Errorf("clone aliases original: %v", orig)
	}
	it := Item{"a": List(Num("1"))}
	ci := CloneItem(it)
	ci["a"].L[0] = Num("2")
	if it["a"].L[0].S != "1" {
		t.Error("CloneItem aliases")
	}
	if CloneItem(nil) != nil {
		t.Error("CloneItem(nil) != nil")
	}
}

func TestTypeString(t *testing.T) {
	for _, ty := range []Type{S, N, B, BOOL, NULL, SS, NS, BS, M, L} {
		back, ok := ParseType(ty.String())
		if !ok || back != ty {
			t.Errorf("ParseType(%s) = %v", ty, back)
		}
	}
	if Type(0).String() != "?" || Type(99).String() != "?" {
		t.Error("invalid type string")
	}
}

func TestNumConstructors(t *testing.T) {
	if Num("1.50").S != "1.5" {
		t.Error("Num not canonical")
	}
	if Num("bad").S != "bad" {
		t.Error("Num should keep invalid input")
	}
	defer func() {
		if recover() == nil {
			t.Error("MustNum did not panic on invalid input")
		}
	}()
	MustNum("bad")
}

func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range []string{
		`{"S":"x"}`, `{"N":"-1.5e3"}`, `{"B":"AAE="}`, `{"BOOL":true}`, `{"NULL":true}`,
		`{"SS":["a","b"]}`, `{"NS":["1","2"]}`, `{"BS":["AA=="]}`,
		`{"M":{"a":{"L":[{"S":"\u00e9"},{"N":"0"}]}}}`, `{"S":"a","N":"1"}`, `{}`, `{"X":[1,2,{"y":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v Value
		if err := v.UnmarshalJSON(b); err != nil {
			var ae *awserr.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error is not *awserr.Error: %v", err)
			}
			return
		}
		out, err := v.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var v2 Value
		if err := v2.UnmarshalJSON(out); err != nil {
			t.Fatalf("re-decode of %s: %v", out, err)
		}
		if !Equal(v, v2) {
			t.Fatalf("round trip changed %s", out)
		}
		out2, _ := v2.MarshalJSON()
		if !bytes.Equal(out, out2) {
			t.Fatalf("encoding not stable: %s vs %s", out, out2)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON produced: %s", out)
		}
	})
}

func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"0", "-1.5", "1e3", "+.5", "5.", "1E-130", "9.99E+125", "1e999", "abc", "00.00100e-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseNumber(s)
		if err != nil {
			return
		}
		c := n.String()
		n2, err := ParseNumber(c)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", c, s, err)
		}
		if n2.Cmp(n) != 0 || n2.String() != c {
			t.Fatalf("round trip %q -> %q -> %q", s, c, n2.String())
		}
		if n.Cmp(n2) != 0 || !bytes.Equal(AppendNumberKey(nil, n), AppendNumberKey(nil, n2)) {
			t.Fatal("equal numbers compare unequal")
		}
		if z, err := n.Sub(n); err != nil || !z.IsZero() {
			t.Fatalf("%s - itself = %v, %v", c, z, err)
		}
	})
}

func TestValueSizeInlineInMaps(t *testing.T) {
	// Go maps store values of at most 128 bytes inline; larger ones cost an
	// allocation per insert.
	if s := unsafe.Sizeof(Value{}); s > 128 {
		t.Errorf("attr.Value is %d bytes, want <= 128", s)
	}
}
