package partiql

import (
	"errors"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

func TestParseForms(t *testing.T) {
	cases := []struct {
		src    string
		kind   Kind
		check  func(*Statement) bool
		params int
	}{
		{src: `SELECT * FROM "T"`, kind: Select, check: func(s *Statement) bool { return s.Table == "T" && s.Columns == nil && s.Where == nil }},
		{src: `select a, b.c[2], "d e" from T.idx where pk = 'x'`, kind: Select, check: func(s *Statement) bool {
			return s.Table == "T" && s.Index == "idx" && len(s.Columns) == 3 && len(s.Columns[1].Elems) == 3 && s.Columns[2].Elems[0].Name == "d e"
		}},
		{src: `SELECT * FROM "T" WHERE pk = ? AND sk BETWEEN ? AND ? ORDER BY sk DESC;`, kind: Select, params: 3, check: func(s *Statement) bool { return s.Desc && s.OrderBy != nil }},
		{src: `SELECT * FROM "T" WHERE pk IN ['a', 'b'] OR NOT (x < 3 AND y IS NOT MISSING)`, kind: Select},
		{src: `SELECT * FROM "T" WHERE x NOT IN (1, 2) AND begins_with(s, 'ab') AND size(l) > 2 AND a.b[0].c <> -1.5e3`, kind: Select},
		{src: `INSERT INTO "T" VALUE {'pk': ?, 'n': 1, 'm': {'l': [1, 'two', TRUE, NULL]}, 's': <<'a','b'>>}`, kind: Insert, params: 1},
		{src: `UPDATE "T" SET a = ?, b.c = 3 SET x = x + 1 REMOVE r, q[1] WHERE pk = 'k' RETURNING ALL NEW *`, kind: Update, params: 1, check: func(s *Statement) bool {
			return len(s.Sets) == 3 && len(s.Removes) == 2 && s.Returning == "ALL NEW"
		}},
		{src: `FROM "T" WHERE pk = 'k' SET c = 1`, kind: Update},
		{src: `DELETE FROM "T" WHERE pk = 'k' AND a = 1 RETURNING ALL OLD *`, kind: Delete},
		{src: `EXISTS(SELECT * FROM "T" WHERE pk = 'k' AND a = 1)`, kind: Exists},
		{src: "-- note\nSELECT * FROM \"T\" /* x */ WHERE pk = 'it''s'", kind: Select, check: func(s *Statement) bool {
			return s.Where.(*Binary).R.(*Lit).V.S == "it's"
		}},
	}
	for _, c := range cases {
		st, err := Parse(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if st.Kind != c.kind || st.Params != c.params {
			t.Errorf("%s: kind %v params %d", c.src, st.Kind, st.Params)
		}
		if c.check != nil && !c.check(st) {
			t.Errorf("%s: parsed as %+v", c.src, st)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const nwf = "Statement wasn't well formed, can't be processed: "
	cases := []struct{ src, msg string }{
		{`SELECT * FROM "T" WHERE pk = 1 foo`, nwf + "Unexpected token after expression"},
		{`SELECT * FROM "T" WHERE pk = 1)`, nwf + "Unexpected token after expression"},
		{`DELETE FROM "T" WHERE pk = 1 ORDER BY pk`, nwf + "Unexpected token after expression"},
		{`SELECT * FROM "T" WHERE pk = 1e2147483648`, nwf},
		{`SELECT * FROM "T" WHERE pk = 1 # note`, nwf},
		{`SELECT * FROM "T" WHERE pk = 1 /* note`, nwf},
		{`SELECT * FROM "T" t WHERE pk = 'x'`, "Aliasing is not supported"},
		{`SELECT * FROM "T" AS t WHERE pk = 'x'`, "Aliasing is not supported"},
		{`INSERT INTO "T" t VALUE {'pk': 'x'}`, nwf + "Unexpected token after expression"},
		{`SELECT * FROM "T" WHERE pk = 1e126`, "Number overflow. Attempting to store a number with magnitude larger than supported range under root"},
		{`SELECT * FROM "T" WHERE pk = 'x' AND attribute_exists(m.inner)`, ""},
		{`SELECT * FROM "T" WHERE m.value = 1`, nwf + "Invalid path dot component"},
		{`SELECT attribute_exists(ss) FROM "T"`, "Unexpected path component at 1:8:16"},
		{``, "1 validation error detected: Value '' at 'statement' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{`SELEC * FROM "T"`, nwf + "Unexpected token, expected SELECT, INSERT, UPDATE, DELETE or EXISTS"},
		{`SELECT * FROM "T" WHERE ` + strings.Repeat("(", 500) + "a = 1" + strings.Repeat(")", 500), nwf + "Nesting too deep"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		if c.msg == "" {
			if err != nil {
				t.Errorf("%q: %v", c.src, err)
			}
			continue
		}
		var ae *awserr.Error
		if !errors.As(err, &ae) || ae.Code != awserr.CodeValidation || ae.Message != c.msg {
			t.Errorf("%q:\n got %v\nwant %s", c.src, err, c.msg)
		}
	}
}

func TestBuilderValues(t *testing.T) {
	st, err := Parse(`INSERT INTO "T" VALUE {'pk': ?, 'n': -2.50, 's': <<'a', 'b'>>, 'ns': <<1, 2>>, 'l': [TRUE, NULL]}`)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewBuilder("", []attr.Value{attr.Str("k")}).Value(st.Value)
	if err != nil {
		t.Fatal(err)
	}
	want := attr.Map(attr.Item{"pk": attr.Str("k"), "n": attr.MustNum("-2.5"), "s": attr.StrSet("a", "b"),
		"ns": attr.NumSet("1", "2"), "l": attr.List(attr.Bool(true), attr.Null())})
	if !attr.Equal(v, want) {
		t.Fatalf("got %v, want %v", v, want)
	}
	for src, msg := range map[string]string{
		`INSERT INTO "T" VALUE {'s': <<'x', 'x'>>}`: "One or more parameter values were invalid: Input collection [x, x] contains duplicates.",
		`INSERT INTO "T" VALUE {'s': <<>>}`:         "Empty bags are not supported",
	} {
		st, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewBuilder(src, nil).Value(st.Value); err == nil || !strings.HasSuffix(err.Error(), msg) {
			t.Errorf("%s: got %v, want %s", src, err, msg)
		}
	}
}

func TestBuilderExpressions(t *testing.T) {
	item := attr.Item{"pk": attr.Str("k"), "a": attr.MustNum("3"), "m": attr.Map(attr.Item{"l": attr.List(attr.Str("x"))}),
		"ss": attr.StrSet("a")}
	conds := map[string]bool{
		`a = 3 AND m.l[0] = 'x'`:                true,
		`a BETWEEN 1 AND 2 OR a IN [3, 4]`:      true,
		`NOT (a > 2) OR nope IS MISSING`:        true,
		`a IS NOT MISSING AND nope IS NULL`:     true,
		`begins_with(pk, 'x') OR size(ss) <> 1`: false,
		`contains(ss, 'a') AND a NOT IN (1, 2)`: true,
		`attribute_type(a, 'N') AND a <= 3`:     true,
		`attribute_exists(a) = TRUE`:            true,
		`FALSE <> ATTRIBUTE_EXISTS(nope)`:       false,
		`contains(ss, 'z') = false`:             true,
		`a IS NUMBER AND m IS STRUCT`:           true,
		`ss IS BAG AND pk IS NOT STRING`:        false,
		`m.l IS LIST AND a IS NOT BOOL`:         true,
	}
	for where, want := range conds {
		src := `SELECT * FROM "T" WHERE ` + where
		st, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		c, err := NewBuilder(src, nil).Filter(st.Where)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if got := c.Matches(item); got != want {
			t.Errorf("%s: %v, want %v", where, got, want)
		}
	}
	src := `UPDATE "T" SET a = a + 1, m.l = list_append(m.l, ['y']), ss = set_add(ss, <<'b'>>) REMOVE pk2 WHERE pk = 'k'`
	st, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewBuilder(src, nil).Update(st)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := u.Apply(item)
	if err != nil {
		t.Fatal(err)
	}
	want := attr.Item{"pk": attr.Str("k"), "a": attr.MustNum("4"), "m": attr.Map(attr.Item{"l": attr.List(attr.Str("x"), attr.Str("y"))}),
		"ss": attr.StrSet("a", "b")}
	if !attr.EqualItems(got, want) {
		t.Fatalf("update: got %v, want %v", got, want)
	}
}

func TestBuilderSetFuncErrors(t *testing.T) {
	cases := map[string]string{
		`UPDATE "T" SET t = set_add(ss, <<'x'>>) WHERE pk = 'k'`: "The first argument to SET_ADD must equal the assignment value at 1:20:7",
		`UPDATE "T" SET ss = set_add(ss, 'x') WHERE pk = 'k'`:    "The second argument to SET_ADD must be a value with type SET at 1:29:2",
		`UPDATE "T" SET ss = set_add(ss) WHERE pk = 'k'`:         "SET_ADD must have exactly two arguments at 1:21:7",
		`UPDATE "T" SET ss = set_delete(ss, 'a') WHERE pk = 'k'`: "The second argument to SET_DELETE must be a value with type SET at 1:32:2",
		`UPDATE "T" SET ss = nope(ss) WHERE pk = 'k'`:            "Unrecognized function: nope at 1:21:4",
	}
	for src, msg := range cases {
		st, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewBuilder(src, nil).Update(st)
		var ae *awserr.Error
		if !errors.As(err, &ae) || ae.Message != msg {
			t.Errorf("%s:\n got %v\nwant %s", src, err, msg)
		}
	}
}

func TestProject(t *testing.T) {
	it := attr.Item{"pk": attr.Str("k"), "m": attr.Map(attr.Item{"l": attr.List(attr.Str("x"), attr.Map(attr.Item{"c": attr.Str("deep")}))})}
	for cols, want := range map[string]attr.Item{
		`pk, nope`:      {"pk": attr.Str("k")},
		`m.l[1].c`:      {"c": attr.Str("deep")},
		`m.l[0]`:        {"l": attr.List(attr.Str("x"))},
		`m.l[5], pk[0]`: {},
	} {
		st, err := Parse("SELECT " + cols + ` FROM "T"`)
		if err != nil {
			t.Fatal(err)
		}
		if got := Project(it, st.Columns); !attr.EqualItems(got, want) {
			t.Errorf("%s: got %v, want %v", cols, got, want)
		}
	}
}
