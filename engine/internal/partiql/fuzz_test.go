package partiql

import (
	"errors"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// FuzzParse checks that no statement makes the parser or the builder
// panic, and that every refusal is a ValidationException.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`SELECT * FROM "T" WHERE pk = ? AND sk BETWEEN 1 AND 2 ORDER BY sk DESC`,
		`SELECT a, b.c[1] FROM T."i" WHERE x IN ['a', ?] OR NOT y IS NOT MISSING`,
		`INSERT INTO "T" VALUE {'pk': 'a', 'm': {'l': [1, -2.5e3, TRUE, NULL, <<'x'>>]}}`,
		`UPDATE "T" SET a = a + 1, l = list_append(l, [1]) SET s = set_add(s, <<1>>) REMOVE r WHERE pk = 'k' RETURNING MODIFIED OLD *`,
		`FROM "T" WHERE pk = 'k' SET c = 1`,
		`DELETE FROM "T" WHERE pk = 'k' AND begins_with(a, 'x') RETURNING ALL OLD *`,
		`EXISTS(SELECT * FROM "T" WHERE pk = 'k' AND size(a) > 1)`,
		"-- c\nSELECT * FROM \"T\" /* c */ WHERE a <> 'it''s'",
		`SELECT * FROM "T" WHERE ((((a = 1))))`,
		`<<`, `'`, `"`, `/*`, `1e`, `[`, `{`, `?`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		st, err := Parse(src)
		if err != nil {
			var ae *awserr.Error
			if !errors.As(err, &ae) || ae.Code != awserr.CodeValidation {
				t.Fatalf("%q: error %v is not a ValidationException", src, err)
			}
			return
		}
		params := make([]attr.Value, st.Params)
		for i := range params {
			params[i] = attr.Str("p")
		}
		b := NewBuilder(src, params)
		if st.Where != nil {
			b.Filter(st.Where)
			b.Condition(Conjuncts(st.Where), "pk")
		}
		if st.Value != nil {
			b.Value(st.Value)
		}
		Project(attr.Item{"a": attr.List(attr.Map(attr.Item{"b": attr.Str("x")}))}, st.Columns)
		if st.Kind == Update {
			b.Update(st)
		}
	})
}
