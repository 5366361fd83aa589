package expr

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// item decodes a DynamoDB JSON item for tests.
func item(t testing.TB, s string) attr.Item {
	t.Helper()
	it, err := attr.UnmarshalItemJSON([]byte(s))
	if err != nil {
		t.Fatalf("bad test item %s: %v", s, err)
	}
	return it
}

func itemJSON(it attr.Item) string { return string(attr.AppendItemJSON(nil, it)) }

func updValues() map[string]attr.Value {
	return map[string]attr.Value{
		":one":   attr.MustNum("1"),
		":half":  attr.MustNum("0.5"),
		":big":   attr.MustNum("99999999999999999999999999999999999999"),
		":tiny":  attr.MustNum("1e-10"),
		":s":     attr.Str("new"),
		":l":     attr.List(attr.Str("y")),
		":empty": attr.List(),
		":ss":    attr.StrSet("b", "c"),
		":ssa":   attr.StrSet("a"),
		":ssab":  attr.StrSet("a", "b"),
		":ns":    attr.NumSet("3", "1.0"),
		":bs":    attr.BinSet([]byte{1}),
		":bs3":   attr.BinSet([]byte{3}, []byte{1}),
		":ns1":   attr.NumSet("1.00"),
		":m":     attr.Map(attr.Item{"k": attr.Str("v")}),
		":t":     attr.Bool(true),
	}
}

func TestUpdateApply(t *testing.T) {
	const base = `{"pk":{"S":"k"},"n":{"N":"5"},"s":{"S":"x"},"l":{"L":[{"S":"a"},{"S":"b"},{"S":"c"}]},` +
		`"m":{"M":{"a":{"N":"1"},"child":{"M":{"z":{"S":"zz"}}},"lst":{"L":[{"N":"7"}]}}},` +
		`"ss":{"SS":["a"]},"ns":{"NS":["1","2"]},"bs":{"BS":["AQ==","Ag=="]}}`
	tests := []struct {
		expr    string
		want    string // the changed attributes, JSON; the rest must equal base
		removed []string
		touched []string
	}{
		{"SET n = :one", `{"n":{"N":"1"}}`, nil, []string{"n"}},
		{"SET n = n + :one", `{"n":{"N":"6"}}`, nil, []string{"n"}},
		{"SET n = n - :half", `{"n":{"N":"4.5"}}`, nil, []string{"n"}},
		{"SET n = :one + n", `{"n":{"N":"6"}}`, nil, []string{"n"}},
		{"SET n = :tiny + n", `{"n":{"N":"5.0000000001"}}`, nil, []string{"n"}},
		{"SET c = if_not_exists(c, :one)", `{"c":{"N":"1"}}`, nil, []string{"c"}},
		{"SET n = if_not_exists(n, :one)", `{}`, nil, []string{"n"}},
		{"SET c = if_not_exists(c, :one) + :one", `{"c":{"N":"2"}}`, nil, []string{"c"}},
		{"SET n2 = n", `{"n2":{"N":"5"}}`, nil, []string{"n2"}},
		{"SET n = (n + :one)", `{"n":{"N":"6"}}`, nil, []string{"n"}},
		{"SET n = (n) - (:one)", `{"n":{"N":"4"}}`, nil, []string{"n"}},
		{"SET l = list_append(l, :l)", `{"l":{"L":[{"S":"a"},{"S":"b"},{"S":"c"},{"S":"y"}]}}`, nil, []string{"l"}},
		{"SET l = list_append(:l, l)", `{"l":{"L":[{"S":"y"},{"S":"a"},{"S":"b"},{"S":"c"}]}}`, nil, []string{"l"}},
		{"SET q = list_append(if_not_exists(q, :empty), :l)", `{"q":{"L":[{"S":"y"}]}}`, nil, []string{"q"}},
		{"SET l[1] = :s", `{"l":{"L":[{"S":"a"},{"S":"new"},{"S":"c"}]}}`, nil, []string{"l"}},
		{"SET l[10] = :s", `{"l":{"L":[{"S":"a"},{"S":"b"},{"S":"c"},{"S":"new"}]}}`, nil, []string{"l"}},
		{"SET m.a = :s, m.b = :one", `{"m":{"M":{"a":{"S":"new"},"b":{"N":"1"},"child":{"M":{"z":{"S":"zz"}}},"lst":{"L":[{"N":"7"}]}}}}`, nil, []string{"m"}},
		{"SET m.child.z = :s", `{"m":{"M":{"a":{"N":"1"},"child":{"M":{"z":{"S":"new"}}},"lst":{"L":[{"N":"7"}]}}}}`, nil, []string{"m"}},
		{"SET m.lst[0] = m.lst[0] + :one", `{"m":{"M":{"a":{"N":"1"},"child":{"M":{"z":{"S":"zz"}}},"lst":{"L":[{"N":"8"}]}}}}`, nil, []string{"m"}},
		{"SET #n = :m", `{"x.y":{"M":{"k":{"S":"v"}}}}`, nil, []string{"x.y"}},
		{"SET a = :one, b = :s", `{"a":{"N":"1"},"b":{"S":"new"}}`, nil, []string{"a", "b"}},
		// every value is computed from the item before the update
		{"SET n = s, s = n", `{"n":{"S":"x"},"s":{"N":"5"}}`, nil, []string{"n", "s"}},
		// REMOVE
		{"REMOVE s", `{}`, []string{"s"}, []string{"s"}},
		{"REMOVE absent", `{}`, nil, []string{"absent"}},
		{"REMOVE s, n", `{}`, []string{"s", "n"}, []string{"s", "n"}},
		{"REMOVE m.a", `{"m":{"M":{"child":{"M":{"z":{"S":"zz"}}},"lst":{"L":[{"N":"7"}]}}}}`, nil, []string{"m"}},
		{"REMOVE l[0], l[2]", `{"l":{"L":[{"S":"b"}]}}`, nil, []string{"l"}},
		{"REMOVE l[2], l[0]", `{"l":{"L":[{"S":"b"}]}}`, nil, []string{"l"}},
		{"REMOVE l[7]", `{}`, nil, []string{"l"}},
		{"REMOVE l[0] SET l[1] = :s", `{"l":{"L":[{"S":"new"},{"S":"c"}]}}`, nil, []string{"l"}},
		// ADD
		{"ADD n :one", `{"n":{"N":"6"}}`, nil, []string{"n"}},
		{"ADD c :one", `{"c":{"N":"1"}}`, nil, []string{"c"}},
		{"ADD ss :ss", `{"ss":{"SS":["a","b","c"]}}`, nil, []string{"ss"}},
		{"ADD ns :ns", `{"ns":{"NS":["1","2","3"]}}`, nil, []string{"ns"}},
		{"ADD bs :bs", `{}`, nil, []string{"bs"}},
		{"ADD bs :bs3", `{"bs":{"BS":["AQ==","Ag==","Aw=="]}}`, nil, []string{"bs"}},
		{"ADD ns :ns1", `{}`, nil, []string{"ns"}},
		{"ADD newset :ss", `{"newset":{"SS":["b","c"]}}`, nil, []string{"newset"}},
		{"ADD m.a :one", `{"m":{"M":{"a":{"N":"2"},"child":{"M":{"z":{"S":"zz"}}},"lst":{"L":[{"N":"7"}]}}}}`, nil, []string{"m"}},
		// DELETE
		{"DELETE ss :ss", `{}`, nil, []string{"ss"}},
		{"DELETE ss :ssa", `{}`, []string{"ss"}, []string{"ss"}},
		{"DELETE ss :ssab", `{}`, []string{"ss"}, []string{"ss"}},
		{"DELETE ns :ns", `{"ns":{"NS":["2"]}}`, nil, []string{"ns"}},
		{"DELETE bs :bs", `{"bs":{"BS":["Ag=="]}}`, nil, []string{"bs"}},
		{"DELETE absent :ss", `{}`, nil, []string{"absent"}},
		// all four clauses, any order, keywords case-insensitive
		{"remove s add n :one delete ss :ssa set x = :s", `{"n":{"N":"6"},"x":{"S":"new"}}`, []string{"s", "ss"}, []string{"s", "n", "ss", "x"}},
		{"SET x = :s\nREMOVE s", `{"x":{"S":"new"}}`, []string{"s"}, []string{"x", "s"}},
	}
	for _, tc := range tests {
		p := NewParams(map[string]string{"#n": "x.y"}, updValues())
		u, err := ParseUpdate(tc.expr, p)
		if err != nil {
			t.Errorf("ParseUpdate(%q): %v", tc.expr, err)
			continue
		}
		orig := item(t, base)
		before := itemJSON(orig)
		got, touched, err := u.Apply(orig)
		if err != nil {
			t.Errorf("Apply(%q): %v", tc.expr, err)
			continue
		}
		if itemJSON(orig) != before {
			t.Errorf("Apply(%q) modified its input", tc.expr)
		}
		want := item(t, base)
		for k, v := range item(t, tc.want) {
			want[k] = v
		}
		for _, k := range tc.removed {
			delete(want, k)
		}
		if !attr.EqualItems(got, want) {
			t.Errorf("Apply(%q) =\n  %s\nwant\n  %s", tc.expr, itemJSON(got), itemJSON(want))
		}
		if !reflect.DeepEqual(touched, tc.touched) {
			t.Errorf("Apply(%q) touched %v, want %v", tc.expr, touched, tc.touched)
		}
	}
}

func TestUpdateApplyNilItem(t *testing.T) {
	u, err := ParseUpdate("SET a = :one ADD c :one", NewParams(nil, updValues()))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := u.Apply(nil)
	if err != nil {
		t.Fatal(err)
	}
	if itemJSON(got) != `{"a":{"N":"1"},"c":{"N":"1"}}` {
		t.Errorf("got %s", itemJSON(got))
	}
}

func TestUpdateRuntimeErrors(t *testing.T) {
	const base = `{"n":{"N":"5"},"s":{"S":"x"},"l":{"L":[{"S":"a"}]},"m":{"M":{"a":{"N":"1"}}},"ss":{"SS":["a"]},` +
		`"big":{"N":"99999999999999999999999999999999999999"}}`
	tests := []struct{ expr, want string }{
		{"SET x = absent + :one", "The provided expression refers to an attribute that does not exist in the item"},
		{"SET x = absent", "The provided expression refers to an attribute that does not exist in the item"},
		{"SET x = list_append(absent, :l)", "The provided expression refers to an attribute that does not exist in the item"},
		{"SET x = s + :one", "An operand in the update expression has an incorrect data type"},
		{"SET x = list_append(s, :l)", "An operand in the update expression has an incorrect data type"},
		{"SET x = big + :half", "Attempting to store more than 38 significant digits in a Number"},
		{"SET absent.a = :one", "The document path provided in the update expression is invalid for update"},
		{"SET s.a = :one", "The document path provided in the update expression is invalid for update"},
		{"SET m[0] = :one", "The document path provided in the update expression is invalid for update"},
		{"SET l.a = :one", "The document path provided in the update expression is invalid for update"},
		{"SET m.x.y = :one", "The document path provided in the update expression is invalid for update"},
		{"REMOVE absent.a", "The document path provided in the update expression is invalid for update"},
		{"ADD s :one", "An operand in the update expression has an incorrect data type"},
		{"ADD n :ss", "An operand in the update expression has an incorrect data type"},
		{"ADD ss :ns", "An operand in the update expression has an incorrect data type"},
		{"DELETE n :ss", "An operand in the update expression has an incorrect data type"},
		{"DELETE ss :ns", "An operand in the update expression has an incorrect data type"},
	}
	for _, tc := range tests {
		u, err := ParseUpdate(tc.expr, NewParams(nil, updValues()))
		if err != nil {
			t.Errorf("ParseUpdate(%q): %v", tc.expr, err)
			continue
		}
		_, _, err = u.Apply(item(t, base))
		wantValidation(t, tc.expr, err, tc.want)
	}
}

func TestUpdateParseErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "Invalid UpdateExpression: The expression can not be empty;"},
		{"a = :one", `Invalid UpdateExpression: Syntax error; token: "a", near: "a ="`},
		{"SET", `Syntax error; token: "<EOF>", near: "SET"`},
		{"SET a", `Syntax error; token: "<EOF>"`},
		{"SET a :one", `Syntax error; token: ":one"`},
		{"SET a = :one,", `Syntax error; token: "<EOF>"`},
		{"SET a = :one b = :one", `Syntax error; token: "b"`},
		{"SET a = :one + ", `Syntax error; token: "<EOF>"`},
		{"SET a = :one + :one + :one", `Syntax error; token: "+"`},
		{"REMOVE a = :one", `Syntax error; token: "="`},
		{"ADD a", `Syntax error; token: "<EOF>"`},
		{"ADD a b", `Syntax error; token: "b"`},
		{"DELETE a", `Syntax error`},
		{"SET a = (:one", `Syntax error; token: "<EOF>"`},
		{"SET a = :one SET b = :one", `Invalid UpdateExpression: The "SET" section can only be used once in an update expression;`},
		{"REMOVE a REMOVE b", `The "REMOVE" section can only be used once in an update expression;`},
		{"SET a = :one, a = :s", "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]"},
		{"SET a = :one REMOVE a.b", "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a, b]"},
		{"SET a.b[1] = :one REMOVE a.b[1].c", "path one: [a, b, [1]], path two: [a, b, [1], c]"},
		{"SET a.b = :one REMOVE a[1]", "Two document paths conflict with each other; must remove or rewrite one of these paths; path one: [a, b], path two: [a, [1]]"},
		{"SET a = :undef", "An expression attribute value used in expression is not defined; attribute value: :undef"},
		{"SET #undef = :one", "An expression attribute name used in the document path is not defined; attribute name: #undef"},
		{"SET name = :one", "Attribute name is a reserved keyword; reserved keyword: name"},
		{"SET a = foo(b)", "Invalid function name; function: foo"},
		{"SET a = size(b)", "The function is not allowed in an update expression; function: size"},
		{"SET a = if_not_exists(:one, :one)", "Operator or function requires a document path; operator or function: if_not_exists"},
		{"SET a = if_not_exists(a)", "Incorrect number of operands for operator or function; operator or function: if_not_exists, number of operands: 1"},
		{"SET a = list_append(a, :s)", "Incorrect operand type for operator or function; operator or function: list_append, operand type: S"},
		{"SET a = a + :s", "Incorrect operand type for operator or function; operator or function: +, operand type: S"},
		{"ADD a :s", "Incorrect operand type for operator or function; operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"ADD a :l", "operator: ADD, operand type: LIST"},
		{"DELETE a :one", "Incorrect operand type for operator or function; operator: DELETE, operand type: NUMBER, typeSet: ALLOWED_FOR_DELETE_OPERAND"},
	}
	for _, tc := range tests {
		_, err := ParseUpdate(tc.expr, NewParams(nil, updValues()))
		wantValidation(t, tc.expr, err, tc.want)
	}
}

func TestUpdateDeepNesting(t *testing.T) {
	deep := "SET a = " + strings.Repeat("list_append(", 200) + ":l" + strings.Repeat(", :l)", 200)
	u, err := ParseUpdate(deep, NewParams(nil, updValues()))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := u.Apply(nil)
	if err != nil || len(got["a"].L) != 201 {
		t.Fatalf("got %d elements, %v", len(got["a"].L), err)
	}
}

func TestProjection(t *testing.T) {
	const base = `{"pk":{"S":"k"},"n":{"N":"5"},"l":{"L":[{"S":"a"},{"M":{"x":{"N":"1"},"y":{"N":"2"}}},{"S":"c"}]},` +
		`"m":{"M":{"a":{"N":"1"},"b":{"M":{"c":{"S":"deep"},"d":{"S":"other"}}}}},"x.y":{"S":"dotted"}}`
	tests := []struct {
		expr, want string
		top        []string
	}{
		{"pk", `{"pk":{"S":"k"}}`, []string{"pk"}},
		{"pk, n, absent", `{"n":{"N":"5"},"pk":{"S":"k"}}`, []string{"pk", "n", "absent"}},
		{"m.a", `{"m":{"M":{"a":{"N":"1"}}}}`, []string{"m"}},
		{"m.b.c, m.a", `{"m":{"M":{"a":{"N":"1"},"b":{"M":{"c":{"S":"deep"}}}}}}`, []string{"m"}},
		{"m.zz", `{}`, []string{"m"}},
		{"l[2], l[0]", `{"l":{"L":[{"S":"a"},{"S":"c"}]}}`, []string{"l"}},
		{"l[1].y", `{"l":{"L":[{"M":{"y":{"N":"2"}}}]}}`, []string{"l"}},
		{"l[1].y, l[1].x", `{"l":{"L":[{"M":{"x":{"N":"1"},"y":{"N":"2"}}}]}}`, []string{"l"}},
		{"l[9]", `{}`, []string{"l"}},
		{"n[0]", `{}`, []string{"n"}},
		{"n.a", `{}`, []string{"n"}},
		{"#d, #m.a", `{"m":{"M":{"a":{"N":"1"}}},"x.y":{"S":"dotted"}}`, []string{"x.y", "m"}},
	}
	for _, tc := range tests {
		pr, err := ParseProjection(tc.expr, NewParams(map[string]string{"#d": "x.y", "#m": "m"}, nil))
		if err != nil {
			t.Errorf("ParseProjection(%q): %v", tc.expr, err)
			continue
		}
		orig := item(t, base)
		got := pr.Apply(orig)
		if itemJSON(got) != tc.want {
			t.Errorf("Apply(%q) = %s, want %s", tc.expr, itemJSON(got), tc.want)
		}
		if !reflect.DeepEqual(pr.TopLevel(), tc.top) {
			t.Errorf("TopLevel(%q) = %v, want %v", tc.expr, pr.TopLevel(), tc.top)
		}
		// The result must not alias the input.
		for _, v := range got {
			if v.T == attr.M {
				v.M["mutated"] = attr.Null()
			}
		}
		if itemJSON(orig) != itemJSON(item(t, base)) {
			t.Errorf("Apply(%q) result aliases its input", tc.expr)
		}
	}
	if pr, _ := ParseProjection("a", nil); pr.Apply(nil) != nil {
		t.Error("projection of no item should be nil")
	}
	pr := NewProjection([]string{"pk", "n"})
	if got := itemJSON(pr.Apply(item(t, base))); got != `{"n":{"N":"5"},"pk":{"S":"k"}}` {
		t.Errorf("NewProjection Apply = %s", got)
	}
}

func TestProjectionErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "Invalid ProjectionExpression: The expression can not be empty;"},
		{"a,", `Invalid ProjectionExpression: Syntax error; token: "<EOF>", near: ","`},
		{"a b", `Syntax error; token: "b", near: "a b"`},
		{"a, a", "Invalid ProjectionExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]"},
		{"a.b, a", "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a, b], path two: [a]"},
		{"a[0], a.b", "Two document paths conflict with each other"},
		{"name", "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: name"},
		{"#x", "An expression attribute name used in the document path is not defined; attribute name: #x"},
		{"a = :v", `Syntax error; token: "="`},
		{"some-attribute", `Syntax error; token: "-", near: "some-attribute"`},
	}
	for _, tc := range tests {
		_, err := ParseProjection(tc.expr, NewParams(nil, nil))
		wantValidation(t, tc.expr, err, tc.want)
	}
}

func TestKeyCondition(t *testing.T) {
	vals := map[string]attr.Value{
		":h": attr.Str("user"), ":a": attr.MustNum("10"), ":b": attr.MustNum("20"),
		":p": attr.Str("ab"), ":n": attr.MustNum("1"), ":bin": attr.Bin([]byte{1}),
	}
	tests := []struct {
		expr        string
		hash, rng   string
		op          string
		match, miss []attr.Value
	}{
		{"pk = :h", "pk", "", "", []attr.Value{attr.MustNum("5")}, nil},
		{"pk = :h AND sk = :a", "pk", "sk", "=", []attr.Value{attr.MustNum("10.0")}, []attr.Value{attr.MustNum("11"), attr.Str("10")}},
		{"sk = :a AND pk = :h", "pk", "sk", "=", []attr.Value{attr.MustNum("10")}, []attr.Value{attr.MustNum("9")}},
		{"pk = :h AND sk < :a", "pk", "sk", "<", []attr.Value{attr.MustNum("9.99"), attr.MustNum("-100")}, []attr.Value{attr.MustNum("10")}},
		{"pk = :h AND sk <= :a", "pk", "sk", "<=", []attr.Value{attr.MustNum("10")}, []attr.Value{attr.MustNum("10.5")}},
		{"pk = :h AND sk > :a", "pk", "sk", ">", []attr.Value{attr.MustNum("100")}, []attr.Value{attr.MustNum("10")}},
		{"pk = :h AND sk >= :a", "pk", "sk", ">=", []attr.Value{attr.MustNum("10")}, []attr.Value{attr.MustNum("9")}},
		{"pk = :h AND :a < sk", "pk", "sk", ">", []attr.Value{attr.MustNum("11")}, []attr.Value{attr.MustNum("10")}},
		{"pk = :h AND sk BETWEEN :a AND :b", "pk", "sk", "BETWEEN", []attr.Value{attr.MustNum("10"), attr.MustNum("20"), attr.MustNum("15")}, []attr.Value{attr.MustNum("9"), attr.MustNum("21")}},
		{"pk = :h AND begins_with(sk, :p)", "pk", "sk", "begins_with", []attr.Value{attr.Str("ab"), attr.Str("abc")}, []attr.Value{attr.Str("a"), attr.Str("b"), attr.MustNum("1")}},
		{"begins_with(sk, :bin) AND pk = :h", "pk", "sk", "begins_with", []attr.Value{attr.Bin([]byte{1, 2})}, []attr.Value{attr.Bin([]byte{2})}},
		{"(pk = :h) AND (sk > :a)", "pk", "sk", ">", []attr.Value{attr.MustNum("11")}, nil},
		{"#p = :h and #s > :a", "pk", "sk", ">", []attr.Value{attr.MustNum("11")}, nil},
	}
	for _, tc := range tests {
		p := NewParams(map[string]string{"#p": "pk", "#s": "sk"}, vals)
		k, err := ParseKeyCondition(tc.expr, p)
		if err != nil {
			t.Errorf("ParseKeyCondition(%q): %v", tc.expr, err)
			continue
		}
		rangeKey := "sk"
		if err := k.Validate("pk", rangeKey); err != nil {
			t.Errorf("Validate(%q): %v", tc.expr, err)
			continue
		}
		if k.HashName != tc.hash || k.RangeName != tc.rng || k.RangeOp != tc.op {
			t.Errorf("%q: got hash %q range %q op %q", tc.expr, k.HashName, k.RangeName, k.RangeOp)
		}
		if !attr.Equal(k.HashValue, attr.Str("user")) {
			t.Errorf("%q: hash value %v", tc.expr, k.HashValue)
		}
		for _, v := range tc.match {
			if !k.MatchRange(v) {
				t.Errorf("%q: MatchRange(%v) = false", tc.expr, v)
			}
		}
		for _, v := range tc.miss {
			if k.MatchRange(v) {
				t.Errorf("%q: MatchRange(%v) = true", tc.expr, v)
			}
		}
	}
}

func TestKeyConditionErrors(t *testing.T) {
	vals := map[string]attr.Value{":h": attr.Str("user"), ":a": attr.MustNum("10"), ":b": attr.MustNum("5"), ":n": attr.MustNum("1")}
	parseErrs := []struct{ expr, want string }{
		{"", "Invalid KeyConditionExpression: The expression can not be empty;"},
		{"pk = :h OR sk = :a", "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: OR"},
		{"NOT pk = :h", "Invalid operator used in KeyConditionExpression: NOT"},
		{"pk <> :h", "Invalid operator used in KeyConditionExpression: <>"},
		{"pk IN (:h)", "Invalid operator used in KeyConditionExpression: IN"},
		{"pk = :h AND attribute_exists(sk)", "Invalid operator used in KeyConditionExpression: attribute_exists"},
		{"pk = :h AND contains(sk, :a)", "Invalid operator used in KeyConditionExpression: contains"},
		{"pk = :h AND sk = :a AND x = :a", "Conditions can be of length 1 or 2 only"},
		{"pk = :h AND pk = :h", "KeyConditionExpressions must only contain one condition per key"},
		{"pk.a = :h", "KeyConditionExpressions cannot have conditions on nested attributes"},
		{"pk = sk", "The key condition must reference a key attribute on one side and a value on the other"},
		{"pk = :h AND begins_with(sk, :a)", "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"pk = :h AND", `Syntax error; token: "<EOF>"`},
		{"pk = :nope", "An expression attribute value used in expression is not defined; attribute value: :nope"},
		{"pk = :h AND sk BETWEEN :a AND :b", "The BETWEEN operator requires upper bound to be greater than or equal to lower bound"},
	}
	for _, tc := range parseErrs {
		_, err := ParseKeyCondition(tc.expr, NewParams(nil, vals))
		wantValidation(t, tc.expr, err, tc.want)
	}
	validateErrs := []struct{ expr, hash, rng, want string }{
		{"sk = :a", "pk", "sk", "Query condition missed key schema element: pk"},
		{"sk > :a", "pk", "sk", "Query condition missed key schema element: pk"},
		{"foo = :a", "pk", "sk", "Query condition missed key schema element: pk"},
		{"pk > :h", "pk", "sk", "Query key condition not supported"},
		{"pk = :h AND foo = :a", "pk", "sk", "Query condition missed key schema element: sk"},
		{"pk = :h AND sk = :a", "pk", "", "Query key condition not supported"},
	}
	for _, tc := range validateErrs {
		k, err := ParseKeyCondition(tc.expr, NewParams(nil, vals))
		if err != nil {
			t.Errorf("ParseKeyCondition(%q): %v", tc.expr, err)
			continue
		}
		wantValidation(t, tc.expr, k.Validate(tc.hash, tc.rng), tc.want)
	}
	k, _ := ParseKeyCondition("pk = :h AND sk > :a", NewParams(nil, vals))
	if err := k.Validate("pk", "sk"); err != nil {
		t.Fatal(err)
	}
	if err := k.CheckTypes(attr.S, attr.N); err != nil {
		t.Error(err)
	}
	wantValidation(t, "types", k.CheckTypes(attr.S, attr.S), "Condition parameter type does not match schema type")
	wantValidation(t, "types", k.CheckTypes(attr.N, attr.N), "Condition parameter type does not match schema type")
}

func TestUpdateJSONHelpersStable(t *testing.T) {
	// Guard the test helper itself: JSON encoding is sorted and stable.
	it := item(t, `{"b":{"N":"1"},"a":{"S":"x"}}`)
	raw, _ := json.Marshal(attr.Map(it))
	if string(raw) != `{"M":{"a":{"S":"x"},"b":{"N":"1"}}}` {
		t.Errorf("got %s", raw)
	}
}

func BenchmarkUpdateApply(b *testing.B) {
	u, err := ParseUpdate("SET n = n + :one, s = :s REMOVE x", NewParams(nil, updValues()))
	if err != nil {
		b.Fatal(err)
	}
	base := item(b, `{"pk":{"S":"k"},"n":{"N":"5"},"s":{"S":"x"},"x":{"S":"y"}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := u.Apply(base); err != nil {
			b.Fatal(err)
		}
	}
}

func TestUpdatedPathsAndConditionTopLevel(t *testing.T) {
	base := item(t, `{"pk":{"S":"k"},"n":{"N":"5"},"m":{"M":{"a":{"N":"1"},"b":{"N":"2"}}},"l":{"L":[{"S":"a"},{"S":"b"}]},"gone":{"S":"x"}}`)
	u, err := ParseUpdate("SET m.a = :one, n = n + :one, l[1] = :s REMOVE gone", NewParams(nil, updValues()))
	if err != nil {
		t.Fatal(err)
	}
	after, _, err := u.Apply(base)
	if err != nil {
		t.Fatal(err)
	}
	proj := u.UpdatedPaths()
	if got := itemJSON(proj.Apply(base)); got != `{"gone":{"S":"x"},"l":{"L":[{"S":"b"}]},"m":{"M":{"a":{"N":"1"}}},"n":{"N":"5"}}` {
		t.Errorf("UPDATED_OLD = %s", got)
	}
	if got := itemJSON(proj.Apply(after)); got != `{"l":{"L":[{"S":"new"}]},"m":{"M":{"a":{"N":"1"}}},"n":{"N":"6"}}` {
		t.Errorf("UPDATED_NEW = %s", got)
	}
	c, err := ParseCondition("attribute_exists(pk) AND (size(m.a) > :one OR contains(l, n)) AND pk <> :s", NewParams(nil, updValues()))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.TopLevel(); !reflect.DeepEqual(got, []string{"pk", "m", "l", "n"}) {
		t.Errorf("TopLevel = %v", got)
	}
}
