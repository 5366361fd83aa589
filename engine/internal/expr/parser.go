package expr

import (
	"strconv"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Limits DynamoDB applies to expressions.
const (
	// MaxExpressionSize is the longest expression DynamoDB accepts, in bytes.
	MaxExpressionSize = 4096
	// MaxPathDepth is the deepest document path (elements after the first).
	MaxPathDepth = 32
	// MaxInOperands is the most operands on the right of IN.
	MaxInOperands = 100
	// maxNesting bounds parentheses and NOT nesting, so parsing is bounded
	// in stack however the input is written.
	maxNesting = 256
)

// The expression kinds, as DynamoDB names them in error messages.
const (
	kindCondition  = "ConditionExpression"
	kindFilter     = "FilterExpression"
	kindKey        = "KeyConditionExpression"
	kindProjection = "ProjectionExpression"
	kindUpdate     = "UpdateExpression"
)

// pathElem is one step of a document path: a map key (idx < 0) or a list index.
type pathElem struct {
	name string
	idx  int
}

// path is a document path: a top-level attribute name, then map keys and
// list indexes.
type path []pathElem

// String formats p as DynamoDB does in messages: [a, b, [2]].
func (p path) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range p {
		if i > 0 {
			b.WriteString(", ")
		}
		if e.idx >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.idx))
			b.WriteByte(']')
		} else {
			b.WriteString(e.name)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// resolve walks p in item.
func (p path) resolve(item attr.Item) (attr.Value, bool) {
	v, ok := item[p[0].name]
	if !ok {
		return attr.Value{}, false
	}
	for _, e := range p[1:] {
		if e.idx >= 0 {
			if v.T != attr.L || e.idx >= len(v.L) {
				return attr.Value{}, false
			}
			v = v.L[e.idx]
		} else {
			if v.T != attr.M {
				return attr.Value{}, false
			}
			if v, ok = v.M[e.name]; !ok {
				return attr.Value{}, false
			}
		}
	}
	return v, true
}

// opKind says what an operand is.
type opKind uint8

const (
	opPath opKind = iota + 1
	opValue
	opSize        // size(path)
	opIfNotExists // if_not_exists(path, operand)
	opListAppend  // list_append(operand, operand)
	opPlus        // operand + operand
	opMinus       // operand - operand
)

// operand is a value-producing term of an expression.
type operand struct {
	kind  opKind
	path  path
	val   attr.Value
	args  []operand // function arguments or the two sides of + and -
	text  string    // source text, for messages
	paren bool      // written inside parentheses
}

func (o *operand) isPath() bool { return o.kind == opPath }

// errCat classifies semantic errors. DynamoDB reports at most one error per
// expression; when several are present, the category decides which.
type errCat uint8

const (
	eParens errCat = iota
	eUnknownFunc
	eMisusedFunc
	eReserved
	eSection
	eUndefName
	eUndefValue
	ePaths
	eOperand
	eDistinct
	eFunction
	eOther
	nErrCats
)

// Reporting order of the categories, per expression family.
var (
	condOrder   = []errCat{eParens, eUnknownFunc, eMisusedFunc, eReserved, eUndefName, eUndefValue, eOperand, eDistinct, eFunction, eOther}
	updateOrder = []errCat{eReserved, eUnknownFunc, eMisusedFunc, eSection, eUndefName, eUndefValue, ePaths, eOperand, eFunction, eOther}
)

// parser is the recursive-descent parser shared by every expression kind.
// Syntax errors are sticky: the first one is kept and the token stream is
// forced to EOF so every loop ends. Semantic errors (undefined or reserved
// names, wrong operand types, ...) are kept per category and reported only
// when the syntax is valid, as DynamoDB does.
type parser struct {
	lx    lexer
	src   string
	kind  string
	tok   token
	prev  token
	p     *Params
	depth int
	order []errCat

	err  error // first syntax error
	errs [nErrCats]error
}

func newParser(kind, src string, p *Params) *parser {
	ps := &parser{lx: lexer{src: src}, src: src, kind: kind, p: p, order: condOrder}
	if kind == kindUpdate || kind == kindProjection {
		ps.order = updateOrder
	}
	ps.tok = ps.lx.next()
	ps.prev = token{kind: tEOF, start: -1}
	return ps
}

// checkSize rejects empty and oversized expressions before parsing.
func checkSize(kind, s string) error {
	if len(s) > MaxExpressionSize {
		return awserr.Validation("Invalid %s: Expression size has exceeded the maximum allowed size; expression size: %d", kind, len(s))
	}
	if strings.TrimSpace(s) == "" {
		return awserr.Validation("Invalid %s: The expression can not be empty;", kind)
	}
	return nil
}

// result returns the error to report: a syntax error, else the first
// semantic error in the kind's reporting order.
func (ps *parser) result() error {
	if ps.err != nil {
		return ps.err
	}
	for _, c := range ps.order {
		if ps.errs[c] != nil {
			return ps.errs[c]
		}
	}
	return nil
}

func (ps *parser) text(t token) string { return ps.src[t.start:t.end] }

func (ps *parser) advance() {
	ps.prev = ps.tok
	ps.tok = ps.lx.next()
}

func (ps *parser) peek() token {
	l := ps.lx
	return l.next()
}

// fail records a syntax error at the current token.
func (ps *parser) fail() {
	if ps.err == nil {
		tokText := "<EOF>"
		if ps.tok.kind != tEOF {
			tokText = ps.text(ps.tok)
		}
		start := ps.tok.start
		if ps.prev.start >= 0 {
			start = ps.prev.start
		}
		end := ps.tok.end
		if ps.tok.kind != tEOF {
			if nx := ps.peek(); nx.kind != tEOF {
				end = nx.end
			}
		}
		ps.err = awserr.Validation("Invalid %s: Syntax error; token: \"%s\", near: \"%s\"", ps.kind, tokText, ps.src[start:end])
	}
	ps.tok = token{kind: tEOF, start: len(ps.src), end: len(ps.src)}
	ps.lx.pos = len(ps.src)
}

// semantic records a non-syntax error of a category (first one wins).
func (ps *parser) semantic(c errCat, format string, args ...any) {
	if ps.errs[c] == nil {
		ps.errs[c] = awserr.Validation("Invalid "+ps.kind+": "+format, args...)
	}
}

func (ps *parser) expect(k tokKind) bool {
	if ps.tok.kind != k {
		ps.fail()
		return false
	}
	ps.advance()
	return true
}

func (ps *parser) isKeyword(kw string) bool { return keyword(ps.src, ps.tok, kw) }

// pathElemName reads one name element (identifier or #placeholder).
func (ps *parser) pathElemName() (string, bool) {
	t := ps.tok
	switch t.kind {
	case tIdent:
		name := ps.text(t)
		if isGrammarKeyword(name) {
			// Keywords of the grammar are never names, not even reserved ones:
			// DynamoDB reports a syntax error at them.
			ps.fail()
			return "", false
		}
		if isReserved(name) {
			ps.semantic(eReserved, "Attribute name is a reserved keyword; reserved keyword: %s", name)
		}
		ps.advance()
		return name, true
	case tName:
		ref := ps.text(t)
		name, ok := ps.p.name(ref)
		if !ok {
			ps.semantic(eUndefName, "An expression attribute name used in the document path is not defined; attribute name: %s", ref)
		}
		ps.advance()
		return name, true
	}
	ps.fail()
	return "", false
}

// isGrammarKeyword reports whether an identifier is one of the expression
// grammar's own keywords (any case).
func isGrammarKeyword(name string) bool {
	switch len(name) {
	case 2, 3, 6, 7:
	default:
		return false
	}
	var buf [7]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(name)]) {
	case "AND", "OR", "NOT", "IN", "BETWEEN", "SET", "REMOVE", "ADD", "DELETE":
		return true
	}
	return false
}

// parsePath reads a document path: name ('.' name | '[' n ']')*.
func (ps *parser) parsePath() path {
	name, ok := ps.pathElemName()
	if !ok {
		return nil
	}
	p := make(path, 1, 4)
	p[0] = pathElem{name: name, idx: -1}
	for ps.err == nil {
		switch ps.tok.kind {
		case tDot:
			ps.advance()
			name, ok := ps.pathElemName()
			if !ok {
				return nil
			}
			p = append(p, pathElem{name: name, idx: -1})
		case tLBracket:
			ps.advance()
			if ps.tok.kind != tNumber {
				ps.fail()
				return nil
			}
			n, err := strconv.Atoi(ps.text(ps.tok))
			if err != nil || n > 1<<30 {
				ps.fail()
				return nil
			}
			ps.advance()
			if !ps.expect(tRBracket) {
				return nil
			}
			p = append(p, pathElem{idx: n})
		default:
			if len(p)-1 > MaxPathDepth {
				ps.semantic(eOther, "The document path has too many nesting levels; nesting levels: %d", len(p)-1)
			}
			return p
		}
	}
	return nil
}

// parseValueRef reads a :placeholder.
func (ps *parser) parseValueRef() operand {
	ref := ps.text(ps.tok)
	v, ok := ps.p.value(ref)
	if !ok {
		ps.semantic(eUndefValue, "An expression attribute value used in expression is not defined; attribute value: %s", ref)
	}
	ps.advance()
	return operand{kind: opValue, val: v, text: ref}
}

// Function names DynamoDB knows, and where each may appear.
const (
	fnCondition = iota + 1 // a condition: attribute_exists(...)
	fnOperand              // a comparison operand: size(...)
	fnUpdate               // an update operand: if_not_exists, list_append
)

func functionClass(name string) int {
	switch name {
	case "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains":
		return fnCondition
	case "size":
		return fnOperand
	case "if_not_exists", "list_append":
		return fnUpdate
	}
	return 0
}

// isFuncCall reports whether the current token starts name(...).
func (ps *parser) isFuncCall() bool {
	return ps.tok.kind == tIdent && ps.peek().kind == tLParen
}

// parseArgs reads '(' operand {',' operand} ')' with arg parsing delegated.
func (ps *parser) parseArgs(arg func() operand) []operand {
	if !ps.expect(tLParen) {
		return nil
	}
	args := make([]operand, 0, 2)
	for ps.err == nil {
		args = append(args, arg())
		if ps.tok.kind == tComma {
			ps.advance()
			continue
		}
		ps.expect(tRParen)
		break
	}
	return args
}

func (ps *parser) nArgs(fn string, args []operand, n int) bool {
	if len(args) != n {
		// Conditions report operand counts before operand types; update
		// expressions report them with the function errors.
		cat := eOperand
		if ps.kind == kindUpdate {
			cat = eFunction
		}
		ps.semantic(cat, "Incorrect number of operands for operator or function; operator or function: %s, number of operands: %d", fn, len(args))
		return false
	}
	return true
}

func (ps *parser) needPath(fn string, o *operand) bool {
	if !o.isPath() {
		ps.semantic(eFunction, "Operator or function requires a document path; operator or function: %s", fn)
		return false
	}
	return true
}

// operandType checks a literal operand's type against allowed types.
func (ps *parser) literalType(fn string, o *operand, allowed ...attr.Type) {
	if o.kind != opValue || o.val.T == 0 {
		return
	}
	for _, t := range allowed {
		if o.val.T == t {
			return
		}
	}
	ps.semantic(eFunction, "Incorrect operand type for operator or function; operator or function: %s, operand type: %s", fn, o.val.T)
}

// enter/leave bound recursion.
func (ps *parser) enter() bool {
	ps.depth++
	if ps.depth > maxNesting {
		if ps.err == nil {
			ps.err = awserr.Validation("Invalid %s: The expression is nested too deeply; maximum nesting depth: %d", ps.kind, maxNesting)
		}
		ps.tok = token{kind: tEOF, start: len(ps.src), end: len(ps.src)}
		ps.lx.pos = len(ps.src)
		return false
	}
	return true
}

func (ps *parser) leave() { ps.depth-- }

// checkPaths checks a set of paths the way DynamoDB does for update and
// projection expressions: no path may equal or contain another ("overlap",
// reported first) and no two may use a map key and a list index at the
// same position ("conflict"). Each path is compared with the ones written
// before it; the earlier one is "path one".
func checkPaths(kind string, paths []path) error {
	var conflict error
	for j := 1; j < len(paths); j++ {
		for i := 0; i < j; i++ {
			a, b := paths[i], paths[j]
			n := min(len(a), len(b))
			k := 0
			for k < n && a[k] == b[k] {
				k++
			}
			if k == n {
				return awserr.Validation("Invalid %s: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: %s, path two: %s", kind, a, b)
			}
			if conflict == nil && (a[k].idx >= 0) != (b[k].idx >= 0) {
				conflict = awserr.Validation("Invalid %s: Two document paths conflict with each other; must remove or rewrite one of these paths; path one: %s, path two: %s", kind, a, b)
			}
		}
	}
	return conflict
}
