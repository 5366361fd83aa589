package restore

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/awserr"
)

func whereItem() event.Item {
	return event.Item{
		"pk":      &types.AttributeValueMemberS{Value: "user#1"},
		"n":       &types.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"},
		"price":   &types.AttributeValueMemberN{Value: "10.50"},
		"b":       &types.AttributeValueMemberB{Value: []byte{1, 2, 3}},
		"ok":      &types.AttributeValueMemberBOOL{Value: true},
		"nul":     &types.AttributeValueMemberNULL{Value: true},
		"tags":    &types.AttributeValueMemberSS{Value: []string{"red", "blue"}},
		"nums":    &types.AttributeValueMemberNS{Value: []string{"1", "2.0"}},
		"my-attr": &types.AttributeValueMemberS{Value: "odd"},
		"cart": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"lines": &types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"sku": &types.AttributeValueMemberS{Value: "A1"}}},
				&types.AttributeValueMemberN{Value: "7"},
			}},
		}},
	}
}

func TestWhereMatches(t *testing.T) {
	cases := []struct {
		expr string
		want bool
	}{
		{"pk = 'user#1'", true},
		{"pk <> 'user#1'", false},
		{"missing <> 'x'", true},
		{"missing = 'x'", false},
		{"price = 10.5", true},
		{"price > 10.49 AND price < 10.51", true},
		{"price >= 10.5 and price <= 10.50", true},
		{"n = 12345678901234567890123456789012345678", true},
		{"n > 12345678901234567890123456789012345677", true},
		{"n = 12345678901234567890123456789012345679", false},
		{"price = '10.5'", false},
		{"pk < 'user#2'", true},
		{"price BETWEEN 10 AND 11", true},
		{"price BETWEEN 11 AND 12", false},
		{"pk IN ('a', 'user#1', 'b')", true},
		{"price IN (1, 2)", false},
		{"NOT pk = 'x'", true},
		{"NOT (pk = 'user#1' OR ok = true)", false},
		{"pk = 'x' OR ok = true", true},
		{"ok = false", false},
		{"nul = null", true},
		{"attribute_exists(cart.lines[0].sku)", true},
		{"attribute_exists(cart.lines[2])", false},
		{"attribute_not_exists(gone)", true},
		{"cart.lines[0].sku = 'A1'", true},
		{"cart.lines[1] = 7", true},
		{"begins_with(pk, 'user#')", true},
		{"begins_with(pk, 'admin')", false},
		{"contains(pk, 'er#')", true},
		{"contains(tags, 'red')", true},
		{"contains(nums, 2)", true},
		{"contains(tags, 'green')", false},
		{"size(tags) = 2", true},
		{"size(pk) > 5", true},
		{"size(cart.lines) = 2", true},
		{"size(b) = 3", true},
		{"`my-attr` = 'odd'", true},
		{"price > -1e3", true},
		{"((pk = 'user#1'))", true},
	}
	it := whereItem()
	for _, c := range cases {
		w, err := ParseWhere(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := w.Match(it); got != c.want {
			t.Errorf("%s: got %v, want %v", c.expr, got, c.want)
		}
	}
}

func TestWhereErrorsNamePosition(t *testing.T) {
	cases := []struct {
		expr string
		pos  int
	}{
		{"pk = :v", 6},
		{"#n = 'x'", 1},
		{"pk = 'open", 6},
		{"pk 'x'", 4},
		{"pk = 'x' AND", 13},
		{"pk = 'x' extra", 10},
		{"size(pk)", 9},
		{"attribute_exists(pk, 'x')", 20},
		{"pk BETWEEN 1 2", 14},
		{"a[x] = 1", 3},
		{"pk = 1e", 6},
		{"", 1},
		{"(pk = 'x'", 10},
		{"pk IN 1", 7},
		{"n BETWEEN 10 AND 9", 18},
		{"pk = contains", 6},
	}
	for _, c := range cases {
		_, err := ParseWhere(c.expr)
		var we *WhereError
		if !errors.As(err, &we) {
			t.Errorf("%q: got %v, want a *WhereError", c.expr, err)
			continue
		}
		if we.Pos != c.pos {
			t.Errorf("%q: position %d (%v), want %d", c.expr, we.Pos, err, c.pos)
		}
	}
}

func TestKeyMatch(t *testing.T) {
	it := event.Item{
		"user": &types.AttributeValueMemberS{Value: "abc"},
		"num":  &types.AttributeValueMemberN{Value: "42.0"},
		"bin":  &types.AttributeValueMemberB{Value: []byte("hi")},
	}
	cases := []struct {
		key  string
		want bool
	}{
		{"user=abc", true},
		{"user=S:abc", true},
		{"user=N:1", false},
		{"user=abd", false},
		{"num=42", true},
		{"num=N:42", true},
		{"num=S:42", false},
		{"bin=B:aGk=", true},
		{"bin=hi", false},
		{"gone=x", false},
	}
	for _, c := range cases {
		k, err := ParseKey(c.key)
		if err != nil {
			t.Errorf("%s: %v", c.key, err)
			continue
		}
		if got := k.Match(it); got != c.want {
			t.Errorf("%s: got %v, want %v", c.key, got, c.want)
		}
	}
	for _, bad := range []string{"noequals", "=x", "n=N:abc", "b=B:!!"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestSelectionKeysOrWithinAttrAndAcross(t *testing.T) {
	mk := func(u, s string) *event.Event {
		return &event.Event{Kind: event.Expired, OldImage: event.Item{
			"user": &types.AttributeValueMemberS{Value: u}, "sess": &types.AttributeValueMemberS{Value: s}}}
	}
	var sel Selection
	for _, k := range []string{"user=a", "user=b", "sess=1"} {
		km, _ := ParseKey(k)
		sel.Keys = append(sel.Keys, km)
	}
	for _, c := range []struct {
		e    *event.Event
		want bool
	}{{mk("a", "1"), true}, {mk("b", "1"), true}, {mk("c", "1"), false}, {mk("a", "2"), false}} {
		if got := sel.Match(c.e); got != c.want {
			t.Errorf("%v: got %v want %v", c.e.OldImage, got, c.want)
		}
	}
}

func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{"pk = 'a'", "size(a.b[0]) BETWEEN 1 AND 2", "NOT (a IN (1,2) OR contains(x, 'y'))",
		"begins_with(`q`, 'x')", "a.b.c[1][2] <> -1.5e3", "((((", "'", "a[", "1e99999999 = n"} {
		f.Add(s)
	}
	it := whereItem()
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseWhere(s)
		if err != nil {
			var we *WhereError
			if !errors.As(err, &we) || we.Pos < 1 || we.Pos > len(s)+1 {
				t.Fatalf("%q: bad error %v", s, err)
			}
			return
		}
		w.Match(it)
	})
}

// TestThrottledErrors: restore backs off on exactly what awserr calls
// throttling (LimitExceededException too, which restore's own list once
// lacked).
func TestThrottledErrors(t *testing.T) {
	for code, want := range map[string]bool{"ProvisionedThroughputExceededException": true, "ThrottlingException": true,
		"RequestLimitExceeded": true, "LimitExceededException": true, "ValidationException": false, "ConditionalCheckFailedException": false} {
		if got := awserr.IsThrottle(&smithy.GenericAPIError{Code: code}); got != want {
			t.Errorf("%s: throttled %v", code, got)
		}
	}
	if awserr.IsThrottle(errors.New("connection reset")) {
		t.Error("a plain error counted as throttling")
	}
}
