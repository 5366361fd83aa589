package expr

import (
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// TestSDKBuilderStyle parses expressions written the way the AWS SDKs'
// expression builders write them (placeholders #0/:0, parentheses around
// every operand of AND/OR, a space before function parentheses, clauses on
// separate lines) and checks that every placeholder counts as used.
func TestSDKBuilderStyle(t *testing.T) {
	names := map[string]string{"#0": "pk", "#1": "sk", "#2": "count", "#3": "tags", "#4": "profile", "#5": "city"}
	values := map[string]attr.Value{
		":0": attr.Str("user"), ":1": attr.Str("a"), ":2": attr.MustNum("1"), ":3": attr.StrSet("x"), ":4": attr.Str("Paris"),
	}
	base := attr.Item{"pk": attr.Str("user"), "sk": attr.Str("abc"), "count": attr.MustNum("4"),
		"tags": attr.StrSet("x", "y"), "profile": attr.Map(attr.Item{"city": attr.Str("Paris")})}

	p := NewParams(names, values)
	c, err := ParseCondition("((#0 = :0) AND (begins_with (#1, :1))) AND (NOT (attribute_not_exists (#2)))", p)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Matches(base) {
		t.Error("condition should match")
	}
	k, err := ParseKeyCondition("(#0 = :0) AND (begins_with (#1, :1))", p)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Validate("pk", "sk"); err != nil || !k.MatchRange(attr.Str("abc")) {
		t.Errorf("key condition: %v", err)
	}
	f, err := ParseFilter("(size (#3) >= :2) OR (#4.#5 = :4)", p)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Matches(base) {
		t.Error("filter should match")
	}
	pr, err := ParseProjection("#0, #1, #4.#5", p)
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Apply(base)) != 3 {
		t.Errorf("projection: %v", pr.Apply(base))
	}
	u, err := ParseUpdate("ADD #2 :2\nDELETE #3 :3\nSET #4.#5 = if_not_exists(#4.#5, :4)\n", p)
	if err != nil {
		t.Fatal(err)
	}
	got, touched, err := u.Apply(base)
	if err != nil {
		t.Fatal(err)
	}
	if got["count"].S != "5" || len(got["tags"].SS) != 1 || len(touched) != 3 {
		t.Errorf("update: %s %v", itemJSON(got), touched)
	}
	if err := p.CheckUnused(); err != nil {
		t.Error(err)
	}
}

func TestParamsEmptyName(t *testing.T) {
	p := NewParams(map[string]string{"#e": ""}, nil)
	if _, err := ParseProjection("#e", p); err != nil {
		t.Fatal(err)
	}
	wantValidation(t, "empty name", p.CheckUnused(), "ExpressionAttributeNames contains invalid value: Empty attribute name")
}
