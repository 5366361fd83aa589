package partiql

import (
	"strconv"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// MaxStatementLength is the longest statement DynamoDB accepts, in bytes.
const MaxStatementLength = 8192

// maxDepth bounds the nesting of parentheses, NOT and literals, so parsing
// is bounded in stack however the statement is written.
const maxDepth = 128

const notWellFormed = "Statement wasn't well formed, can't be processed: "

// syntaxError is DynamoDB's message for a statement it cannot read.
func syntaxError(detail string) error { return awserr.Validation("%s%s", notWellFormed, detail) }

// bail carries a parse error up the recursive descent to Parse.
type bail struct{ err error }

// keywords may not be used as bare names; quote them ("value").
var keywords = map[string]bool{
	"SELECT": true, "FROM": true, "WHERE": true, "AND": true, "OR": true, "NOT": true,
	"BETWEEN": true, "IN": true, "IS": true, "MISSING": true, "NULL": true, "TRUE": true,
	"FALSE": true, "SET": true, "REMOVE": true, "VALUE": true, "INTO": true, "RETURNING": true,
	"ORDER": true, "BY": true, "ASC": true, "DESC": true, "EXISTS": true, "INSERT": true,
	"UPDATE": true, "DELETE": true, "AS": true,
}

type parser struct {
	src     string
	toks    []token
	i       int
	nparams int
	depth   int
}

// Parse reads one statement.
func Parse(src string) (st *Statement, err error) {
	if strings.TrimSpace(src) == "" {
		return nil, awserr.Validation("1 validation error detected: Value '' at 'statement' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	if len(src) > MaxStatementLength {
		return nil, awserr.Validation("1 validation error detected: Value at 'statement' failed to satisfy constraint: Member must have length less than or equal to %d", MaxStatementLength)
	}
	p := &parser{src: src, toks: lex(src)}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bail)
			if !ok {
				panic(r)
			}
			st, err = nil, b.err
		}
	}()
	st = p.statement()
	if p.peek().kind == tPunct && p.peek().text == ";" {
		p.i++
	}
	if p.peek().kind != tEOF {
		p.fail("Unexpected token after expression")
	}
	st.Params = p.nparams
	return st, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

// peek2 returns the token after the next one (the last token at the end).
func (p *parser) peek2() token {
	if p.i+1 < len(p.toks) {
		return p.toks[p.i+1]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF && t.kind != tBad {
		p.i++
	}
	return t
}

// fail stops the parse with a syntax error. A token the lexer could not
// read is reported with nothing after the colon, as DynamoDB does.
func (p *parser) fail(detail string) {
	if p.peek().kind == tBad {
		detail = ""
	}
	panic(bail{syntaxError(detail)})
}

func (p *parser) failErr(err error) { panic(bail{err}) }

// at formats a token position as DynamoDB does: line:column:length.
func (p *parser) at(pos, length int) string {
	line, col := 1, 1
	for _, r := range p.src[:pos] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return strconv.Itoa(line) + ":" + strconv.Itoa(col) + ":" + strconv.Itoa(length)
}

func (p *parser) isKW(kw string) bool {
	t := p.peek()
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

func (p *parser) acceptKW(kw string) bool {
	if p.isKW(kw) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectKW(kw string) {
	if !p.acceptKW(kw) {
		p.fail("Expected " + kw)
	}
}

func (p *parser) isPunct(s string) bool {
	t := p.peek()
	return (t.kind == tPunct || t.kind == tOp) && t.text == s
}

func (p *parser) acceptPunct(s string) bool {
	if p.isPunct(s) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectPunct(s string) {
	if !p.acceptPunct(s) {
		p.fail("Expected " + s)
	}
}

func (p *parser) enter() {
	p.depth++
	if p.depth > maxDepth {
		p.fail("Nesting too deep")
	}
}

func (p *parser) leave() { p.depth-- }

func (p *parser) statement() *Statement {
	switch {
	case p.acceptKW("SELECT"):
		return p.selectRest(Select)
	case p.acceptKW("INSERT"):
		return p.insert()
	case p.acceptKW("UPDATE"):
		return p.update()
	case p.acceptKW("DELETE"):
		return p.delete()
	case p.acceptKW("FROM"):
		return p.fromFirstUpdate()
	case p.acceptKW("EXISTS"):
		p.expectPunct("(")
		p.expectKW("SELECT")
		st := p.selectRest(Exists)
		p.expectPunct(")")
		return st
	}
	p.fail("Unexpected token, expected SELECT, INSERT, UPDATE, DELETE or EXISTS")
	return nil
}

// target reads "Table" or "Table"."Index" (quoted or not).
func (p *parser) target(st *Statement, index bool) {
	st.Table = p.name()
	if index && p.acceptPunct(".") {
		st.Index = p.name()
	}
}

// noAlias refuses a table alias (FROM "T" t, FROM "T" AS t).
func (p *parser) noAlias() {
	t := p.peek()
	if p.isKW("AS") || t.kind == tQuoted || t.kind == tIdent && !keywords[strings.ToUpper(t.text)] {
		p.failErr(awserr.Validation("Aliasing is not supported"))
	}
}

// name reads an unquoted name that is not a keyword, or a "quoted" name.
func (p *parser) name() string {
	t := p.peek()
	switch {
	case t.kind == tQuoted:
		p.i++
		return t.text
	case t.kind == tIdent && !keywords[strings.ToUpper(t.text)]:
		p.i++
		return t.text
	case t.kind == tIdent:
		p.fail("Unexpected keyword")
	}
	p.fail("Expected identifier")
	return ""
}

func (p *parser) selectRest(kind Kind) *Statement {
	st := &Statement{Kind: kind}
	if !p.acceptPunct("*") {
		for {
			if t := p.peek(); t.kind == tIdent && p.peek2().kind == tPunct && p.peek2().text == "(" {
				p.failErr(awserr.Validation("Unexpected path component at %s", p.at(t.pos, len(t.text))))
			}
			st.Columns = append(st.Columns, p.path())
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectKW("FROM")
	p.target(st, true)
	p.noAlias()
	if p.acceptKW("WHERE") {
		st.Where = p.cond()
	}
	if kind == Select && p.acceptKW("ORDER") {
		p.expectKW("BY")
		st.OrderBy = p.path()
		if !p.acceptKW("ASC") {
			st.Desc = p.acceptKW("DESC")
		}
	}
	return st
}

func (p *parser) insert() *Statement {
	st := &Statement{Kind: Insert}
	p.expectKW("INTO")
	p.target(st, false)
	if !p.acceptKW("VALUE") {
		p.fail("Unexpected token after expression")
	}
	st.Value = p.operand()
	return st
}

func (p *parser) update() *Statement {
	st := &Statement{Kind: Update}
	p.target(st, false)
	p.noAlias()
	if !p.updateClauses(st) {
		p.fail("Expected SET or REMOVE")
	}
	p.expectKW("WHERE")
	st.Where = p.cond()
	p.returning(st)
	return st
}

// fromFirstUpdate reads FROM "T" WHERE ... SET ... | REMOVE ..., the
// other order of an UPDATE.
func (p *parser) fromFirstUpdate() *Statement {
	st := &Statement{Kind: Update}
	p.target(st, false)
	p.noAlias()
	p.expectKW("WHERE")
	st.Where = p.cond()
	if !p.updateClauses(st) {
		p.fail("Expected SET or REMOVE")
	}
	p.returning(st)
	return st
}

// updateClauses reads SET a = v[, ...] and REMOVE a[, ...] clauses in any
// number and order; false when there is none.
func (p *parser) updateClauses(st *Statement) bool {
	found := false
	for {
		switch {
		case p.acceptKW("SET"):
			for {
				path := p.path()
				p.expectPunct("=")
				st.Sets = append(st.Sets, Assign{Path: path, Value: p.operand()})
				if !p.acceptPunct(",") {
					break
				}
			}
		case p.acceptKW("REMOVE"):
			for {
				st.Removes = append(st.Removes, p.path())
				if !p.acceptPunct(",") {
					break
				}
			}
		default:
			return found
		}
		found = true
	}
}

func (p *parser) delete() *Statement {
	st := &Statement{Kind: Delete}
	p.expectKW("FROM")
	p.target(st, false)
	p.noAlias()
	p.expectKW("WHERE")
	st.Where = p.cond()
	p.returning(st)
	return st
}

// returning reads RETURNING {ALL|MODIFIED} {OLD|NEW} *.
func (p *parser) returning(st *Statement) {
	if !p.acceptKW("RETURNING") {
		return
	}
	var which, age string
	switch {
	case p.acceptKW("ALL"):
		which = "ALL"
	case p.acceptKW("MODIFIED"):
		which = "MODIFIED"
	default:
		p.fail("Expected ALL or MODIFIED")
	}
	switch {
	case p.acceptKW("OLD"):
		age = "OLD"
	case p.acceptKW("NEW"):
		age = "NEW"
	default:
		p.fail("Expected OLD or NEW")
	}
	p.expectPunct("*")
	st.Returning = which + " " + age
}

// path reads name ('.' name | '[' n ']')*.
func (p *parser) path() *Path {
	start := p.peek().pos
	pa := &Path{P: start, Elems: []Elem{{Name: p.name()}}}
	for {
		switch {
		case p.acceptPunct("."):
			t := p.peek()
			if t.kind == tIdent && keywords[strings.ToUpper(t.text)] {
				p.fail("Invalid path dot component")
			}
			pa.Elems = append(pa.Elems, Elem{Name: p.name()})
		case p.acceptPunct("["):
			t := p.next()
			n, err := strconv.Atoi(t.text)
			if t.kind != tNumber || err != nil || n < 0 {
				p.fail("Invalid path index")
			}
			p.expectPunct("]")
			pa.Elems = append(pa.Elems, Elem{Index: n, IsIndex: true})
		default:
			return pa
		}
	}
}

// Conditions, lowest precedence first: OR, AND, NOT, predicate.

func (p *parser) cond() Node {
	l := p.and()
	for p.isKW("OR") {
		t := p.next()
		l = &Binary{Op: "OR", L: l, R: p.and(), P: t.pos}
	}
	return l
}

func (p *parser) and() Node {
	l := p.not()
	for p.isKW("AND") {
		t := p.next()
		l = &Binary{Op: "AND", L: l, R: p.not(), P: t.pos}
	}
	return l
}

func (p *parser) not() Node {
	if p.isKW("NOT") {
		t := p.next()
		p.enter()
		defer p.leave()
		return &Not{X: p.not(), P: t.pos}
	}
	return p.predicate()
}

func (p *parser) predicate() Node {
	x := p.operand()
	t := p.peek()
	if t.kind == tOp {
		switch t.text {
		case "=", "<>", "!=", "<", "<=", ">", ">=":
			p.i++
			op := t.text
			if op == "!=" {
				op = "<>"
			}
			return &Binary{Op: op, L: x, R: p.operand(), P: t.pos}
		}
	}
	neg := false
	if p.isKW("NOT") {
		if nx := p.peek2(); nx.kind == tIdent && (strings.EqualFold(nx.text, "BETWEEN") || strings.EqualFold(nx.text, "IN")) {
			p.i++
			neg = true
		}
	}
	switch {
	case p.acceptKW("BETWEEN"):
		lo := p.operand()
		p.expectKW("AND")
		return &Between{X: x, Lo: lo, Hi: p.operand(), Not: neg, P: t.pos}
	case p.acceptKW("IN"):
		return &In{X: x, List: p.inList(), Not: neg, P: t.pos}
	case p.acceptKW("IS"):
		is := &Is{X: x, Not: p.acceptKW("NOT"), P: t.pos}
		switch {
		case p.acceptKW("MISSING"):
			is.Missing = true
		case p.acceptKW("NULL"):
		case p.peek().kind == tIdent && typeNames[strings.ToUpper(p.peek().text)] != nil:
			is.Types = typeNames[strings.ToUpper(p.next().text)]
		default:
			p.fail("Expected MISSING, NULL or a type name")
		}
		return is
	}
	return x
}

// inList reads [a, b] or (a, b), or a single ? standing for a list.
func (p *parser) inList() []Node {
	closer := "]"
	switch {
	case p.acceptPunct("["):
	case p.acceptPunct("("):
		closer = ")"
	default:
		return []Node{p.operand()}
	}
	var out []Node
	if p.acceptPunct(closer) {
		return out
	}
	for {
		out = append(out, p.operand())
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct(closer)
	return out
}

// operand reads term (('+' | '-') term)*.
func (p *parser) operand() Node {
	l := p.term()
	for p.isPunct("+") || p.isPunct("-") {
		t := p.next()
		l = &Binary{Op: t.text, L: l, R: p.term(), P: t.pos}
	}
	return l
}

func (p *parser) term() Node {
	p.enter()
	defer p.leave()
	t := p.peek()
	switch t.kind {
	case tString:
		p.i++
		return &Lit{V: attr.Str(t.text), P: t.pos}
	case tNumber:
		p.i++
		return p.number(t.text, t.pos)
	case tParam:
		p.i++
		p.nparams++
		return &Param{N: p.nparams - 1, P: t.pos}
	case tBagOpen:
		p.i++
		s := &SetLit{P: t.pos}
		if p.peek().kind != tBagClose {
			s.Elems = p.list()
		}
		if p.next().kind != tBagClose {
			p.fail("Expected >>")
		}
		return s
	case tOp:
		if t.text == "-" && p.peek2().kind == tNumber {
			p.i++
			n := p.next()
			return p.number("-"+n.text, t.pos)
		}
	case tPunct:
		switch t.text {
		case "(":
			p.i++
			x := p.cond()
			p.expectPunct(")")
			return x
		case "[":
			p.i++
			l := &ListLit{P: t.pos}
			if !p.acceptPunct("]") {
				l.Elems = p.list()
				p.expectPunct("]")
			}
			return l
		case "{":
			return p.mapLit()
		}
	case tIdent:
		switch strings.ToUpper(t.text) {
		case "TRUE", "FALSE":
			p.i++
			return &Lit{V: attr.Bool(strings.EqualFold(t.text, "TRUE")), P: t.pos}
		case "NULL":
			p.i++
			return &Lit{V: attr.Null(), P: t.pos}
		}
		if nx := p.peek2(); nx.kind == tPunct && nx.text == "(" && !keywords[strings.ToUpper(t.text)] {
			return p.call()
		}
		return p.path()
	case tQuoted:
		return p.path()
	}
	p.fail("Unexpected term")
	return nil
}

func (p *parser) list() []Node {
	var out []Node
	for {
		out = append(out, p.operand())
		if !p.acceptPunct(",") {
			return out
		}
	}
}

func (p *parser) mapLit() Node {
	t := p.next()
	m := &MapLit{P: t.pos}
	if p.acceptPunct("}") {
		return m
	}
	for {
		k := p.next()
		if k.kind != tString {
			p.fail("Map keys must be string literals")
		}
		p.expectPunct(":")
		m.Keys = append(m.Keys, k.text)
		m.Vals = append(m.Vals, p.operand())
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct("}")
	return m
}

func (p *parser) call() Node {
	t := p.next()
	c := &Call{Name: strings.ToLower(t.text), P: t.pos}
	p.expectPunct("(")
	if !p.acceptPunct(")") {
		c.Args = p.list()
		p.expectPunct(")")
	}
	return c
}

// number converts a numeric literal. One whose exponent does not fit 32
// bits cannot be read at all; one out of DynamoDB's range gets the number
// rule's message and the path "root".
func (p *parser) number(text string, pos int) Node {
	if !exponentFits(text) {
		panic(bail{syntaxError("")})
	}
	n, err := attr.ParseNumber(text)
	if err != nil {
		var msg string
		if ae, ok := err.(*awserr.Error); ok {
			msg = ae.Message
		} else {
			msg = err.Error()
		}
		p.failErr(awserr.Validation("%s under root", msg))
	}
	return &Lit{V: attr.NumberValue(n), P: pos}
}

// exponentFits reports whether a literal's exponent, and its scale, fit a
// 32-bit integer, which DynamoDB's reader needs.
func exponentFits(text string) bool {
	mant, exp, ok := strings.Cut(strings.ToLower(text), "e")
	if !ok {
		return true
	}
	e, err := strconv.ParseInt(exp, 10, 32)
	if err != nil {
		return false
	}
	frac := 0
	if _, f, ok := strings.Cut(mant, "."); ok {
		frac = len(f)
	}
	scale := int64(frac) - e
	return scale >= -1<<31 && scale < 1<<31
}
