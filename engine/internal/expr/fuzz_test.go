package expr

import (
	"errors"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// fuzzParams has a few names and values of every type for fuzzed expressions.
func fuzzParams() *Params {
	return NewParams(
		map[string]string{"#a": "a", "#b": "b.c", "#n": "name"},
		map[string]attr.Value{
			":n": attr.MustNum("1"), ":s": attr.Str("x"), ":b": attr.Bin([]byte{1}),
			":l": attr.List(attr.Str("y")), ":m": attr.Map(attr.Item{"k": attr.Null()}),
			":ss": attr.StrSet("x"), ":ns": attr.NumSet("1"), ":t": attr.Bool(true), ":z": attr.Null(),
		})
}

// fuzzItem is an item with nested maps, lists and sets.
func fuzzItem() attr.Item {
	return attr.Item{
		"a": attr.MustNum("5"),
		"c": attr.Str("xyz"),
		"l": attr.List(attr.MustNum("1"), attr.Map(attr.Item{"k": attr.StrSet("x")}), attr.List()),
		"m": attr.Map(attr.Item{"x": attr.Map(attr.Item{"y": attr.Bin([]byte{1, 2})}), "n": attr.NumSet("1", "2")}),
		"s": attr.StrSet("x", "y"),
	}
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	var ae *awserr.Error
	if err != nil && (!errors.As(err, &ae) || ae.Code != awserr.CodeValidation) {
		t.Fatalf("error is not a ValidationException: %v", err)
	}
}

var condSeeds = []string{
	"a = :n", "a <> :s AND NOT (c < :s OR c >= :s)", "a BETWEEN :n AND :n", "a IN (:n, :s, :b)",
	"attribute_exists(m.x.y) AND attribute_not_exists(l[1].k)", "attribute_type(#a, :s)",
	"begins_with(c, :s) OR contains(s, :s) OR contains(l, :n)", "size(l) > :n", "((a = :n))",
	"#n = :z", "NOT NOT NOT a = :n", "a = ", "size(:n) = :n", "foo(a)", "l[99999999999] = :n",
}

func FuzzParseCondition(f *testing.F) {
	for _, s := range condSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := fuzzParams()
		c, err := ParseCondition(s, p)
		checkErr(t, err)
		if err == nil {
			c.Matches(fuzzItem())
			c.Matches(nil)
		}
		checkErr(t, p.CheckUnused())
		k, err := ParseKeyCondition(s, fuzzParams())
		checkErr(t, err)
		if err == nil {
			checkErr(t, k.Validate("a", "c"))
			k.MatchRange(attr.Str("xy"))
			checkErr(t, k.CheckTypes(attr.N, attr.S))
		}
	})
}

func FuzzParseUpdate(f *testing.F) {
	for _, s := range []string{
		"SET a = a + :n, c = if_not_exists(c, :s) REMOVE l[0], l[2] ADD s :ss DELETE m.n :ns",
		"SET l = list_append(l, :l), #b = :m", "SET m.x.y = :b, l[5] = :n", "REMOVE a SET a = :n",
		"ADD a :n, q :n", "DELETE s :ss", "SET a = a - a", "SET l[1].k = :t", "SET x = list_append(if_not_exists(x, :l), :l)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUpdate(s, fuzzParams())
		checkErr(t, err)
		if err != nil {
			return
		}
		in := fuzzItem()
		before := string(attr.AppendItemJSON(nil, in))
		out, _, err := u.Apply(in)
		checkErr(t, err)
		if string(attr.AppendItemJSON(nil, in)) != before {
			t.Fatal("Apply modified its input")
		}
		if err == nil {
			// Sets in the result are never empty.
			var walk func(v attr.Value)
			walk = func(v attr.Value) {
				switch v.T {
				case attr.SS, attr.NS, attr.BS:
					if attr.CheckSet(v) != nil {
						t.Fatalf("invalid set in result: %v", v)
					}
				case attr.M:
					for _, x := range v.M {
						walk(x)
					}
				case attr.L:
					for _, x := range v.L {
						walk(x)
					}
				}
			}
			walk(attr.Map(out))
		}
		if _, _, err := u.Apply(nil); err != nil {
			checkErr(t, err)
		}
	})
}

func FuzzParseProjection(f *testing.F) {
	for _, s := range []string{"a", "a, c", "m.x.y, l[1].k, #a", "l[0], l[2]", "a, a", "a.", "#b", "name"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pr, err := ParseProjection(s, fuzzParams())
		checkErr(t, err)
		if err == nil {
			pr.Apply(fuzzItem())
			pr.TopLevel()
		}
	})
}

func FuzzParseKeyCondition(f *testing.F) {
	for _, s := range []string{
		"a = :n", "a = :n AND c > :s", "c BETWEEN :s AND :s AND a = :n", "begins_with(c, :s) AND a = :n",
		"a = :n OR c = :s", "(a = :n) AND (c <= :s)", ":n = a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKeyCondition(s, fuzzParams())
		checkErr(t, err)
		if err == nil {
			checkErr(t, k.Validate("a", "c"))
			k.MatchRange(attr.Str("x"))
		}
	})
}

func FuzzLegacy(f *testing.F) {
	for _, s := range []string{
		`{"a":{"Value":{"N":"1"}},"c":{"Exists":false}}`,
		`{"a":{"ComparisonOperator":"BETWEEN","AttributeValueList":[{"N":"1"},{"N":"2"}]}}`,
		`{"a":{"ComparisonOperator":"EQ","AttributeValueList":[{"N":"5"}]},"c":{"ComparisonOperator":"BEGINS_WITH","AttributeValueList":[{"S":"x"}]}}`,
		`{"a":{"Action":"ADD","Value":{"N":"1"}},"l":{"Action":"ADD","Value":{"L":[]}},"s":{"Action":"DELETE"}}`,
	} {
		f.Add([]byte(s), "OR")
	}
	f.Fuzz(func(t *testing.T, raw []byte, op string) {
		var ae *awserr.Error
		check := func(err error) {
			if err != nil && !errors.As(err, &ae) {
				t.Fatalf("error is not an *awserr.Error: %v", err)
			}
		}
		if c, err := LegacyExpected(raw, op); err == nil && c != nil {
			c.Matches(fuzzItem())
		} else {
			check(err)
		}
		if c, err := LegacyFilter(raw, op); err == nil && c != nil {
			c.Matches(fuzzItem())
		} else {
			check(err)
		}
		if k, err := LegacyKeyConditions(raw); err == nil {
			checkErr(t, k.Validate("a", "c"))
			k.MatchRange(attr.Str("x"))
		} else {
			check(err)
		}
		if u, err := LegacyAttributeUpdates(raw); err == nil {
			_, _, err := u.Apply(fuzzItem())
			checkErr(t, err)
		} else {
			check(err)
		}
	})
}
