package expr

import (
	"encoding/json"
	"errors"
	"sort"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// This file translates DynamoDB's legacy (pre-expression) request
// parameters into the structures the expression parsers build: Expected
// and QueryFilter/ScanFilter (with ConditionalOperator) into a Condition,
// KeyConditions into a KeyCondition, AttributeUpdates into an Update and
// AttributesToGet into a Projection (NewProjection). Each takes the
// parameter's raw JSON as the request carried it.

// legacyCondition is one entry of Expected, KeyConditions, QueryFilter or ScanFilter.
type legacyCondition struct {
	AttributeValueList []attr.Value `json:"AttributeValueList"`
	ComparisonOperator string       `json:"ComparisonOperator"`
	Value              *attr.Value  `json:"Value"`  // Expected only
	Exists             *bool        `json:"Exists"` // Expected only
}

func decodeLegacy(param string, raw []byte, into any) error {
	if err := json.Unmarshal(raw, into); err != nil {
		var ae *awserr.Error
		if errors.As(err, &ae) {
			return ae
		}
		return awserr.Newf(awserr.CodeSerialization, "Invalid %s: %v", param, err)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return awserr.Validation("One or more parameter values were invalid: "+format, args...)
}

// legacyOps lists each ComparisonOperator's operand count (-1: one or more).
var legacyOps = map[string]int{
	"EQ": 1, "NE": 1, "LE": 1, "LT": 1, "GE": 1, "GT": 1,
	"NOT_NULL": 0, "NULL": 0, "CONTAINS": 1, "NOT_CONTAINS": 1,
	"BEGINS_WITH": 1, "IN": -1, "BETWEEN": 2,
}

// legacyCond builds the condition node for one attribute.
func legacyCond(name string, lc legacyCondition) (*cond, error) {
	op := lc.ComparisonOperator
	want, ok := legacyOps[op]
	if !ok {
		return nil, awserr.Validation("1 validation error detected: Value '%s' at 'comparisonOperator' failed to satisfy constraint: Member must satisfy enum value set: [IN, NULL, BETWEEN, LT, NOT_CONTAINS, EQ, GT, NOT_NULL, NE, LE, BEGINS_WITH, GE, CONTAINS]", op)
	}
	vals := lc.AttributeValueList
	if want >= 0 && len(vals) != want || want < 0 && len(vals) == 0 {
		return nil, invalid("Invalid number of argument(s) for the %s ComparisonOperator", op)
	}
	for _, v := range vals {
		switch op {
		case "LE", "LT", "GE", "GT", "BETWEEN", "IN":
			if v.T != attr.S && v.T != attr.N && v.T != attr.B {
				return nil, invalid("ComparisonOperator %s is not valid for %s AttributeValue type", op, v.T)
			}
		case "BEGINS_WITH":
			if v.T != attr.S && v.T != attr.B {
				return nil, invalid("ComparisonOperator %s is not valid for %s AttributeValue type", op, v.T)
			}
		case "CONTAINS", "NOT_CONTAINS":
			if v.T != attr.S && v.T != attr.N && v.T != attr.B {
				return nil, invalid("ComparisonOperator %s is not valid for %s AttributeValue type", op, v.T)
			}
		}
	}
	if op == "BETWEEN" || op == "IN" {
		for _, v := range vals[1:] {
			if v.T != vals[0].T {
				return nil, invalid("AttributeValues inside AttributeValueList must be of same type")
			}
		}
	}
	if op == "BETWEEN" {
		if c, ok := attr.Compare(vals[0], vals[1]); ok && c > 0 {
			return nil, awserr.Validation("The BETWEEN condition was provided a range where the lower bound is greater than the upper bound")
		}
	}
	p := operand{kind: opPath, path: path{{name: name, idx: -1}}, text: name}
	lit := func(v attr.Value) operand { return operand{kind: opValue, val: v} }
	switch op {
	case "NULL":
		return &cond{kind: cNotExists, args: []operand{p}}, nil
	case "NOT_NULL":
		return &cond{kind: cExists, args: []operand{p}}, nil
	case "CONTAINS":
		return &cond{kind: cContains, args: []operand{p, lit(vals[0])}}, nil
	case "NOT_CONTAINS":
		return &cond{kind: cNot, l: &cond{kind: cContains, args: []operand{p, lit(vals[0])}}}, nil
	case "BEGINS_WITH":
		return &cond{kind: cBeginsWith, args: []operand{p, lit(vals[0])}}, nil
	case "BETWEEN":
		return &cond{kind: cBetween, args: []operand{p, lit(vals[0]), lit(vals[1])}}, nil
	case "IN":
		args := []operand{p}
		for _, v := range vals {
			args = append(args, lit(v))
		}
		return &cond{kind: cIn, args: args}, nil
	}
	cmp := map[string]cmpOp{"EQ": opEq, "NE": opNe, "LE": opLe, "LT": opLt, "GE": opGe, "GT": opGt}[op]
	return &cond{kind: cCmp, op: cmp, args: []operand{p, lit(vals[0])}}, nil
}

// combine joins conditions (in attribute-name order) with AND or OR.
func combine(conds []*cond, operator string) (*Condition, error) {
	if len(conds) == 0 {
		return nil, nil
	}
	kind := cAnd
	switch operator {
	case "", "AND":
	case "OR":
		kind = cOr
	default:
		return nil, awserr.Validation("1 validation error detected: Value '%s' at 'conditionalOperator' failed to satisfy constraint: Member must satisfy enum value set: [OR, AND]", operator)
	}
	root := conds[0]
	for _, c := range conds[1:] {
		root = &cond{kind: kind, l: root, r: c}
	}
	return &Condition{root: root}, nil
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// LegacyExpected translates the Expected parameter of PutItem, UpdateItem
// and DeleteItem (with ConditionalOperator, "" meaning AND) into a
// Condition. A nil Condition and nil error mean "no condition".
func LegacyExpected(raw []byte, conditionalOperator string) (*Condition, error) {
	var m map[string]legacyCondition
	if err := decodeLegacy("Expected", raw, &m); err != nil {
		return nil, err
	}
	var conds []*cond
	for _, name := range sortedNames(m) {
		lc := m[name]
		if lc.Value != nil && lc.AttributeValueList != nil {
			return nil, invalid("Value and AttributeValueList cannot be used together for Attribute: %s", name)
		}
		if lc.ComparisonOperator != "" {
			if lc.Exists != nil {
				return nil, invalid("Exists and ComparisonOperator cannot be used together for Attribute: %s", name)
			}
			if lc.Value != nil {
				lc.AttributeValueList = []attr.Value{*lc.Value}
			} else if lc.AttributeValueList == nil && legacyOps[lc.ComparisonOperator] != 0 {
				return nil, invalid("Value or AttributeValueList must be used with ComparisonOperator: %s for Attribute: %s", lc.ComparisonOperator, name)
			}
			c, err := legacyCond(name, lc)
			if err != nil {
				return nil, err
			}
			conds = append(conds, c)
			continue
		}
		if lc.AttributeValueList != nil {
			return nil, invalid("AttributeValueList can only be used with a ComparisonOperator for Attribute: %s", name)
		}
		exists := lc.Exists == nil || *lc.Exists
		p := operand{kind: opPath, path: path{{name: name, idx: -1}}, text: name}
		switch {
		case exists && lc.Value == nil:
			return nil, invalid("Value must be provided when Exists is true for Attribute: %s", name)
		case !exists && lc.Value != nil:
			return nil, invalid("Value cannot be used when Exists is false for Attribute: %s", name)
		case !exists:
			conds = append(conds, &cond{kind: cNotExists, args: []operand{p}})
		default:
			conds = append(conds, &cond{kind: cCmp, op: opEq, args: []operand{p, {kind: opValue, val: *lc.Value}}})
		}
	}
	return combine(conds, conditionalOperator)
}

// LegacyFilter translates QueryFilter or ScanFilter (with
// ConditionalOperator) into a Condition; nil when the filter is empty.
func LegacyFilter(raw []byte, conditionalOperator string) (*Condition, error) {
	var m map[string]legacyCondition
	if err := decodeLegacy("Filter", raw, &m); err != nil {
		return nil, err
	}
	var conds []*cond
	for _, name := range sortedNames(m) {
		c, err := legacyCond(name, m[name])
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return combine(conds, conditionalOperator)
}

// LegacyKeyConditions translates Query's KeyConditions into a
// KeyCondition (call Validate on it as for a KeyConditionExpression).
func LegacyKeyConditions(raw []byte) (*KeyCondition, error) {
	var m map[string]legacyCondition
	if err := decodeLegacy("KeyConditions", raw, &m); err != nil {
		return nil, err
	}
	if len(m) == 0 || len(m) > 2 {
		return nil, awserr.Validation("Conditions can be of length 1 or 2 only")
	}
	var parts []keyPart
	for _, name := range sortedNames(m) {
		lc := m[name]
		var op string
		switch lc.ComparisonOperator {
		case "EQ":
			op = "="
		case "LE":
			op = "<="
		case "LT":
			op = "<"
		case "GE":
			op = ">="
		case "GT":
			op = ">"
		case "BEGINS_WITH":
			op = "begins_with"
		case "BETWEEN":
			op = "BETWEEN"
		default:
			return nil, invalid("Unsupported operator on KeyCondition: %s", lc.ComparisonOperator)
		}
		if _, err := legacyCond(name, lc); err != nil {
			return nil, err
		}
		parts = append(parts, keyPart{name: name, op: op, values: lc.AttributeValueList})
	}
	k := &KeyCondition{}
	hash := -1
	for i, kp := range parts {
		if kp.op == "=" {
			hash = i
			break
		}
	}
	if hash < 0 {
		k.RangeName, k.RangeOp, k.RangeValues = parts[0].name, parts[0].op, parts[0].values
		return k, nil
	}
	k.HashName, k.HashValue = parts[hash].name, parts[hash].values[0]
	if len(parts) == 2 {
		r := parts[1-hash]
		k.RangeName, k.RangeOp, k.RangeValues = r.name, r.op, r.values
	}
	return k, nil
}

// LegacyAttributeUpdates translates UpdateItem's AttributeUpdates into an
// Update: PUT sets, DELETE without a value removes, DELETE with a set
// removes members, ADD adds to a number or set or appends to a list.
func LegacyAttributeUpdates(raw []byte) (*Update, error) {
	var m map[string]struct {
		Value  *attr.Value `json:"Value"`
		Action string      `json:"Action"`
	}
	if err := decodeLegacy("AttributeUpdates", raw, &m); err != nil {
		return nil, err
	}
	u := &Update{legacy: true}
	for _, name := range sortedNames(m) {
		e := m[name]
		p := path{{name: name, idx: -1}}
		switch e.Action {
		case "", "PUT":
			if e.Value == nil {
				return nil, invalid("Only DELETE action is allowed when no attribute value is specified")
			}
			u.actions = append(u.actions, action{kind: actSet, path: p, val: operand{kind: opValue, val: *e.Value}})
		case "DELETE":
			if e.Value == nil {
				u.actions = append(u.actions, action{kind: actRemove, path: p})
				continue
			}
			if !e.Value.IsSet() {
				return nil, invalid("DELETE action with value is not supported for the type %s", e.Value.T)
			}
			u.actions = append(u.actions, action{kind: actDelete, path: p, val: operand{kind: opValue, val: *e.Value}})
		case "ADD":
			if e.Value == nil {
				return nil, invalid("Only DELETE action is allowed when no attribute value is specified")
			}
			switch {
			case e.Value.T == attr.L:
				// Append to the list, creating it when absent.
				self := operand{kind: opPath, path: p}
				empty := operand{kind: opValue, val: attr.List()}
				cur := operand{kind: opIfNotExists, args: []operand{self, empty}}
				val := operand{kind: opListAppend, args: []operand{cur, {kind: opValue, val: *e.Value}}}
				u.actions = append(u.actions, action{kind: actSet, path: p, val: val})
			case e.Value.T == attr.N || e.Value.IsSet():
				u.actions = append(u.actions, action{kind: actAdd, path: p, val: operand{kind: opValue, val: *e.Value}})
			default:
				return nil, invalid("ADD action is not supported for the type %s", e.Value.T)
			}
		default:
			return nil, awserr.Validation("1 validation error detected: Value '%s' at 'attributeUpdates.%s.member.action' failed to satisfy constraint: Member must satisfy enum value set: [ADD, PUT, DELETE]", e.Action, name)
		}
	}
	return u, nil
}
