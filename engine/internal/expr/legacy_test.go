package expr

import (
	"reflect"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

func TestLegacyExpected(t *testing.T) {
	it := testItem()
	tests := []struct {
		raw, op string
		want    bool
	}{
		{`{"n":{"Value":{"N":"10"}}}`, "", true},
		{`{"n":{"Value":{"N":"11"}}}`, "", false},
		{`{"n":{"Value":{"N":"10"},"Exists":true}}`, "", true},
		{`{"absent":{"Exists":false}}`, "", true},
		{`{"n":{"Exists":false}}`, "", false},
		{`{"n":{"Value":{"N":"10"}},"absent":{"Exists":false}}`, "AND", true},
		{`{"n":{"Value":{"N":"11"}},"absent":{"Exists":false}}`, "AND", false},
		{`{"n":{"Value":{"N":"11"}},"absent":{"Exists":false}}`, "OR", true},
		{`{"n":{"ComparisonOperator":"GT","AttributeValueList":[{"N":"9"}]}}`, "", true},
		{`{"n":{"ComparisonOperator":"LE","AttributeValueList":[{"N":"9"}]}}`, "", false},
		{`{"n":{"ComparisonOperator":"NE","AttributeValueList":[{"N":"9"}]}}`, "", true},
		{`{"absent":{"ComparisonOperator":"NE","AttributeValueList":[{"N":"9"}]}}`, "", true},
		{`{"n":{"ComparisonOperator":"BETWEEN","AttributeValueList":[{"N":"1"},{"N":"10"}]}}`, "", true},
		{`{"n":{"ComparisonOperator":"IN","AttributeValueList":[{"N":"1"},{"N":"10"}]}}`, "", true},
		{`{"n":{"ComparisonOperator":"NOT_NULL"}}`, "", true},
		{`{"n":{"ComparisonOperator":"NULL"}}`, "", false},
		{`{"ss":{"ComparisonOperator":"CONTAINS","AttributeValueList":[{"S":"red"}]}}`, "", true},
		{`{"ss":{"ComparisonOperator":"NOT_CONTAINS","AttributeValueList":[{"S":"red"}]}}`, "", false},
		{`{"s":{"ComparisonOperator":"BEGINS_WITH","AttributeValueList":[{"S":"hé"}]}}`, "", true},
		{`{"n":{"ComparisonOperator":"GE","Value":{"N":"10"}}}`, "", true},
	}
	for _, tc := range tests {
		c, err := LegacyExpected([]byte(tc.raw), tc.op)
		if err != nil {
			t.Errorf("LegacyExpected(%s): %v", tc.raw, err)
			continue
		}
		if got := c.Matches(it); got != tc.want {
			t.Errorf("LegacyExpected(%s, %q) matches = %v, want %v", tc.raw, tc.op, got, tc.want)
		}
	}
	if c, err := LegacyExpected([]byte(`{}`), ""); c != nil || err != nil {
		t.Errorf("empty Expected: %v %v", c, err)
	}
	errs := []struct{ raw, op, want string }{
		{`{"n":{"Exists":true}}`, "", "Value must be provided when Exists is true for Attribute: n"},
		{`{"n":{"Exists":false,"Value":{"N":"1"}}}`, "", "Value cannot be used when Exists is false for Attribute: n"},
		{`{"n":{"ComparisonOperator":"EQ"}}`, "", "One or more parameter values were invalid: Value or AttributeValueList must be used with ComparisonOperator: EQ for Attribute: n"},
		{`{"n":{"ComparisonOperator":"EQ","AttributeValueList":[]}}`, "", "Invalid number of argument(s) for the EQ ComparisonOperator"},
		{`{"a":{"Exists":true,"ComparisonOperator":"LT"}}`, "", "One or more parameter values were invalid: Exists and ComparisonOperator cannot be used together for Attribute: a"},
		{`{"a":{"AttributeValueList":[]}}`, "", "One or more parameter values were invalid: AttributeValueList can only be used with a ComparisonOperator for Attribute: a"},
		{`{"a":{"Value":{"S":"a"},"AttributeValueList":[]}}`, "", "One or more parameter values were invalid: Value and AttributeValueList cannot be used together for Attribute: a"},
		{`{"a":{"Value":{"S":"a"},"ComparisonOperator":"BETWEEN"}}`, "", "One or more parameter values were invalid: Invalid number of argument(s) for the BETWEEN ComparisonOperator"},
		{`{"a":{"Value":{"S":"a"},"ComparisonOperator":"NULL"}}`, "", "Invalid number of argument(s) for the NULL ComparisonOperator"},
		{`{"a":{"ComparisonOperator":"IN","AttributeValueList":[{"S":"b"},{"N":"1"}]}}`, "", "One or more parameter values were invalid: AttributeValues inside AttributeValueList must be of same type"},
		{`{"n":{"ComparisonOperator":"LT","AttributeValueList":[{"BOOL":true}]}}`, "", "ComparisonOperator LT is not valid for BOOL AttributeValue type"},
		{`{"n":{"ComparisonOperator":"XX","AttributeValueList":[{"N":"1"}]}}`, "", "failed to satisfy constraint"},
		{`{"n":{"ComparisonOperator":"BETWEEN","AttributeValueList":[{"N":"5"},{"N":"1"}]}}`, "", "The BETWEEN condition was provided a range where the lower bound is greater than the upper bound"},
		{`{"n":{"Value":{"N":"x"}}}`, "", "The parameter cannot be converted to a numeric value: x"},
		{`{"n":{"Value":{"N":"1"}},"m":{"Value":{"N":"1"}}}`, "XOR", "conditionalOperator"},
	}
	for _, tc := range errs {
		_, err := LegacyExpected([]byte(tc.raw), tc.op)
		wantValidation(t, tc.raw, err, tc.want)
	}
}

func TestLegacyFilterAndKeyConditions(t *testing.T) {
	c, err := LegacyFilter([]byte(`{"n":{"ComparisonOperator":"GE","AttributeValueList":[{"N":"10"}]},"s":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"nope"}]}}`), "OR")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Matches(testItem()) {
		t.Error("OR filter should match")
	}
	k, err := LegacyKeyConditions([]byte(`{"sk":{"ComparisonOperator":"BETWEEN","AttributeValueList":[{"N":"1"},{"N":"5"}]},"pk":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"a"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Validate("pk", "sk"); err != nil {
		t.Fatal(err)
	}
	if k.HashName != "pk" || k.RangeOp != "BETWEEN" || !k.MatchRange(attr.MustNum("3")) || k.MatchRange(attr.MustNum("6")) {
		t.Errorf("got %+v", k)
	}
	_, err = LegacyKeyConditions([]byte(`{"pk":{"ComparisonOperator":"NE","AttributeValueList":[{"S":"a"}]}}`))
	wantValidation(t, "NE key", err, "Unsupported operator on KeyCondition: NE")
	_, err = LegacyKeyConditions([]byte(`{}`))
	wantValidation(t, "empty key", err, "Conditions can be of length 1 or 2 only")
}

func TestLegacyAttributeUpdates(t *testing.T) {
	base := item(t, `{"pk":{"S":"k"},"n":{"N":"5"},"s":{"S":"x"},"l":{"L":[{"S":"a"}]},"ss":{"SS":["a","b"]}}`)
	u, err := LegacyAttributeUpdates([]byte(`{
		"s":{"Action":"DELETE"},
		"n":{"Action":"ADD","Value":{"N":"2"}},
		"c":{"Action":"ADD","Value":{"N":"1"}},
		"l":{"Action":"ADD","Value":{"L":[{"S":"b"}]}},
		"nl":{"Action":"ADD","Value":{"L":[{"S":"z"}]}},
		"ss":{"Action":"DELETE","Value":{"SS":["a"]}},
		"p":{"Value":{"S":"put"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, touched, err := u.Apply(base)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"c":{"N":"1"},"l":{"L":[{"S":"a"},{"S":"b"}]},"n":{"N":"7"},"nl":{"L":[{"S":"z"}]},"p":{"S":"put"},"pk":{"S":"k"},"ss":{"SS":["b"]}}`
	if itemJSON(got) != want {
		t.Errorf("got  %s\nwant %s", itemJSON(got), want)
	}
	if !reflect.DeepEqual(touched, []string{"c", "l", "n", "nl", "p", "s", "ss"}) {
		t.Errorf("touched %v", touched)
	}
	errs := []struct{ raw, want string }{
		{`{"a":{"Action":"PUT"}}`, "Only DELETE action is allowed when no attribute value is specified"},
		{`{"a":{"Action":"ADD","Value":{"S":"x"}}}`, "ADD action is not supported for the type S"},
		{`{"a":{"Action":"DELETE","Value":{"S":"x"}}}`, "DELETE action with value is not supported for the type S"},
		{`{"a":{"Action":"MOVE","Value":{"S":"x"}}}`, "failed to satisfy constraint"},
	}
	for _, tc := range errs {
		_, err := LegacyAttributeUpdates([]byte(tc.raw))
		wantValidation(t, tc.raw, err, tc.want)
	}
	mismatch, err := LegacyAttributeUpdates([]byte(`{"ss":{"Action":"ADD","Value":{"NS":["1"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = mismatch.Apply(base)
	wantValidation(t, "legacy type mismatch", err, "Type mismatch for attribute to update")
}
