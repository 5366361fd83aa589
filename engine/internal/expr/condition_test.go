package expr

import (
	"errors"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// testItem is the item most condition tests evaluate against.
func testItem() attr.Item {
	return attr.Item{
		"pk":    attr.Str("user#1"),
		"n":     attr.MustNum("10"),
		"neg":   attr.MustNum("-2.5"),
		"s":     attr.Str("héllo"),
		"blank": attr.Str(""),
		"b":     attr.Bin([]byte{1, 2, 3}),
		"t":     attr.Bool(true),
		"f":     attr.Bool(false),
		"nul":   attr.Null(),
		"ss":    attr.StrSet("red", "green"),
		"ns":    attr.NumSet("1", "2.5"),
		"bs":    attr.BinSet([]byte{9}, []byte{8, 7}),
		"l":     attr.List(attr.Str("x"), attr.MustNum("3"), attr.Map(attr.Item{"deep": attr.Str("d")})),
		"m": attr.Map(attr.Item{
			"a":     attr.MustNum("1"),
			"child": attr.Map(attr.Item{"z": attr.Str("zz")}),
			"lst":   attr.List(attr.MustNum("7"), attr.MustNum("8")),
		}),
		"Status":   attr.Str("active"),
		"odd-name": attr.Str("dash"),
	}
}

// testValues are the :placeholders available to every test.
func testValues() map[string]attr.Value {
	return map[string]attr.Value{
		":n10":      attr.MustNum("10"),
		":n10b":     attr.MustNum("10.0"),
		":n5":       attr.MustNum("5"),
		":n20":      attr.MustNum("20"),
		":n3":       attr.MustNum("3"),
		":n1":       attr.MustNum("1"),
		":n0":       attr.MustNum("0"),
		":nneg":     attr.MustNum("-3"),
		":s":        attr.Str("héllo"),
		":he":       attr.Str("hé"),
		":ll":       attr.Str("ll"),
		":a":        attr.Str("a"),
		":z":        attr.Str("z"),
		":red":      attr.Str("red"),
		":blue":     attr.Str("blue"),
		":x":        attr.Str("x"),
		":active":   attr.Str("active"),
		":b12":      attr.Bin([]byte{1, 2}),
		":b9":       attr.Bin([]byte{9}),
		":t":        attr.Bool(true),
		":null":     attr.Null(),
		":typeS":    attr.Str("S"),
		":typeN":    attr.Str("N"),
		":typeM":    attr.Str("M"),
		":typeL":    attr.Str("L"),
		":typeSS":   attr.Str("SS"),
		":typeNULL": attr.Str("NULL"),
		":typeBad":  attr.Str("STRING"),
		":ns":       attr.NumSet("2.50", "1"),
		":ss":       attr.StrSet("green", "red"),
		":l3":       attr.List(attr.Str("x"), attr.MustNum("3"), attr.Map(attr.Item{"deep": attr.Str("d")})),
		":m":        attr.Map(attr.Item{"z": attr.Str("zz")}),
		":dash":     attr.Str("dash"),
		":users":    attr.Str("user#"),
		":dd":       attr.Str("d"),
	}
}

func testNames() map[string]string {
	return map[string]string{"#st": "Status", "#odd": "odd-name", "#size": "size", "#dot": "a.b", "#m": "m"}
}

// parseCond parses with all test names/values available (unused ones are fine here).
func parseCond(t *testing.T, s string) (*Condition, error) {
	t.Helper()
	return ParseCondition(s, NewParams(testNames(), testValues()))
}

func TestConditionEval(t *testing.T) {
	tests := []struct {
		expr string
		want bool
	}{
		// comparators on numbers (numeric, not textual)
		{"n = :n10", true},
		{"n = :n10b", true},
		{"n <> :n10", false},
		{"n <> :n5", true},
		{"n < :n20", true},
		{"n < :n5", false},
		{"n <= :n10", true},
		{"n > :n5", true},
		{"n >= :n10", true},
		{"n >= :n20", false},
		{"neg < :n0", true},
		{"neg > :nneg", true},
		// strings and binary, bytewise
		{"s = :s", true},
		{"s > :a", true},
		{"s < :z", true},
		{"b > :b12", true},
		{"b < :b9", true},
		// across types: false, and <> true
		{"n = :s", false},
		{"n <> :s", true},
		{"n < :s", false},
		{"s > :n5", false},
		{"t = :t", true},
		{"nul = :null", true},
		// absent attributes
		{"absent = :n10", false},
		{"absent <> :n10", true},
		{"absent < :n10", false},
		// deep equality of sets (order ignored, numbers numeric), lists, maps
		{"ns = :ns", true},
		{"ss = :ss", true},
		{"l = :l3", true},
		{"m.child = :m", true},
		// paths
		{"m.a = :n1", true},
		{"m.child.z = :s", false},
		{"m.lst[1] > :n5", true},
		{"m.lst[2] = :n5", false},
		{"l[2].deep = :dd", true},
		{"l[0] = :x", true},
		{"s[0] = :x", false},
		{"m.a.b = :n1", false},
		{"#st = :active", true},
		{"#odd = :dash", true},
		{"#m.a = :n1", true},
		{"#dot = :n1", false},
		// BETWEEN
		{"n BETWEEN :n5 AND :n20", true},
		{"n BETWEEN :n10 AND :n10b", true},
		{"n BETWEEN :n20 AND :n20", false},
		{"s BETWEEN :a AND :z", true},
		{"s BETWEEN :n1 AND :n20", false},
		{"absent BETWEEN :n1 AND :n20", false},
		{"n between :n5 and :n20", true},
		// IN
		{"n IN (:n5, :n10)", true},
		{"n IN (:n5, :n20)", false},
		{"s IN (:s)", true},
		{"absent IN (:n5)", false},
		{"n in (:n5,:n10b)", true},
		// functions
		{"attribute_exists(n)", true},
		{"attribute_exists(absent)", false},
		{"attribute_not_exists(absent)", true},
		{"attribute_not_exists(m.a)", false},
		{"attribute_exists(m.lst[1])", true},
		{"attribute_exists(m.lst[5])", false},
		{"attribute_type(n, :typeN)", true},
		{"attribute_type(n, :typeS)", false},
		{"attribute_type(m, :typeM)", true},
		{"attribute_type(l, :typeL)", true},
		{"attribute_type(ss, :typeSS)", true},
		{"attribute_type(nul, :typeNULL)", true},
		{"attribute_type(absent, :typeS)", false},
		{"begins_with(s, :he)", true},
		{"begins_with(s, :ll)", false},
		{"begins_with(b, :b12)", true},
		{"begins_with(n, :a)", false},
		{"begins_with(pk, :users)", true},
		{"contains(s, :ll)", true},
		{"contains(s, :x)", false},
		{"contains(ss, :red)", true},
		{"contains(ss, :blue)", false},
		{"contains(ns, :n1)", true},
		{"contains(ns, :n3)", false},
		{"contains(bs, :b9)", true},
		{"contains(l, :x)", true},
		{"contains(l, :n3)", true},
		{"contains(l, :n5)", false},
		{"contains(n, :n1)", false},
		{"contains(ss, :n1)", false},
		{"contains(s, pk)", false},
		// size: UTF-8 bytes for S, count for sets, lists, maps
		{"size(s) = :n5", false},
		{"size(s) = :n10", false},
		{"size(s) > :n5", true}, // "héllo" is 6 bytes
		{"size(blank) = :n0", true},
		{"size(b) = :n3", true},
		{"size(ss) < :n3", true},
		{"size(l) = :n3", true},
		{"size(m) = :n3", true},
		{"size(n) = :n1", false},
		{"size(absent) = :n0", false},
		{"size(absent) <> :n0", true},
		{"size(m.lst) BETWEEN :n1 AND :n3", true},
		{":n3 = size(l)", true},
		// comparing two paths
		{"n > neg", true},
		{"m.a = ns", false},
		// precedence: NOT > AND > OR
		{"n = :n10 OR n = :n5 AND n = :n20", true},    // OR(true, AND(false,false))
		{"(n = :n10 OR n = :n5) AND n = :n20", false}, // AND(OR(..), false)
		{"n = :n5 AND n = :n10 OR n = :n10", true},    // OR(AND(false,true), true)
		{"n = :n5 AND (n = :n10 OR n = :n10)", false}, // AND(false, ...)
		{"NOT n = :n5 AND n = :n10", true},            // AND(NOT(false), true)
		{"NOT (n = :n10 AND n = :n5)", true},
		{"NOT n = :n10 OR n = :n10", true}, // OR(NOT(true), true)
		{"NOT (n = :n10 OR n = :n5)", false},
		{"NOT NOT n = :n10", true},
		{"not attribute_exists(absent) and n = :n10", true},
		{"attribute_exists(n) AND (s = :s OR s = :a) AND NOT contains(ss, :blue)", true},
		{"((n = :n10) AND (s = :s)) OR (n = :n5)", true},
		{"\tn\n=\r:n10 ", true},
		// parenthesized operands
		{"(n) = :n10", true},
		{"(n) = (:n10) AND ((s) = :s)", true},
		{"(size(s)) > :n5", true},
		{"(n) BETWEEN (:n5) AND :n20", true},
		{"n IN ((:n5), :n10)", true},
		{"((n) = :n10)", true},
		{"NOT (n) = :n10", false},
		{"size(:s) > :n5", true},
		{"n < :t", false},
		{"m.a <> l[1]", true},
	}
	for _, tc := range tests {
		c, err := parseCond(t, tc.expr)
		if err != nil {
			t.Errorf("ParseCondition(%q): %v", tc.expr, err)
			continue
		}
		got, err := c.Eval(testItem())
		if err != nil || got != tc.want {
			t.Errorf("Eval(%q) = %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
}

func TestConditionNilItem(t *testing.T) {
	c, err := parseCond(t, "attribute_not_exists(pk)")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Matches(nil) {
		t.Error("attribute_not_exists on no item should hold")
	}
	c, _ = parseCond(t, "attribute_exists(pk)")
	if c.Matches(nil) {
		t.Error("attribute_exists on no item should fail")
	}
}

// wantValidation asserts err is a ValidationException whose message contains want.
func wantValidation(t *testing.T, what string, err error, want string) {
	t.Helper()
	var ae *awserr.Error
	if !errors.As(err, &ae) || ae.Code != awserr.CodeValidation {
		t.Errorf("%s: error %v, want ValidationException containing %q", what, err, want)
		return
	}
	if !strings.Contains(ae.Message, want) {
		t.Errorf("%s: message %q does not contain %q", what, ae.Message, want)
	}
}

func TestConditionErrors(t *testing.T) {
	tests := []struct {
		expr, want string
	}{
		{"", "Invalid ConditionExpression: The expression can not be empty;"},
		{"   ", "The expression can not be empty;"},
		{"n = ", `Invalid ConditionExpression: Syntax error; token: "<EOF>", near: "= "`},
		{"n = = :n5", `Syntax error; token: "=", near: "= = :n5"`},
		{"n == :n5", `Syntax error; token: "=", near: "== :n5"`},
		{"n = :n5 AND", `Syntax error; token: "<EOF>"`},
		{"n = :n5 :n5", `Syntax error; token: ":n5"`},
		{"(n = :n5", `Syntax error; token: "<EOF>"`},
		{"n = :n5)", `Syntax error; token: ")"`},
		{"n ! :n5", `Syntax error; token: "!"`},
		{"n = :", `Syntax error; token: ":"`},
		{"n = #", `Syntax error; token: "#"`},
		{"odd-name = :n5", `Syntax error; token: "-", near: "odd-name"`},
		{"n BETWEEN :n5", `Syntax error; token: "<EOF>"`},
		{"n BETWEEN :n5 OR :n10", `Syntax error; token: "OR"`},
		{"n IN :n5", `Syntax error; token: ":n5"`},
		{"n IN ()", `Syntax error; token: ")"`},
		{"m[1 = :n5", `Syntax error`},
		{"m[x] = :n5", `Syntax error; token: "x"`},
		{"m.[1] = :n5", `Syntax error; token: "["`},
		{"m. = :n5", `Syntax error`},
		{"1abc = :n5", `Syntax error; token: "1"`},
		{"n = :n5 é", `Syntax error; token: "é"`},
		{"n", `Syntax error; token: "<EOF>"`},
		{"NOT", `Syntax error; token: "<EOF>"`},
		// placeholders
		{"n = :undefined", "Invalid ConditionExpression: An expression attribute value used in expression is not defined; attribute value: :undefined"},
		{"#undefined = :n5", "Invalid ConditionExpression: An expression attribute name used in the document path is not defined; attribute name: #undefined"},
		// reserved words, case-insensitively; placeholders are fine
		{"size = :n5", "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: size"},
		{"Name = :n5", "reserved keyword: Name"},
		{"m.value = :n5", "reserved keyword: value"},
		{"attribute_exists(status)", "reserved keyword: status"},
		// functions
		{"foo(n) = :n5", "Invalid function name; function: foo"},
		{"foo(n)", "Invalid function name; function: foo"},
		{"Attribute_Exists(n)", "Invalid function name; function: Attribute_Exists"},
		{"attribute_exists(n, s)", "Incorrect number of operands for operator or function; operator or function: attribute_exists, number of operands: 2"},
		{"attribute_exists(:n5)", "Operator or function requires a document path; operator or function: attribute_exists"},
		{"begins_with(s)", "Incorrect number of operands for operator or function; operator or function: begins_with, number of operands: 1"},
		{"begins_with(s, :n5)", "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"attribute_type(s, :n5)", "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: N"},
		{"attribute_type(s, :typeBad)", "Invalid attribute type name found; type: STRING, valid types: {B,NULL,SS,BOOL,L,BS,N,NS,S,M}"},
		{"size(:n5) = :n5", "Incorrect operand type for operator or function; operator or function: size, operand type: N"},
		{"n = n", "The first operand must be distinct from the remaining operands for this operator or function; operator: =, first operand: [n]"},
		{"#m.a < m.a", "The first operand must be distinct from the remaining operands for this operator or function; operator: <, first operand: [m, a]"},
		{"contains(l[1], l[1])", "operator: contains, first operand: [l, [1]]"},
		{"((n)) = :n5", "The expression has redundant parentheses;"},
		{"(n = :n5", `Syntax error; token: "<EOF>"`},
		{"(n) = :n5)", `Syntax error; token: ")"`},
		{"size(s)", "The function is not allowed to be used this way in an expression; function: size"},
		{"attribute_exists(n) = :t", "Syntax error"},
		{"size(attribute_exists(n)) = :n5", "The function is not allowed to be used this way in an expression; function: attribute_exists"},
		{"list_append(l, l) = :l3", "function: list_append"},
		// operand types
		{"n BETWEEN :n20 AND :n5", "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {N:20}, upper bound operand: AttributeValue: {N:5}"},
		{"n BETWEEN :n5 AND :s", "The BETWEEN operator requires same data type for lower and upper bounds"},
		// redundant parentheses
		{"((n = :n5))", "The expression has redundant parentheses;"},
		// IN limit
		{"n IN (" + strings.TrimSuffix(strings.Repeat(":n5,", 101), ",") + ")", "The IN operator is provided with too many operands; number of operands: 101"},
		// size and nesting limits
		{"n = :n5 AND " + strings.Repeat("n = :n5 AND ", 400) + "n = :n5", "Expression size has exceeded the maximum allowed size; expression size: "},
		{strings.Repeat("(", 300) + "n = :n5" + strings.Repeat(")", 300), "nested too deeply"},
		{strings.Repeat("NOT ", 300) + "n = :n5", "nested too deeply"},
		{"m" + strings.Repeat(".a", 33) + " = :n5", "The document path has too many nesting levels; nesting levels: 33"},
	}
	for _, tc := range tests {
		_, err := parseCond(t, tc.expr)
		wantValidation(t, tc.expr, err, tc.want)
	}
}

func TestFilterErrorsNameFilterExpression(t *testing.T) {
	_, err := ParseFilter("a = ", NewParams(nil, nil))
	wantValidation(t, "filter", err, "Invalid FilterExpression: Syntax error")
}

func TestErrorPrecedence(t *testing.T) {
	// A syntax error wins over an undefined value seen earlier.
	_, err := parseCond(t, "n = :nope AND (")
	wantValidation(t, "syntax first", err, "Syntax error")
	// A reserved word wins over an undefined value.
	_, err = parseCond(t, "n = :nope AND size = :n5")
	wantValidation(t, "reserved before undefined", err, "reserved keyword: size")
}

func TestParamsUnused(t *testing.T) {
	p := NewParams(map[string]string{"#a": "a", "#b": "b"}, map[string]attr.Value{":x": attr.Str("x"), ":y": attr.Str("y"), ":z": attr.Str("z")})
	if _, err := ParseCondition("#a = :x", p); err != nil {
		t.Fatal(err)
	}
	wantValidation(t, "unused names", p.CheckUnused(), "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b}")
	if _, err := ParseProjection("#b", p); err != nil {
		t.Fatal(err)
	}
	wantValidation(t, "unused values", p.CheckUnused(), "Value provided in ExpressionAttributeValues unused in expressions: keys: {:y, :z}")
	if _, err := ParseUpdate("SET a = :y, b = :z", p); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckUnused(); err != nil {
		t.Errorf("all used: %v", err)
	}
	wantValidation(t, "bad value key", NewParams(nil, map[string]attr.Value{"x": attr.Str("x")}).CheckUnused(),
		`ExpressionAttributeValues contains invalid key: Syntax error; key: "x"`)
	wantValidation(t, "bad name key", NewParams(map[string]string{"n": "n"}, nil).CheckUnused(),
		`ExpressionAttributeNames contains invalid key: Syntax error; key: "n"`)
	if err := NewParams(nil, nil).CheckUnused(); err != nil {
		t.Error(err)
	}
	var nilParams *Params
	if err := nilParams.CheckUnused(); err != nil {
		t.Error(err)
	}
}

func TestReservedWords(t *testing.T) {
	if len(reserved) < 570 {
		t.Errorf("only %d reserved words", len(reserved))
	}
	for _, w := range []string{"ABORT", "zone", "Size", "status", "TTL", "data", "name", "value", "year"} {
		if !isReserved(w) {
			t.Errorf("%s should be reserved", w)
		}
	}
	for _, w := range []string{"pk", "sk", "expires", "n", "sizes", "abortx", strings.Repeat("a", 40)} {
		if isReserved(w) {
			t.Errorf("%s should not be reserved", w)
		}
	}
}

func BenchmarkParseCondition(b *testing.B) {
	vals := map[string]attr.Value{":v": attr.MustNum("5"), ":s": attr.Str("x")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p := NewParams(nil, vals)
		if _, err := ParseCondition("attribute_not_exists(pk) OR (version < :v AND begins_with(s, :s))", p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalCondition(b *testing.B) {
	vals := map[string]attr.Value{":v": attr.MustNum("5"), ":s": attr.Str("x")}
	c, err := ParseCondition("attribute_not_exists(pk) OR (version < :v AND begins_with(s, :s))", NewParams(nil, vals))
	if err != nil {
		b.Fatal(err)
	}
	item := attr.Item{"pk": attr.Str("a"), "version": attr.MustNum("3"), "s": attr.Str("xyz")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !c.Matches(item) {
			b.Fatal("no match")
		}
	}
}

// TestSyntaxErrorsAsAWS checks messages captured from real DynamoDB responses.
func TestSyntaxErrorsAsAWS(t *testing.T) {
	p := func() *Params {
		return NewParams(map[string]string{"#v": "v"}, map[string]attr.Value{":i": attr.MustNum("1"), ":incr": attr.MustNum("1")})
	}
	_, err := ParseCondition("ADD #v :i", p())
	wantValidation(t, "update as condition", err, `Invalid ConditionExpression: Syntax error; token: "ADD", near: "ADD #v"`)
	_, err = ParseUpdate("ADD hits : incr", p())
	wantValidation(t, "spaced placeholder", err, `Invalid UpdateExpression: Syntax error; token: ":", near: "hits : incr"`)
	_, err = ParseUpdate("INVALID SYNTAX HERE", p())
	wantValidation(t, "no clause", err, `Invalid UpdateExpression: Syntax error; token: "INVALID", near: "INVALID SYNTAX"`)
	_, err = ParseUpdate("SET a = :i, #, b = :i", p())
	wantValidation(t, "lone hash", err, `Syntax error; token: "#", near: ", #,"`)
	_, err = ParseUpdate("ADD srTas.MarketplaceFacilitatorTax-Principal :i", p())
	wantValidation(t, "dash", err, `Syntax error; token: "-", near: "MarketplaceFacilitatorTax-Principal"`)
	_, err = ParseUpdate("SET a = :i, b = :i REMOVE delete", p())
	wantValidation(t, "keyword as name", err, `Syntax error; token: "delete"`)
}

func TestNilConditionAndKeyTypes(t *testing.T) {
	var c *Condition
	if ok, err := c.Eval(attr.Item{}); !ok || err != nil || c.TopLevel() != nil {
		t.Error("nil condition should hold")
	}
	p := NewParams(nil, map[string]attr.Value{":h": attr.Str("h"), ":a": attr.MustNum("5"), ":b": attr.MustNum("9")})
	k, err := ParseKeyCondition("pk = :h AND sk BETWEEN :a AND :b", p)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Validate("pk", "sk"); err != nil {
		t.Fatal(err)
	}
	if err := k.CheckTypes(attr.S, attr.N); err != nil {
		t.Error(err)
	}
	k.RangeValues[0], k.RangeValues[1] = k.RangeValues[1], k.RangeValues[0]
	wantValidation(t, "reversed bounds", k.CheckTypes(attr.S, attr.N), "The BETWEEN operator requires upper bound to be greater than or equal to lower bound")
}

func TestLeadingUnderscoreAndFunctionCase(t *testing.T) {
	p := NewParams(nil, map[string]attr.Value{":v": attr.Str("x"), ":x": attr.Str("y")})
	_, err := ParseKeyCondition("a = :v AND __typename = :x", p)
	wantValidation(t, "underscore", err, `Invalid KeyConditionExpression: Syntax error; token: "_", near: "AND __"`)
	_, err = ParseKeyCondition("forum_name = :v and BegIns_WiTh(subject, :x )", NewParams(nil, map[string]attr.Value{":v": attr.Str("x"), ":x": attr.Str("y")}))
	wantValidation(t, "function case", err, "Invalid KeyConditionExpression: Invalid function name; function: BegIns_WiTh")
	if _, err := ParseCondition("a_b1 = :v AND #_x = :x", NewParams(map[string]string{"#_x": "_x"}, map[string]attr.Value{":v": attr.Str("x"), ":x": attr.Str("y")})); err != nil {
		t.Error(err)
	}
}
