package conformance

import (
	"bytes"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/internal/ddbjson"
)

// sameItem reports whether two items hold the same attributes with the
// same values as DynamoDB compares them: numbers as decimals (1 = 1.0),
// sets as sets (in any order).
func sameItem(a, b item) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !sameValue(v, w) {
			return false
		}
	}
	return true
}

// sameValue compares two attribute values as sameItem does.
func sameValue(a, b types.AttributeValue) bool {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		return ok && sameNumber(x.Value, y.Value)
	case *types.AttributeValueMemberB:
		y, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(x.Value, y.Value)
	case *types.AttributeValueMemberBOOL:
		y, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberNULL:
		y, ok := b.(*types.AttributeValueMemberNULL)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberSS:
		y, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(x.Value, y.Value, func(a, b string) bool { return a == b })
	case *types.AttributeValueMemberNS:
		y, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(x.Value, y.Value, sameNumber)
	case *types.AttributeValueMemberBS:
		y, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(x.Value, y.Value, bytes.Equal)
	case *types.AttributeValueMemberL:
		y, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(x.Value, y.Value, sameValue)
	case *types.AttributeValueMemberM:
		y, ok := b.(*types.AttributeValueMemberM)
		return ok && sameItem(x.Value, y.Value)
	}
	return false
}

// sameNumber compares two DynamoDB numbers as decimals.
func sameNumber(a, b string) bool {
	x, okx := new(big.Rat).SetString(a)
	y, oky := new(big.Rat).SetString(b)
	return okx && oky && x.Cmp(y) == 0
}

// sameSet reports whether every member of a has one equal in b, and the
// sizes match (a set has no duplicates).
func sameSet[T any](a, b []T, eq func(T, T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y T) bool { return eq(x, y) }) {
			return false
		}
	}
	return true
}

// show writes an item for a detail, attributes sorted: {a:S"x", n:N3}.
func show(it item) string {
	keys := make([]string, 0, len(it))
	for k := range it {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + showValue(it[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func showValue(v types.AttributeValue) string {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S%q", x.Value)
	case *types.AttributeValueMemberN:
		return "N" + x.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B%x", x.Value)
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL %v", x.Value)
	case *types.AttributeValueMemberNULL:
		return ddbjson.TypeNULL
	case *types.AttributeValueMemberSS:
		return fmt.Sprintf("SS%q", x.Value)
	case *types.AttributeValueMemberNS:
		return fmt.Sprintf("NS%v", x.Value)
	case *types.AttributeValueMemberBS:
		return fmt.Sprintf("BS%x", x.Value)
	case *types.AttributeValueMemberL:
		parts := make([]string, len(x.Value))
		for i, e := range x.Value {
			parts[i] = showValue(e)
		}
		return "L[" + strings.Join(parts, ", ") + "]"
	case *types.AttributeValueMemberM:
		return "M" + show(x.Value)
	}
	return fmt.Sprintf("%T", v)
}
