// Package expr is DynamoDB's expression language: condition and filter
// expressions, key conditions, projections and update expressions, parsed
// by a hand-written recursive-descent parser and evaluated against
// attr.Items with DynamoDB's semantics. Every client mistake is an
// *awserr.Error ValidationException worded as DynamoDB words it.
//
// Use: build one Params per request from its ExpressionAttributeNames and
// ExpressionAttributeValues, parse each expression of the request with it
// (ParseCondition, ParseFilter, ParseKeyCondition, ParseProjection,
// ParseUpdate), then call Params.CheckUnused. Parsed values are immutable:
// Condition.Eval, Projection.Apply, Update.Apply and KeyCondition.MatchRange
// may run concurrently. The legacy parameters (Expected, KeyConditions,
// QueryFilter/ScanFilter, AttributeUpdates, AttributesToGet) translate into
// the same types (LegacyExpected, LegacyFilter, LegacyKeyConditions,
// LegacyAttributeUpdates, NewProjection).
//
// Semantics follow DynamoDB: comparisons between different types are false
// (and <> true), as is any comparison with a missing attribute (<> true
// again); size() counts UTF-8 bytes of a string, bytes of a binary and
// elements of sets, lists and maps; every update value is computed from the
// item as it was before the update; a DELETE that empties a set removes the
// attribute.
package expr

import (
	"sort"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Params holds the ExpressionAttributeNames and ExpressionAttributeValues of
// one request and records which of them the request's expressions used. One
// Params is shared by all expressions of a request; it is not safe for
// concurrent use.
type Params struct {
	names      map[string]string
	values     map[string]attr.Value
	usedNames  map[string]struct{}
	usedValues map[string]struct{}
}

// NewParams wraps a request's ExpressionAttributeNames and
// ExpressionAttributeValues (either may be nil).
func NewParams(names map[string]string, values map[string]attr.Value) *Params {
	return &Params{names: names, values: values}
}

func (p *Params) name(ref string) (string, bool) {
	if p == nil {
		return "", false
	}
	n, ok := p.names[ref]
	if ok {
		if p.usedNames == nil {
			p.usedNames = make(map[string]struct{}, len(p.names))
		}
		p.usedNames[ref] = struct{}{}
	}
	return n, ok
}

func (p *Params) value(ref string) (attr.Value, bool) {
	if p == nil {
		return attr.Value{}, false
	}
	v, ok := p.values[ref]
	if ok {
		if p.usedValues == nil {
			p.usedValues = make(map[string]struct{}, len(p.values))
		}
		p.usedValues[ref] = struct{}{}
	}
	return v, ok
}

// CheckUnused returns a ValidationException when a placeholder was
// provided but no expression used it, or when a placeholder key is not
// syntactically valid, as DynamoDB does:
// "Value provided in ExpressionAttributeValues unused in expressions: keys: {:v}".
// Call it after parsing all of a request's expressions.
func (p *Params) CheckUnused() error {
	if p == nil {
		return nil
	}
	for k, v := range p.names {
		if !validRef(k, '#') {
			return awserr.Validation("ExpressionAttributeNames contains invalid key: Syntax error; key: %q", k)
		}
		if v == "" {
			return awserr.Validation("ExpressionAttributeNames contains invalid value: Empty attribute name; key: %q", k)
		}
	}
	for k := range p.values {
		if !validRef(k, ':') {
			return awserr.Validation("ExpressionAttributeValues contains invalid key: Syntax error; key: %q", k)
		}
	}
	if u := unused(p.names, p.usedNames); u != "" {
		return awserr.Validation("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", u)
	}
	if u := unused(p.values, p.usedValues); u != "" {
		return awserr.Validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", u)
	}
	return nil
}

func validRef(k string, lead byte) bool {
	if len(k) < 2 || k[0] != lead {
		return false
	}
	for i := 1; i < len(k); i++ {
		if !isIdentChar(k[i]) {
			return false
		}
	}
	return true
}

func unused[V any](all map[string]V, used map[string]struct{}) string {
	var out []string
	for k := range all {
		if _, ok := used[k]; !ok {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return ""
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
