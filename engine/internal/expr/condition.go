package expr

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// condKind says what a condition node is.
type condKind uint8

const (
	cAnd condKind = iota + 1
	cOr
	cNot
	cCmp
	cBetween
	cIn
	cExists
	cNotExists
	cType
	cBeginsWith
	cContains
)

// cmpOp is a comparator.
type cmpOp uint8

const (
	opEq cmpOp = iota + 1
	opNe
	opLt
	opLe
	opGt
	opGe
)

var cmpNames = [...]string{"", "=", "<>", "<", "<=", ">", ">="}

func (o cmpOp) String() string { return cmpNames[o] }

// cond is one node of a condition tree.
type cond struct {
	kind  condKind
	op    cmpOp
	paren bool // written inside parentheses
	l, r  *cond
	// args are the operands: left and right of a comparison; value, lower
	// and upper bound of BETWEEN; value then list of IN; a function's arguments.
	args   []operand
	typ    attr.Type // attribute_type
	fnName string
}

// Condition is a parsed ConditionExpression or FilterExpression.
type Condition struct {
	root *cond
}

// ParseCondition parses a ConditionExpression. Placeholders are resolved
// (and marked used) in p. Errors are ValidationExceptions worded as
// DynamoDB's ("Invalid ConditionExpression: Syntax error; token: ...").
func ParseCondition(s string, p *Params) (*Condition, error) {
	return parseCondition(kindCondition, s, p)
}

// ParseFilter parses a FilterExpression: ParseCondition with errors that
// name FilterExpression.
func ParseFilter(s string, p *Params) (*Condition, error) {
	return parseCondition(kindFilter, s, p)
}

func parseCondition(kind, s string, p *Params) (*Condition, error) {
	if err := checkSize(kind, s); err != nil {
		return nil, err
	}
	ps := newParser(kind, s, p)
	root := ps.parseOr()
	if ps.err == nil && ps.tok.kind != tEOF {
		ps.fail()
	}
	if err := ps.result(); err != nil {
		return nil, err
	}
	return &Condition{root: root}, nil
}

// Eval reports whether item satisfies the condition. A nil item (no such
// item) has no attributes. Type mismatches make comparisons false, as in
// DynamoDB; the error is reserved for failures DynamoDB reports at run time
// (none for conditions today).
func (c *Condition) Eval(item attr.Item) (bool, error) {
	if c == nil || c.root == nil {
		return true, nil
	}
	return c.root.eval(item), nil
}

// Matches is Eval without the error.
func (c *Condition) Matches(item attr.Item) bool {
	ok, _ := c.Eval(item)
	return ok
}

// Grammar, lowest precedence first:
//
//	or      := and { OR and }
//	and     := not { AND not }
//	not     := NOT not | primary
//	primary := '(' or ')' | function | operand comparator operand
//	         | operand BETWEEN operand AND operand | operand IN '(' operand {',' operand} ')'
func (ps *parser) parseOr() *cond {
	if !ps.enter() {
		return nil
	}
	defer ps.leave()
	l := ps.parseAnd()
	for ps.err == nil && ps.isKeyword("OR") {
		ps.advance()
		r := ps.parseAnd()
		l = &cond{kind: cOr, l: l, r: r}
	}
	return l
}

func (ps *parser) parseAnd() *cond {
	l := ps.parseNot()
	for ps.err == nil && ps.isKeyword("AND") {
		ps.advance()
		r := ps.parseNot()
		l = &cond{kind: cAnd, l: l, r: r}
	}
	return l
}

func (ps *parser) parseNot() *cond {
	if ps.isKeyword("NOT") {
		if !ps.enter() {
			return nil
		}
		defer ps.leave()
		ps.advance()
		x := ps.parseNot()
		return &cond{kind: cNot, l: x}
	}
	return ps.parsePrimary()
}

func (ps *parser) parsePrimary() *cond {
	if ps.err != nil {
		return nil
	}
	if ps.tok.kind == tLParen && !ps.parenIsOperand() {
		ps.advance()
		x := ps.parseOr()
		if !ps.expect(tRParen) {
			return nil
		}
		if x != nil {
			if x.paren {
				ps.semantic(eParens, "The expression has redundant parentheses;")
			}
			x.paren = true
		}
		return x
	}
	isFunc := ps.isFuncCall()
	if isFunc && functionClass(ps.text(ps.tok)) == fnCondition {
		return ps.parseCondFunc(ps.text(ps.tok))
	}
	a := ps.parseCondOperand()
	if ps.err != nil {
		return nil
	}
	if isFunc && !ps.isKeyword("BETWEEN") && !ps.isKeyword("IN") && (ps.tok.kind < tEq || ps.tok.kind > tGe) {
		// A function that is not a condition, used as one.
		ps.semantic(eMisusedFunc, "The function is not allowed to be used this way in an expression; function: %s", a.text)
		return &cond{kind: cExists, args: []operand{a}}
	}
	switch {
	case ps.isKeyword("BETWEEN"):
		ps.advance()
		lo := ps.parseCondOperand()
		if !ps.isKeyword("AND") {
			ps.fail()
			return nil
		}
		ps.advance()
		hi := ps.parseCondOperand()
		ps.checkBetween(&a, &lo, &hi)
		return &cond{kind: cBetween, args: []operand{a, lo, hi}}
	case ps.isKeyword("IN"):
		ps.advance()
		list := ps.parseArgs(ps.parseCondOperand)
		if len(list) > MaxInOperands {
			ps.semantic(eOperand, "The IN operator is provided with too many operands; number of operands: %d", len(list))
		}
		args := make([]operand, 0, len(list)+1)
		return &cond{kind: cIn, args: append(append(args, a), list...)}
	}
	var op cmpOp
	switch ps.tok.kind {
	case tEq:
		op = opEq
	case tNe:
		op = opNe
	case tLt:
		op = opLt
	case tLe:
		op = opLe
	case tGt:
		op = opGt
	case tGe:
		op = opGe
	default:
		ps.fail()
		return nil
	}
	ps.advance()
	b := ps.parseCondOperand()
	ps.checkDistinct(op.String(), &a, &b)
	return &cond{kind: cCmp, op: op, args: []operand{a, b}}
}

func (ps *parser) checkBetween(a, lo, hi *operand) {
	if lo.kind == opValue && hi.kind == opValue && lo.val.T != 0 && hi.val.T != 0 {
		if lo.val.T != hi.val.T {
			ps.semantic(eFunction, "The BETWEEN operator requires same data type for lower and upper bounds; lower bound operand: AttributeValue: {%s:%s}, upper bound operand: AttributeValue: {%s:%s}",
				lo.val.T, scalarText(lo.val), hi.val.T, scalarText(hi.val))
		} else if c, ok := attr.Compare(lo.val, hi.val); ok && c > 0 {
			ps.semantic(eFunction, "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {%s:%s}, upper bound operand: AttributeValue: {%s:%s}",
				lo.val.T, scalarText(lo.val), hi.val.T, scalarText(hi.val))
		}
	}
}

// checkDistinct rejects an operator or function whose two operands are the
// same document path, as DynamoDB does.
func (ps *parser) checkDistinct(op string, a, b *operand) {
	if a.kind != opPath || b.kind != opPath || len(a.path) != len(b.path) {
		return
	}
	for i := range a.path {
		if a.path[i] != b.path[i] {
			return
		}
	}
	ps.semantic(eDistinct, "The first operand must be distinct from the remaining operands for this operator or function; operator: %s, first operand: %s", op, a.path)
}

// parenIsOperand looks ahead from a '(' to its matching ')' and reports
// whether a comparator, BETWEEN or IN follows, that is, whether the
// parentheses enclose an operand rather than a condition.
func (ps *parser) parenIsOperand() bool {
	l := ps.lx
	depth := 1
	for depth > 0 {
		t := l.next()
		switch t.kind {
		case tEOF:
			return false
		case tLParen:
			depth++
		case tRParen:
			depth--
		}
	}
	t := l.next()
	return t.kind >= tEq && t.kind <= tGe || keyword(ps.src, t, "BETWEEN") || keyword(ps.src, t, "IN")
}

func scalarText(v attr.Value) string {
	if v.T == attr.B {
		return string(v.B)
	}
	return v.S
}

// parseCondOperand reads a path, a :value or size(path).
func (ps *parser) parseCondOperand() operand {
	if ps.err != nil {
		return operand{}
	}
	switch ps.tok.kind {
	case tLParen:
		if !ps.enter() {
			return operand{}
		}
		defer ps.leave()
		ps.advance()
		o := ps.parseCondOperand()
		ps.expect(tRParen)
		if o.paren {
			ps.semantic(eParens, "The expression has redundant parentheses;")
		}
		o.paren = true
		return o
	case tValue:
		return ps.parseValueRef()
	case tIdent, tName:
		if ps.isFuncCall() {
			name := ps.text(ps.tok)
			ps.advance()
			cls := functionClass(name)
			switch cls {
			case fnOperand:
			case fnCondition:
				ps.semantic(eMisusedFunc, "The function is not allowed to be used this way in an expression; function: %s", name)
			case fnUpdate:
				ps.semantic(eMisusedFunc, "The function is not allowed in a %s; function: %s", strings.TrimSuffix(ps.kind, "Expression")+" expression", name)
			default:
				ps.semantic(eUnknownFunc, "Invalid function name; function: %s", name)
			}
			args := ps.parseArgs(ps.parseCondOperand)
			o := operand{kind: opSize, text: name}
			if cls == fnOperand && ps.nArgs(name, args, 1) {
				o.args = args
				if t := args[0].val.T; args[0].kind == opValue && (t == attr.N || t == attr.BOOL || t == attr.NULL) {
					ps.semantic(eFunction, "Incorrect operand type for operator or function; operator or function: %s, operand type: %s", name, t)
				}
			}
			return o
		}
		start := ps.tok.start
		p := ps.parsePath()
		if ps.err != nil {
			return operand{}
		}
		return operand{kind: opPath, path: p, text: ps.src[start:ps.prev.end]}
	}
	ps.fail()
	return operand{}
}

// parseCondFunc reads attribute_exists(...) and the other condition functions.
func (ps *parser) parseCondFunc(name string) *cond {
	ps.advance()
	args := ps.parseArgs(ps.parseCondOperand)
	if ps.err != nil {
		return nil
	}
	c := &cond{fnName: name}
	switch name {
	case "attribute_exists", "attribute_not_exists":
		c.kind = cExists
		if name == "attribute_not_exists" {
			c.kind = cNotExists
		}
		if ps.nArgs(name, args, 1) && ps.needPath(name, &args[0]) {
			c.args = args
		}
	case "attribute_type":
		c.kind = cType
		if ps.nArgs(name, args, 2) && ps.needPath(name, &args[0]) {
			c.args = args
			t := args[1]
			if t.kind != opValue {
				ps.semantic(eFunction, "Incorrect operand type for operator or function; operator or function: %s, operand type: %s", name, "document path")
			} else if t.val.T != 0 {
				if t.val.T != attr.S {
					ps.semantic(eFunction, "Incorrect operand type for operator or function; operator or function: %s, operand type: %s", name, t.val.T)
				} else if ty, ok := attr.ParseType(t.val.S); ok {
					c.typ = ty
				} else {
					ps.semantic(eFunction, "Invalid attribute type name found; type: %s, valid types: {B,NULL,SS,BOOL,L,BS,N,NS,S,M}", t.val.S)
				}
			}
		}
	case "begins_with":
		c.kind = cBeginsWith
		if ps.nArgs(name, args, 2) {
			c.args = args
			ps.checkDistinct(name, &args[0], &args[1])
			ps.literalType(name, &args[0], attr.S, attr.B)
			ps.literalType(name, &args[1], attr.S, attr.B)
		}
	case "contains":
		c.kind = cContains
		if ps.nArgs(name, args, 2) {
			c.args = args
			ps.checkDistinct(name, &args[0], &args[1])
		}
	}
	return c
}

// value resolves a condition operand against item.
func (o *operand) value(item attr.Item) (attr.Value, bool) {
	switch o.kind {
	case opValue:
		return o.val, true
	case opPath:
		return o.path.resolve(item)
	case opSize:
		v, ok := o.args[0].value(item)
		if !ok {
			return attr.Value{}, false
		}
		n, ok := sizeOf(v)
		if !ok {
			return attr.Value{}, false
		}
		return attr.Value{T: attr.N, S: strconv.Itoa(n)}, true
	}
	return attr.Value{}, false
}

// sizeOf is DynamoDB's size(): UTF-8 bytes of S, bytes of B, members of a
// set, entries of M, elements of L; undefined for N, BOOL and NULL.
func sizeOf(v attr.Value) (int, bool) {
	switch v.T {
	case attr.S:
		return len(v.S), true
	case attr.B:
		return len(v.B), true
	case attr.SS, attr.NS:
		return len(v.SS), true
	case attr.BS:
		return len(v.BS), true
	case attr.M:
		return len(v.M), true
	case attr.L:
		return len(v.L), true
	}
	return 0, false
}

// eval reports whether the condition holds for item.
func (c *cond) eval(item attr.Item) bool {
	switch c.kind {
	case cAnd:
		return c.l.eval(item) && c.r.eval(item)
	case cOr:
		return c.l.eval(item) || c.r.eval(item)
	case cNot:
		return !c.l.eval(item)
	case cCmp:
		return c.evalCompare(item)
	case cBetween:
		return c.evalBetween(item)
	case cIn:
		return c.evalIn(item)
	case cExists:
		_, ok := c.args[0].path.resolve(item)
		return ok
	case cNotExists:
		_, ok := c.args[0].path.resolve(item)
		return !ok
	case cType:
		v, ok := c.args[0].path.resolve(item)
		return ok && v.T == c.typ
	case cBeginsWith:
		return c.evalBeginsWith(item)
	case cContains:
		a, ok1 := c.args[0].value(item)
		b, ok2 := c.args[1].value(item)
		if !ok1 || !ok2 {
			return false
		}
		return contains(a, b)
	}
	return false
}

// evalCompare evaluates a comparison (=, <>, <, <=, >, >=): an operand
// that is missing makes only <> true; values of types that do not order
// compare false.
func (c *cond) evalCompare(item attr.Item) bool {
	a, oka := c.args[0].value(item)
	b, okb := c.args[1].value(item)
	if !oka || !okb {
		return c.op == opNe
	}
	switch c.op {
	case opEq:
		return attr.Equal(a, b)
	case opNe:
		return !attr.Equal(a, b)
	}
	r, ok := attr.Compare(a, b)
	if !ok {
		return false
	}
	switch c.op {
	case opLt:
		return r < 0
	case opLe:
		return r <= 0
	case opGt:
		return r > 0
	}
	return r >= 0
}

// evalBetween evaluates a BETWEEN lo AND hi, bounds included.
func (c *cond) evalBetween(item attr.Item) bool {
	a, ok1 := c.args[0].value(item)
	lo, ok2 := c.args[1].value(item)
	hi, ok3 := c.args[2].value(item)
	if !ok1 || !ok2 || !ok3 {
		return false
	}
	r1, ok1 := attr.Compare(a, lo)
	r2, ok2 := attr.Compare(a, hi)
	return ok1 && ok2 && r1 >= 0 && r2 <= 0
}

// evalIn evaluates a IN (b, ...): a equals one of the operands.
func (c *cond) evalIn(item attr.Item) bool {
	a, ok := c.args[0].value(item)
	if !ok {
		return false
	}
	for i := 1; i < len(c.args); i++ {
		if b, ok := c.args[i].value(item); ok && attr.Equal(a, b) {
			return true
		}
	}
	return false
}

// evalBeginsWith evaluates begins_with(a, b) on two strings or two
// binaries.
func (c *cond) evalBeginsWith(item attr.Item) bool {
	a, ok1 := c.args[0].value(item)
	b, ok2 := c.args[1].value(item)
	if !ok1 || !ok2 || a.T != b.T {
		return false
	}
	switch a.T {
	case attr.S:
		return strings.HasPrefix(a.S, b.S)
	case attr.B:
		return bytes.HasPrefix(a.B, b.B)
	}
	return false
}

// contains is DynamoDB's contains(): substring of S (or B), member of a
// set of the operand's type, or element of a list.
func contains(a, b attr.Value) bool {
	switch a.T {
	case attr.S:
		return b.T == attr.S && strings.Contains(a.S, b.S)
	case attr.B:
		return b.T == attr.B && bytes.Contains(a.B, b.B)
	case attr.SS:
		if b.T != attr.S {
			return false
		}
		for _, s := range a.SS {
			if s == b.S {
				return true
			}
		}
	case attr.NS:
		if b.T != attr.N {
			return false
		}
		for _, s := range a.SS {
			if attr.Equal(attr.Value{T: attr.N, S: s}, b) {
				return true
			}
		}
	case attr.BS:
		if b.T != attr.B {
			return false
		}
		for _, x := range a.BS {
			if bytes.Equal(x, b.B) {
				return true
			}
		}
	case attr.L:
		for _, x := range a.L {
			if attr.Equal(x, b) {
				return true
			}
		}
	}
	return false
}

// TopLevel returns the top-level attribute names the condition reads, in
// the order first written (for DynamoDB's rule that a Query filter may not
// name key attributes).
func (c *Condition) TopLevel() []string {
	if c == nil || c.root == nil {
		return nil
	}
	var out []string
	var walkOp func(o *operand)
	walkOp = func(o *operand) {
		if o.kind == opPath && len(o.path) > 0 {
			for _, n := range out {
				if n == o.path[0].name {
					return
				}
			}
			out = append(out, o.path[0].name)
		}
		for i := range o.args {
			walkOp(&o.args[i])
		}
	}
	var walk func(x *cond)
	walk = func(x *cond) {
		if x == nil {
			return
		}
		walk(x.l)
		walk(x.r)
		for i := range x.args {
			walkOp(&x.args[i])
		}
	}
	walk(c.root)
	return out
}
