package expr

import (
	"bytes"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// KeyCondition is a parsed KeyConditionExpression: an equality on the hash
// key and, optionally, one condition on the range key. Until Validate has
// been called against the key schema, Hash* holds the first equality
// written and Range* the other condition.
type KeyCondition struct {
	HashName    string
	HashValue   attr.Value
	RangeName   string       // "" when absent
	RangeOp     string       // "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"
	RangeValues []attr.Value // 1 value, 2 for BETWEEN
}

type keyPart struct {
	name   string
	op     string
	values []attr.Value
}

// ParseKeyCondition parses a KeyConditionExpression: one or two
// conditions joined by AND, each `key = :v`, `key < :v` (and <=, >, >=),
// `key BETWEEN :a AND :b` or `begins_with(key, :v)`, on top-level
// attributes, with placeholders for values.
func ParseKeyCondition(s string, p *Params) (*KeyCondition, error) {
	if err := checkSize(kindKey, s); err != nil {
		return nil, err
	}
	ps := newParser(kindKey, s, p)
	root := ps.parseOr()
	if ps.err == nil && ps.tok.kind != tEOF {
		ps.fail()
	}
	if err := ps.result(); err != nil {
		return nil, err
	}
	var conds []*cond
	if err := flattenKey(root, &conds); err != nil {
		return nil, err
	}
	if len(conds) > 2 {
		return nil, awserr.Validation("Invalid %s: Conditions can be of length 1 or 2 only", kindKey)
	}
	parts := make([]keyPart, 0, 2)
	for _, c := range conds {
		kp, err := keyPartOf(c)
		if err != nil {
			return nil, err
		}
		for _, q := range parts {
			if q.name == kp.name {
				return nil, awserr.Validation("KeyConditionExpressions must only contain one condition per key")
			}
		}
		parts = append(parts, kp)
	}
	k := &KeyCondition{}
	hash := -1
	for i, kp := range parts {
		if kp.op == "=" {
			hash = i
			break
		}
	}
	if hash >= 0 {
		k.HashName, k.HashValue = parts[hash].name, parts[hash].values[0]
		if len(parts) == 2 {
			r := parts[1-hash]
			k.RangeName, k.RangeOp, k.RangeValues = r.name, r.op, r.values
		}
	} else {
		// No equality at all: Validate reports the missing hash key.
		k.RangeName, k.RangeOp, k.RangeValues = parts[0].name, parts[0].op, parts[0].values
	}
	return k, nil
}

func flattenKey(c *cond, out *[]*cond) error {
	switch c.kind {
	case cAnd:
		if err := flattenKey(c.l, out); err != nil {
			return err
		}
		return flattenKey(c.r, out)
	case cOr:
		return awserr.Validation("Invalid %s: Invalid operator used in KeyConditionExpression: OR", kindKey)
	case cNot:
		return awserr.Validation("Invalid %s: Invalid operator used in KeyConditionExpression: NOT", kindKey)
	case cIn:
		return awserr.Validation("Invalid %s: Invalid operator used in KeyConditionExpression: IN", kindKey)
	case cCmp:
		if c.op == opNe {
			return awserr.Validation("Invalid %s: Invalid operator used in KeyConditionExpression: <>", kindKey)
		}
	case cBetween, cBeginsWith:
	default:
		return awserr.Validation("Invalid %s: Invalid operator used in KeyConditionExpression: %s", kindKey, c.fnName)
	}
	*out = append(*out, c)
	return nil
}

var flipped = [...]string{opEq: "=", opLt: ">", opLe: ">=", opGt: "<", opGe: "<="}

func keyPartOf(c *cond) (keyPart, error) {
	keyPath := func(o *operand) (string, error) {
		if o.kind != opPath {
			return "", awserr.Validation("Invalid %s: The key condition must reference a key attribute on one side and a value on the other", kindKey)
		}
		if len(o.path) > 1 {
			return "", awserr.Validation("Invalid %s: KeyConditionExpressions cannot have conditions on nested attributes", kindKey)
		}
		return o.path[0].name, nil
	}
	needValue := func(o *operand) error {
		if o.kind != opValue {
			return awserr.Validation("Invalid %s: The key condition must reference a key attribute on one side and a value on the other", kindKey)
		}
		return nil
	}
	switch c.kind {
	case cCmp:
		a, b := &c.args[0], &c.args[1]
		op := c.op.String()
		if a.kind == opValue && b.kind == opPath {
			a, b = b, a
			op = flipped[c.op]
		}
		name, err := keyPath(a)
		if err != nil {
			return keyPart{}, err
		}
		if err := needValue(b); err != nil {
			return keyPart{}, err
		}
		return keyPart{name: name, op: op, values: []attr.Value{b.val}}, nil
	case cBetween:
		name, err := keyPath(&c.args[0])
		if err != nil {
			return keyPart{}, err
		}
		if err := needValue(&c.args[1]); err != nil {
			return keyPart{}, err
		}
		if err := needValue(&c.args[2]); err != nil {
			return keyPart{}, err
		}
		return keyPart{name: name, op: "BETWEEN", values: []attr.Value{c.args[1].val, c.args[2].val}}, nil
	}
	// begins_with
	name, err := keyPath(&c.args[0])
	if err != nil {
		return keyPart{}, err
	}
	if err := needValue(&c.args[1]); err != nil {
		return keyPart{}, err
	}
	if c.args[1].val.T != attr.S && c.args[1].val.T != attr.B {
		return keyPart{}, awserr.Validation("Invalid %s: Incorrect operand type for operator or function; operator or function: begins_with, operand type: %s", kindKey, c.args[1].val.T)
	}
	return keyPart{name: name, op: "begins_with", values: []attr.Value{c.args[1].val}}, nil
}

// Validate checks the condition against a table's or index's key schema
// (rangeKey "" when it has none) and puts the hash and range conditions in
// their fields. Errors are worded as DynamoDB's
// ("Query condition missed key schema element: pk").
func (k *KeyCondition) Validate(hashKey, rangeKey string) error {
	// The parse order is a guess; fix it now that the schema is known.
	if k.HashName != hashKey && k.RangeName == hashKey && k.RangeOp == "=" {
		oldName, oldVal := k.HashName, k.HashValue
		k.HashName, k.HashValue = k.RangeName, k.RangeValues[0]
		k.RangeName, k.RangeOp, k.RangeValues = oldName, "=", []attr.Value{oldVal}
		if oldName == "" {
			k.RangeName, k.RangeOp, k.RangeValues = "", "", nil
		}
	}
	if k.HashName != hashKey {
		if k.RangeName == hashKey {
			return awserr.Validation("Query key condition not supported")
		}
		return awserr.Validation("Query condition missed key schema element: %s", hashKey)
	}
	if k.RangeName == "" {
		return nil
	}
	if rangeKey == "" {
		return awserr.Validation("Query key condition not supported")
	}
	if k.RangeName != rangeKey {
		return awserr.Validation("Query condition missed key schema element: %s", rangeKey)
	}
	return nil
}

// CheckTypes verifies that the condition's values have the key schema's
// types (rangeType 0 when there is no range key).
func (k *KeyCondition) CheckTypes(hashType, rangeType attr.Type) error {
	const msg = "One or more parameter values were invalid: Condition parameter type does not match schema type"
	if k.HashValue.T != hashType {
		return awserr.Validation(msg)
	}
	for _, v := range k.RangeValues {
		if v.T != rangeType {
			return awserr.Validation(msg)
		}
	}
	if k.RangeOp == "BETWEEN" && len(k.RangeValues) == 2 {
		if c, ok := attr.Compare(k.RangeValues[0], k.RangeValues[1]); ok && c > 0 {
			return awserr.Validation("Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {%s:%s}, upper bound operand: AttributeValue: {%s:%s}",
				k.RangeValues[0].T, scalarText(k.RangeValues[0]), k.RangeValues[1].T, scalarText(k.RangeValues[1]))
		}
	}
	return nil
}

// MatchRange reports whether a range key value satisfies the range
// condition (always true without one).
func (k *KeyCondition) MatchRange(v attr.Value) bool {
	if k.RangeName == "" {
		return true
	}
	if len(k.RangeValues) == 0 {
		return false
	}
	x := k.RangeValues[0]
	if k.RangeOp == "begins_with" {
		switch {
		case v.T == attr.S && x.T == attr.S:
			return strings.HasPrefix(v.S, x.S)
		case v.T == attr.B && x.T == attr.B:
			return bytes.HasPrefix(v.B, x.B)
		}
		return false
	}
	c, ok := attr.Compare(v, x)
	if !ok {
		return false
	}
	switch k.RangeOp {
	case "=":
		return c == 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	case "BETWEEN":
		if len(k.RangeValues) != 2 {
			return false
		}
		c2, ok := attr.Compare(v, k.RangeValues[1])
		return ok && c >= 0 && c2 <= 0
	}
	return false
}
