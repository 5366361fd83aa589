package restore

import (
	"bytes"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// Where is a parsed --where filter: a subset of DynamoDB's condition
// expression language, evaluated on an archived item's image.
//
// Supported: comparisons = <> < <= > >= (numbers compared as decimals,
// strings and binary bytewise), a BETWEEN b AND c, a IN (b, c, ...),
// AND, OR, NOT, parentheses, attribute_exists(path),
// attribute_not_exists(path), begins_with(path, v), contains(path, v) and
// size(path) as an operand. Paths are names joined by '.' with list
// indexes ([0]); a name that is not letters, digits and '_' is written in
// backquotes (`my-attr`). As a command line has no
// ExpressionAttributeValues, values are written inline: 'text' (a quote
// doubled inside: 'it”s'), numbers (42, -1.5, 1e3), true, false and null.
// As in DynamoDB, a comparison whose operands differ in type is false, and
// one whose attribute is missing is false except <> (true).
type Where struct {
	root *cond
	src  string
}

// String returns the expression as given.
func (w *Where) String() string { return w.src }

// Match reports whether item satisfies the filter. A nil *Where matches
// everything.
func (w *Where) Match(item event.Item) bool {
	if w == nil || w.root == nil {
		return true
	}
	return w.root.eval(item)
}

// WhereError is a --where expression that does not parse: Pos is the byte
// offset (from 1) of the token at fault.
type WhereError struct {
	Pos     int
	Problem string
}

func (e *WhereError) Error() string {
	return fmt.Sprintf("at position %d: %s", e.Pos, e.Problem)
}

type condKind int

const (
	cAnd condKind = iota
	cOr
	cNot
	cCmp
	cBetween
	cIn
	cExists
	cNotExists
	cBeginsWith
	cContains
)

type cond struct {
	kind condKind
	op   string // for cCmp
	l, r *cond
	args []operand
}

// operand is a path, a literal or size(path).
type operand struct {
	path []pathStep
	lit  types.AttributeValue
	size bool
}

type pathStep struct {
	name  string
	index int // -1 for a name step
}

// ParseWhere parses a --where expression.
func ParseWhere(s string) (*Where, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	root := p.parseOr(0)
	if p.err == nil && p.peek().kind != tEOF {
		p.fail(p.peek(), "unexpected %s after a complete condition", p.peek().describe())
	}
	if p.err != nil {
		return nil, p.err
	}
	return &Where{root: root, src: s}, nil
}

// maxDepth bounds nesting so a hostile expression cannot exhaust the stack.
const maxDepth = 100

type parser struct {
	toks []token
	i    int
	err  *WhereError
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) fail(t token, format string, a ...any) {
	if p.err == nil {
		p.err = &WhereError{Pos: t.pos + 1, Problem: fmt.Sprintf(format, a...)}
	}
}

func (p *parser) keyword(word string) bool {
	t := p.peek()
	return t.kind == tName && !t.quoted && strings.EqualFold(t.text, word)
}

func (p *parser) expect(kind tokKind, text string) bool {
	t := p.next()
	if t.kind != kind || (text != "" && t.text != text) {
		p.fail(t, "expected %q, found %s", text, t.describe())
		return false
	}
	return true
}

func (p *parser) parseOr(depth int) *cond {
	l := p.parseAnd(depth)
	for p.err == nil && p.keyword("OR") {
		p.next()
		l = &cond{kind: cOr, l: l, r: p.parseAnd(depth)}
	}
	return l
}

func (p *parser) parseAnd(depth int) *cond {
	l := p.parseNot(depth)
	for p.err == nil && p.keyword("AND") {
		p.next()
		l = &cond{kind: cAnd, l: l, r: p.parseNot(depth)}
	}
	return l
}

func (p *parser) parseNot(depth int) *cond {
	if depth > maxDepth {
		p.fail(p.peek(), "nested more than %d levels deep", maxDepth)
		return nil
	}
	if p.keyword("NOT") {
		p.next()
		return &cond{kind: cNot, l: p.parseNot(depth + 1)}
	}
	return p.parsePrimary(depth)
}

var condFuncs = map[string]condKind{
	"attribute_exists": cExists, "attribute_not_exists": cNotExists,
	"begins_with": cBeginsWith, "contains": cContains,
}

func (p *parser) parsePrimary(depth int) *cond {
	t := p.peek()
	if t.kind == tPunct && t.text == "(" {
		p.next()
		c := p.parseOr(depth + 1)
		p.expect(tPunct, ")")
		return c
	}
	if t.kind == tName && !t.quoted {
		if k, ok := condFuncs[t.text]; ok && p.toks[p.i+1].text == "(" {
			return p.parseFunc(k)
		}
	}
	a := p.parseOperand()
	if p.err != nil {
		return nil
	}
	op := p.next()
	switch {
	case op.kind == tOp:
		return &cond{kind: cCmp, op: op.text, args: []operand{a, p.parseOperand()}}
	case op.kind == tName && strings.EqualFold(op.text, "BETWEEN"):
		lo := p.parseOperand()
		if p.err == nil && !p.keyword("AND") {
			p.fail(p.peek(), "expected AND in BETWEEN, found %s", p.peek().describe())
		}
		p.next()
		at := p.peek()
		hi := p.parseOperand()
		if lo.lit != nil && hi.lit != nil {
			if r, ok := compare(lo.lit, hi.lit); ok && r > 0 {
				p.fail(at, "BETWEEN needs its upper bound at or above its lower bound")
			}
		}
		return &cond{kind: cBetween, args: []operand{a, lo, hi}}
	case op.kind == tName && strings.EqualFold(op.text, "IN"):
		return p.parseIn(a)
	}
	p.fail(op, "expected a comparison (= <> < <= > >=), BETWEEN or IN, found %s", op.describe())
	return nil
}

func (p *parser) parseIn(a operand) *cond {
	if !p.expect(tPunct, "(") {
		return nil
	}
	c := &cond{kind: cIn, args: []operand{a}}
	for p.err == nil {
		c.args = append(c.args, p.parseOperand())
		if p.peek().text == "," && p.peek().kind == tPunct {
			p.next()
			continue
		}
		p.expect(tPunct, ")")
		break
	}
	return c
}

func (p *parser) parseFunc(k condKind) *cond {
	name := p.next()
	p.next() // "("
	c := &cond{kind: k, args: []operand{p.parsePath()}}
	if k == cBeginsWith || k == cContains {
		p.expect(tPunct, ",")
		c.args = append(c.args, p.parseOperand())
	}
	if p.err == nil && p.peek().text != ")" {
		p.fail(p.peek(), "%s takes %d argument(s); found %s", name.text, len(c.args), p.peek().describe())
	}
	p.expect(tPunct, ")")
	return c
}

func (p *parser) parseOperand() operand {
	t := p.peek()
	switch t.kind {
	case tString:
		p.next()
		return operand{lit: &types.AttributeValueMemberS{Value: t.text}}
	case tNumber:
		p.next()
		return operand{lit: &types.AttributeValueMemberN{Value: t.text}}
	case tName:
		if !t.quoted {
			switch strings.ToLower(t.text) {
			case "true", "false":
				p.next()
				return operand{lit: &types.AttributeValueMemberBOOL{Value: strings.EqualFold(t.text, "true")}}
			case "null":
				p.next()
				return operand{lit: &types.AttributeValueMemberNULL{Value: true}}
			case "size":
				if p.toks[p.i+1].text == "(" {
					p.next()
					p.next()
					o := p.parsePath()
					o.size = true
					p.expect(tPunct, ")")
					return o
				}
			}
			if _, ok := condFuncs[t.text]; ok {
				p.fail(t, "%s is a condition, not a value", t.text)
				return operand{}
			}
		}
		return p.parsePath()
	}
	p.fail(t, "expected an attribute path or a value ('text', a number, true, false, null), found %s", t.describe())
	return operand{}
}

func (p *parser) parsePath() operand {
	t := p.next()
	if t.kind != tName {
		p.fail(t, "expected an attribute path, found %s", t.describe())
		return operand{}
	}
	steps := []pathStep{{name: t.text, index: -1}}
	for p.err == nil {
		n := p.peek()
		if n.kind != tPunct || (n.text != "." && n.text != "[") {
			break
		}
		p.next()
		if n.text == "." {
			m := p.next()
			if m.kind != tName {
				p.fail(m, "expected an attribute name after '.', found %s", m.describe())
				break
			}
			steps = append(steps, pathStep{name: m.text, index: -1})
			continue
		}
		m := p.next()
		idx, err := strconv.Atoi(m.text)
		if m.kind != tNumber || err != nil || idx < 0 {
			p.fail(m, "expected a list index (0, 1, ...) after '[', found %s", m.describe())
			break
		}
		steps = append(steps, pathStep{index: idx})
		p.expect(tPunct, "]")
	}
	return operand{path: steps}
}

// value resolves an operand against item.
func (o *operand) value(item event.Item) (types.AttributeValue, bool) {
	if o.lit != nil {
		return o.lit, true
	}
	v, ok := resolve(item, o.path)
	if !ok || !o.size {
		return v, ok
	}
	n, ok := sizeOf(v)
	if !ok {
		return nil, false
	}
	return &types.AttributeValueMemberN{Value: strconv.Itoa(n)}, true
}

func resolve(item event.Item, path []pathStep) (types.AttributeValue, bool) {
	if len(path) == 0 {
		return nil, false
	}
	v, ok := item[path[0].name]
	for _, st := range path[1:] {
		if !ok {
			return nil, false
		}
		switch x := v.(type) {
		case *types.AttributeValueMemberM:
			if st.index >= 0 {
				return nil, false
			}
			v, ok = x.Value[st.name]
		case *types.AttributeValueMemberL:
			if st.index < 0 || st.index >= len(x.Value) {
				return nil, false
			}
			v = x.Value[st.index]
		default:
			return nil, false
		}
	}
	return v, ok && v != nil
}

// sizeOf is DynamoDB's size(): bytes of S and B, members of sets, lists
// and maps.
func sizeOf(v types.AttributeValue) (int, bool) {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value), true
	case *types.AttributeValueMemberB:
		return len(x.Value), true
	case *types.AttributeValueMemberSS:
		return len(x.Value), true
	case *types.AttributeValueMemberNS:
		return len(x.Value), true
	case *types.AttributeValueMemberBS:
		return len(x.Value), true
	case *types.AttributeValueMemberL:
		return len(x.Value), true
	case *types.AttributeValueMemberM:
		return len(x.Value), true
	}
	return 0, false
}

func (c *cond) eval(item event.Item) bool {
	switch c.kind {
	case cAnd:
		return c.l.eval(item) && c.r.eval(item)
	case cOr:
		return c.l.eval(item) || c.r.eval(item)
	case cNot:
		return !c.l.eval(item)
	case cCmp:
		return c.evalCmp(item)
	case cBetween:
		a, ok1 := c.args[0].value(item)
		lo, ok2 := c.args[1].value(item)
		hi, ok3 := c.args[2].value(item)
		if !ok1 || !ok2 || !ok3 {
			return false
		}
		r1, ok1 := compare(a, lo)
		r2, ok2 := compare(a, hi)
		return ok1 && ok2 && r1 >= 0 && r2 <= 0
	case cIn:
		a, ok := c.args[0].value(item)
		if !ok {
			return false
		}
		for i := range c.args[1:] {
			if b, ok := c.args[i+1].value(item); ok && equal(a, b) {
				return true
			}
		}
		return false
	case cExists, cNotExists:
		_, ok := resolve(item, c.args[0].path)
		return ok == (c.kind == cExists)
	case cBeginsWith:
		return beginsWith(c.args[0].value(item))(c.args[1].value(item))
	case cContains:
		a, ok1 := c.args[0].value(item)
		b, ok2 := c.args[1].value(item)
		return ok1 && ok2 && contains(a, b)
	}
	return false
}

func (c *cond) evalCmp(item event.Item) bool {
	a, oka := c.args[0].value(item)
	b, okb := c.args[1].value(item)
	if !oka || !okb {
		return c.op == "<>"
	}
	switch c.op {
	case "=":
		return equal(a, b)
	case "<>":
		return !equal(a, b)
	}
	r, ok := compare(a, b)
	if !ok {
		return false
	}
	switch c.op {
	case "<":
		return r < 0
	case "<=":
		return r <= 0
	case ">":
		return r > 0
	}
	return r >= 0
}

func beginsWith(a types.AttributeValue, ok1 bool) func(types.AttributeValue, bool) bool {
	return func(b types.AttributeValue, ok2 bool) bool {
		if !ok1 || !ok2 {
			return false
		}
		switch x := a.(type) {
		case *types.AttributeValueMemberS:
			y, ok := b.(*types.AttributeValueMemberS)
			return ok && strings.HasPrefix(x.Value, y.Value)
		case *types.AttributeValueMemberB:
			y, ok := b.(*types.AttributeValueMemberB)
			return ok && bytes.HasPrefix(x.Value, y.Value)
		}
		return false
	}
}

// contains is DynamoDB's contains(): a substring of S or B, a member of a
// set, an element of a list.
func contains(a, b types.AttributeValue) bool {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		return ok && strings.Contains(x.Value, y.Value)
	case *types.AttributeValueMemberB:
		y, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Contains(x.Value, y.Value)
	case *types.AttributeValueMemberSS:
		for _, s := range x.Value {
			if equal(&types.AttributeValueMemberS{Value: s}, b) {
				return true
			}
		}
	case *types.AttributeValueMemberNS:
		for _, s := range x.Value {
			if equal(&types.AttributeValueMemberN{Value: s}, b) {
				return true
			}
		}
	case *types.AttributeValueMemberBS:
		for _, s := range x.Value {
			if equal(&types.AttributeValueMemberB{Value: s}, b) {
				return true
			}
		}
	case *types.AttributeValueMemberL:
		for _, v := range x.Value {
			if equal(v, b) {
				return true
			}
		}
	}
	return false
}

// compare orders two values of the same scalar type (S, N, B).
func compare(a, b types.AttributeValue) (int, bool) {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		if y, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(x.Value, y.Value), true
		}
	case *types.AttributeValueMemberN:
		if y, ok := b.(*types.AttributeValueMemberN); ok {
			return compareNumbers(x.Value, y.Value)
		}
	case *types.AttributeValueMemberB:
		if y, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(x.Value, y.Value), true
		}
	}
	return 0, false
}

// compareNumbers compares two DynamoDB numbers exactly, as decimals.
func compareNumbers(a, b string) (int, bool) {
	x, ok1 := decimal(a)
	y, ok2 := decimal(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	return x.Cmp(y), true
}

// decimal reads a DynamoDB number exactly. Exponents beyond DynamoDB's
// range (about ±130) are refused, so a hostile 1e999999999 costs nothing.
func decimal(s string) (*big.Rat, bool) {
	s = strings.TrimSpace(s)
	if !event.ValidNumber(s) {
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(s[i+1:])
		if err != nil || exp > 400 || exp < -400 {
			return nil, false
		}
	}
	return new(big.Rat).SetString(s)
}

// equal is DynamoDB's equality: same type and value, numbers as decimals,
// sets as sets, maps and lists element by element.
func equal(a, b types.AttributeValue) bool {
	if r, ok := compare(a, b); ok {
		return r == 0
	}
	switch x := a.(type) {
	case *types.AttributeValueMemberBOOL:
		y, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberL:
		y, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(x.Value) != len(y.Value) {
			return false
		}
		for i := range x.Value {
			if !equal(x.Value[i], y.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		y, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(x.Value) != len(y.Value) {
			return false
		}
		for k, v := range x.Value {
			if w, ok := y.Value[k]; !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberSS, *types.AttributeValueMemberNS, *types.AttributeValueMemberBS:
		n1, _ := sizeOf(a)
		n2, _ := sizeOf(b)
		if n1 != n2 {
			return false
		}
		for _, m := range members(a) {
			if !contains(b, m) {
				return false
			}
		}
		return true
	}
	return false
}

// members lists a set's members as scalar values.
func members(v types.AttributeValue) []types.AttributeValue {
	var out []types.AttributeValue
	switch x := v.(type) {
	case *types.AttributeValueMemberSS:
		for _, s := range x.Value {
			out = append(out, &types.AttributeValueMemberS{Value: s})
		}
	case *types.AttributeValueMemberNS:
		for _, s := range x.Value {
			out = append(out, &types.AttributeValueMemberN{Value: s})
		}
	case *types.AttributeValueMemberBS:
		for _, b := range x.Value {
			out = append(out, &types.AttributeValueMemberB{Value: b})
		}
	}
	return out
}

type tokKind int

const (
	tEOF tokKind = iota
	tName
	tString
	tNumber
	tOp
	tPunct
)

type token struct {
	kind   tokKind
	text   string
	pos    int // byte offset from 0
	quoted bool
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "the end of the expression"
	case tString:
		return fmt.Sprintf("'%s'", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

// lex splits s into tokens.
func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'':
			t, n, err := lexString(s, i)
			if err != nil {
				return nil, err
			}
			toks, i = append(toks, t), n
		case c == '`':
			end := strings.IndexByte(s[i+1:], '`')
			if end <= 0 {
				return nil, &WhereError{Pos: i + 1, Problem: "unterminated or empty `name`"}
			}
			toks = append(toks, token{kind: tName, text: s[i+1 : i+1+end], pos: i, quoted: true})
			i += end + 2
		case isDigit(c) || (c == '-' && i+1 < len(s) && (isDigit(s[i+1]) || s[i+1] == '.')) || (c == '.' && i+1 < len(s) && isDigit(s[i+1]) && !afterOperand(toks)):
			j := lexNumber(s, i)
			for j < len(s) && (isNameStart(s[j]) || isDigit(s[j])) {
				j++ // 1e or 12abc: one bad token, not a number and a name
			}
			if !event.ValidNumber(s[i:j]) {
				return nil, &WhereError{Pos: i + 1, Problem: fmt.Sprintf("%q is not a number DynamoDB accepts", s[i:j])}
			}
			toks, i = append(toks, token{kind: tNumber, text: s[i:j], pos: i}), j
		case isNameStart(c):
			j := i + 1
			for j < len(s) && (isNameStart(s[j]) || isDigit(s[j])) {
				j++
			}
			toks, i = append(toks, token{kind: tName, text: s[i:j], pos: i}), j
		case strings.HasPrefix(s[i:], "<>") || strings.HasPrefix(s[i:], "<=") || strings.HasPrefix(s[i:], ">="):
			toks, i = append(toks, token{kind: tOp, text: s[i : i+2], pos: i}), i+2
		case c == '=' || c == '<' || c == '>':
			toks, i = append(toks, token{kind: tOp, text: s[i : i+1], pos: i}), i+1
		case strings.IndexByte("().,[]", c) >= 0:
			toks, i = append(toks, token{kind: tPunct, text: s[i : i+1], pos: i}), i+1
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			hint := ""
			if c == ':' || c == '#' {
				hint = " (there are no placeholders on a command line: write values inline, 'text' or 42, and odd names in `backquotes`)"
			}
			return nil, &WhereError{Pos: i + 1, Problem: fmt.Sprintf("unexpected character %q%s", r, hint)}
		}
	}
	return append(toks, token{kind: tEOF, pos: len(s)}), nil
}

// afterOperand reports whether the last token ends an operand, so a '.'
// that follows is a path separator, not a number's point.
func afterOperand(toks []token) bool {
	if len(toks) == 0 {
		return false
	}
	t := toks[len(toks)-1]
	return t.kind == tName || (t.kind == tPunct && t.text == "]")
}

func lexString(s string, i int) (token, int, error) {
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		if s[j] != '\'' {
			b.WriteByte(s[j])
			continue
		}
		if j+1 < len(s) && s[j+1] == '\'' {
			b.WriteByte('\'')
			j++
			continue
		}
		return token{kind: tString, text: b.String(), pos: i}, j + 1, nil
	}
	return token{}, 0, &WhereError{Pos: i + 1, Problem: "unterminated 'string'"}
}

func lexNumber(s string, i int) int {
	j := i
	if s[j] == '-' {
		j++
	}
	for j < len(s) && (isDigit(s[j]) || s[j] == '.') {
		j++
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			j = k
			for j < len(s) && isDigit(s[j]) {
				j++
			}
		}
	}
	return j
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isNameStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
