package expr

import (
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// Cases below pin behaviour documented by DynamoDB's published responses
// (update expressions that must be syntax errors, which error wins when an
// expression has several, and path checks at run time).

func TestUpdateSyntaxErrorsTable(t *testing.T) {
	for _, s := range []string{
		"whatever", "set a", "add a", "delete a", "set a=set", "remove a = b", "add a = b",
		"delete a = b", "delete a b", "delete a if_not_exist(b)", "add abort b", "add a if_not_exist(b)",
		"remove a b", "set a b", "set :a = b", "add :a b", "delete :a b", "remove :a",
		"set a = b / c", "set a = b * c", `set a[1] = "eight"`, "set a[1] = 1",
		"SET a = if_not_exist(a, 100)", "SET if_not_exist(a, b) = a", "set (a = (b + c))",
		"set a = (b.c).d + e", "set a = (b.c)[0] + e", "set a = b + c + d",
	} {
		_, err := ParseUpdate(s, NewParams(nil, nil))
		wantValidation(t, s, err, "Invalid UpdateExpression: Syntax error; ")
	}
	// ...while these parse.
	vals := map[string]attr.Value{":a": attr.Str("a")}
	for _, s := range []string{
		"set a = (b + c)", "set a = ((b.c.d)+(e))", "SET a = if_not_exists(a, b) + b",
		"SET a = if_not_exists(a, if_not_exists(a, b))", "set a = :a",
	} {
		if _, err := ParseUpdate(s, NewParams(nil, vals)); err != nil {
			t.Errorf("ParseUpdate(%q): %v", s, err)
		}
	}
}

func TestUpdateErrorPrecedence(t *testing.T) {
	names := map[string]string{"#a": "a", "#b": "b", "#c": "c", "#d": "[3]"}
	tests := []struct {
		expr string
		vals map[string]attr.Value
		want string
	}{
		{" set #x = :c set abOrt = true ", nil, "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: abOrt"},
		{" remove Absolute ", nil, "reserved keyword: Absolute"},
		{"set #x = if_not_exist(:c) set c = d", nil, "Invalid UpdateExpression: Invalid function name; function: if_not_exist"},
		{"set a = #x set c = :d", nil, `The "SET" section can only be used once in an update expression;`},
		{"remove #x set a = b remove e", nil, `The "REMOVE" section can only be used once`},
		{"SET #x = if_not_exists(:c)", nil, "An expression attribute name used in the document path is not defined; attribute name: #x"},
		{"SET #a = if_not_exists(:c)", nil, "An expression attribute value used in expression is not defined; attribute value: :c"},
		{"set d[1] = a, d.b = a, c[1].a = a, #c = if_not_exists(a)", nil, "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [c, [1], a], path two: [c]"},
		{"set c.b.#c = a, c = a, #d = a", nil, "path one: [c, b, c], path two: [c]"},
		{"set a = b remove a, #c, #d", nil, "path one: [a], path two: [a]"},
		{"set #c[3].#d = a, #c[3] = a", nil, "path one: [c, [3], [3]], path two: [c, [3]]"},
		{"remove c, #c.a, #d", nil, "path one: [c], path two: [c, a]"},
		{"set #c[3].#d = a, #c.#d[3] = if_not_exists(a)", nil, "Two document paths conflict with each other; must remove or rewrite one of these paths; path one: [c, [3], [3]], path two: [c, [3], [3]]"},
		{"remove a.#c set a[1] = #d", nil, "path one: [a, c], path two: [a, [1]]"},
		{"set b = list_append(:a, a), c = if_not_exists(a) add a.b :a", map[string]attr.Value{":a": attr.Str("a")},
			"Incorrect operand type for operator or function; operator: ADD, operand type: STRING"},
		{"set a = if_not_exists(if_not_exists(a, b), c)", nil, "Operator or function requires a document path; operator or function: if_not_exists"},
		{"set a = list_append(c)", nil, "Incorrect number of operands for operator or function; operator or function: list_append, number of operands: 1"},
		{"set a = :a + :c", map[string]attr.Value{":a": attr.Str("a"), ":c": attr.Bin([]byte("a"))}, "operator or function: +, operand type: S"},
		{"set a = :c - a", map[string]attr.Value{":c": attr.Bin([]byte("a"))}, "operator or function: -, operand type: B"},
	}
	for _, tc := range tests {
		_, err := ParseUpdate(tc.expr, NewParams(names, tc.vals))
		wantValidation(t, tc.expr, err, tc.want)
	}
}

func TestUpdateInvalidNestedPaths(t *testing.T) {
	base := attr.Item{
		"a": attr.Str("key"),
		"b": attr.Str("key"),
		"c": attr.Map(attr.Item{"1": attr.Str("a")}),
		"d": attr.List(attr.Str("a"), attr.Str("b")),
	}
	for _, s := range []string{
		"set b.a = :a, #1 = :a", "set b[1] = :a, #1 = :a", "set y.a = :a, #1 = :a", "set y[1] = :a, #1 = :a",
		"set c[1] = :a, #1 = :a", "set d.#1 = :a",
		"remove b.a set #1 = :a", "remove b[1] set #1 = :a", "remove y.a set #1 = :a", "remove y[1] set #1 = :a",
		"remove c[1] set #1 = :a", "remove d.#1 set #1 = :a",
		"delete b.a :a set #1 = :a", "delete b[1] :a set #1 = :a", "delete y.a :a set #1 = :a", "delete y[1] :a set #1 = :a",
		"delete c[1] :a set #1 = :a", "delete d.#1 :a",
		"add b.a :a set #1 = :a", "add b[1] :a set #1 = :a", "add y.a :a set #1 = :a", "add y[1] :a set #1 = :a",
		"add c[1] :a set #1 = :a", "add d.#1 :a",
	} {
		u, err := ParseUpdate(s, NewParams(map[string]string{"#1": "1"}, map[string]attr.Value{":a": attr.StrSet("a")}))
		if err != nil {
			t.Errorf("ParseUpdate(%q): %v", s, err)
			continue
		}
		_, _, err = u.Apply(base)
		wantValidation(t, s, err, "The document path provided in the update expression is invalid for update")
	}
	// On an item that does not exist yet, too.
	for _, s := range []string{"set b.a = a", "set b[1] = a"} {
		u, err := ParseUpdate(s, NewParams(nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = u.Apply(attr.Item{"a": attr.Str("k")})
		wantValidation(t, s, err, "The document path provided in the update expression is invalid for update")
	}
}

func TestUpdateRuntimeTypeErrors(t *testing.T) {
	base := attr.Item{
		"a": attr.Str("key"),
		"b": attr.Map(attr.Item{"a": attr.StrSet("1")}),
		"c": attr.MustNum("1"),
		"d": attr.NumSet("1"),
	}
	tests := []struct {
		expr string
		val  attr.Value
	}{
		{"delete d :a", attr.StrSet("1")},
		{"delete b :a", attr.NumSet("1")},
		{"delete b.a :a", attr.NumSet("1")},
		{"delete b.a :a", attr.BinSet([]byte("a"))},
		{"delete c :a", attr.NumSet("1")},
		{"add b :a", attr.NumSet("1")},
		{"add d :a", attr.MustNum("1")},
		{"set e = a + :a", attr.MustNum("1")},
		{"set e = b - :a", attr.MustNum("1")},
		{"set e = list_append(d, if_not_exists(f, :a))", attr.List()},
	}
	for _, tc := range tests {
		u, err := ParseUpdate(tc.expr, NewParams(nil, map[string]attr.Value{":a": tc.val}))
		if err != nil {
			t.Errorf("ParseUpdate(%q): %v", tc.expr, err)
			continue
		}
		_, _, err = u.Apply(base)
		wantValidation(t, tc.expr, err, "An operand in the update expression has an incorrect data type")
	}
	for _, s := range []string{"set c2 = absent", "set e = list_append(absent, c)"} {
		u, _ := ParseUpdate(s, NewParams(nil, nil))
		_, _, err := u.Apply(base)
		wantValidation(t, s, err, "The provided expression refers to an attribute that does not exist in the item")
	}
}
