package partiql

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
)

// Builder turns the parts of a statement into the engine's expression
// types: it writes each as an expression over #n placeholders for names
// and :v placeholders for values and parses that with package expr, so
// PartiQL and the expression parameters share one evaluator. One Builder
// serves one statement and its parameters.
type Builder struct {
	src    string
	params []attr.Value
	names  map[string]string // #n0 -> name
	byName map[string]string // name -> #n0
	values map[string]attr.Value
}

// NewBuilder returns a Builder for a statement's source (for error
// positions) and its parameters, which must number st.Params.
func NewBuilder(src string, params []attr.Value) *Builder {
	return &Builder{src: src, params: params, names: map[string]string{}, byName: map[string]string{}, values: map[string]attr.Value{}}
}

func (b *Builder) exprParams() *expr.Params { return expr.NewParams(b.names, b.values) }

// at formats a position as DynamoDB does in messages: line:column:length.
func (b *Builder) at(pos, length int) string { return (&parser{src: b.src}).at(pos, length) }

// clean drops the "Invalid ConditionExpression: " (and similar) prefix
// expr puts on its messages: PartiQL has no expression parameters to name.
func clean(err error) error {
	var ae *awserr.Error
	if errors.As(err, &ae) && strings.HasPrefix(ae.Message, "Invalid ") {
		if _, rest, ok := strings.Cut(ae.Message, "Expression: "); ok {
			return awserr.Validation("%s", rest)
		}
	}
	return err
}

// Value evaluates a constant: a literal, a parameter or a collection of
// them.
func (b *Builder) Value(n Node) (attr.Value, error) {
	switch n := n.(type) {
	case *Lit:
		return n.V, nil
	case *Param:
		if n.N >= len(b.params) {
			return attr.Value{}, awserr.Validation("Number of parameters in request and statement don't match.")
		}
		return b.params[n.N], nil
	case *MapLit:
		m := make(attr.Item, len(n.Keys))
		for i, k := range n.Keys {
			v, err := b.Value(n.Vals[i])
			if err != nil {
				return attr.Value{}, err
			}
			m[k] = v
		}
		return attr.Map(m), nil
	case *ListLit:
		l := make([]attr.Value, 0, len(n.Elems))
		for _, e := range n.Elems {
			v, err := b.Value(e)
			if err != nil {
				return attr.Value{}, err
			}
			l = append(l, v)
		}
		return attr.List(l...), nil
	case *SetLit:
		return b.set(n)
	case *Call:
		return attr.Value{}, awserr.Validation("Unsupported data type: %s under key root at %s", n.Name, b.at(n.P, len(n.Name)))
	}
	return attr.Value{}, awserr.Validation("%sExpected a value", notWellFormed)
}

// set evaluates <<a, b>>: members of one scalar type, no duplicates.
func (b *Builder) set(n *SetLit) (attr.Value, error) {
	if len(n.Elems) == 0 {
		return attr.Value{}, awserr.Validation("Empty bags are not supported")
	}
	var out attr.Value
	var text []string
	for i, e := range n.Elems {
		v, err := b.Value(e)
		if err != nil {
			return attr.Value{}, err
		}
		st := map[attr.Type]attr.Type{attr.S: attr.SS, attr.N: attr.NS, attr.B: attr.BS}[v.T]
		if st == 0 || i > 0 && st != out.T {
			return attr.Value{}, awserr.Validation("One or more parameter values were invalid: Set members must all be strings, all numbers or all binaries")
		}
		out.T = st
		if v.T == attr.B {
			out.BS = append(out.BS, v.B)
			text = append(text, string(v.B))
		} else {
			out.SS = append(out.SS, v.S)
			text = append(text, v.S)
		}
	}
	sorted := append([]string(nil), text...)
	sort.Strings(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return attr.Value{}, awserr.Validation("One or more parameter values were invalid: Input collection [%s] contains duplicates.", strings.Join(text, ", "))
		}
	}
	return out, nil
}

// path writes a path with name placeholders.
func (b *Builder) path(sb *strings.Builder, p *Path) {
	for i, e := range p.Elems {
		if e.IsIndex {
			sb.WriteString("[" + strconv.Itoa(e.Index) + "]")
			continue
		}
		if i > 0 {
			sb.WriteByte('.')
		}
		ref, ok := b.byName[e.Name]
		if !ok {
			ref = "#n" + strconv.Itoa(len(b.byName))
			b.byName[e.Name] = ref
			b.names[ref] = e.Name
		}
		sb.WriteString(ref)
	}
}

// value writes a constant as a value placeholder.
func (b *Builder) value(sb *strings.Builder, n Node) error {
	v, err := b.Value(n)
	if err != nil {
		return err
	}
	ref := ":v" + strconv.Itoa(len(b.values))
	b.values[ref] = v
	sb.WriteString(ref)
	return nil
}

// Filter builds a SELECT's WHERE as a FilterExpression.
func (b *Builder) Filter(where Node) (*expr.Condition, error) {
	var sb strings.Builder
	if err := b.cond(&sb, where); err != nil {
		return nil, err
	}
	c, err := expr.ParseFilter(sb.String(), b.exprParams())
	return c, clean(err)
}

// Condition builds the conditions of a write, with attribute_exists on
// mustExist (the hash key) first when it is not "".
func (b *Builder) Condition(terms []Node, mustExist string) (*expr.Condition, error) {
	var sb strings.Builder
	if mustExist != "" {
		sb.WriteString("attribute_exists(")
		b.path(&sb, &Path{Elems: []Elem{{Name: mustExist}}})
		sb.WriteString(")")
	}
	for _, t := range terms {
		if sb.Len() > 0 {
			sb.WriteString(" AND ")
		}
		sb.WriteByte('(')
		if err := b.cond(&sb, t); err != nil {
			return nil, err
		}
		sb.WriteByte(')')
	}
	if sb.Len() == 0 {
		return nil, nil
	}
	c, err := expr.ParseCondition(sb.String(), b.exprParams())
	return c, clean(err)
}

// Absent is attribute_not_exists(name): INSERT's guard against a duplicate
// key.
func (b *Builder) Absent(name string) (*expr.Condition, error) {
	var sb strings.Builder
	sb.WriteString("attribute_not_exists(")
	b.path(&sb, &Path{Elems: []Elem{{Name: name}}})
	sb.WriteString(")")
	return expr.ParseCondition(sb.String(), b.exprParams())
}

func (b *Builder) cond(sb *strings.Builder, n Node) error {
	switch n := n.(type) {
	case *Binary:
		switch n.Op {
		case "AND", "OR":
			sb.WriteByte('(')
			if err := b.cond(sb, n.L); err != nil {
				return err
			}
			sb.WriteString(") " + n.Op + " (")
			if err := b.cond(sb, n.R); err != nil {
				return err
			}
			sb.WriteByte(')')
			return nil
		case "=", "<>", "<", "<=", ">", ">=":
			if c, want, ok := truthTest(n); ok {
				return b.negated(sb, !want, func() error { return b.condCall(sb, c) })
			}
			if n.Op != "=" && n.Op != "<>" {
				if err := b.ordered(n.Op, n.L, n.R); err != nil {
					return err
				}
			}
			if err := b.operand(sb, n.L); err != nil {
				return err
			}
			sb.WriteString(" " + n.Op + " ")
			return b.operand(sb, n.R)
		}
	case *Not:
		sb.WriteString("NOT (")
		if err := b.cond(sb, n.X); err != nil {
			return err
		}
		sb.WriteByte(')')
		return nil
	case *Between:
		if err := b.ordered("BETWEEN", n.X, n.Lo, n.Hi); err != nil {
			return err
		}
		return b.negated(sb, n.Not, func() error {
			for i, o := range []Node{n.X, n.Lo, n.Hi} {
				sb.WriteString([]string{"", " BETWEEN ", " AND "}[i])
				if err := b.operand(sb, o); err != nil {
					return err
				}
			}
			return nil
		})
	case *In:
		return b.negated(sb, n.Not, func() error { return b.in(sb, n) })
	case *Is:
		return b.is(sb, n)
	case *Call:
		return b.condCall(sb, n)
	}
	return awserr.Validation("%sExpected a condition at %s", notWellFormed, b.at(n.Pos(), 1))
}

// ordered refuses a constant operand of an ordering operator whose type
// has no order (only strings, numbers and binaries have one).
func (b *Builder) ordered(op string, operands ...Node) error {
	for _, o := range operands {
		if !IsConst(o) {
			continue
		}
		v, err := b.Value(o)
		if err != nil {
			return err
		}
		if v.T != attr.S && v.T != attr.N && v.T != attr.B {
			return awserr.Validation("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", op, v.T)
		}
	}
	return nil
}

func (b *Builder) negated(sb *strings.Builder, not bool, body func() error) error {
	if not {
		sb.WriteString("NOT (")
	}
	if err := body(); err != nil {
		return err
	}
	if not {
		sb.WriteByte(')')
	}
	return nil
}

// in writes x IN (a, b); a lone parameter holding a list stands for its
// elements.
func (b *Builder) in(sb *strings.Builder, n *In) error {
	list := n.List
	if len(list) == 1 {
		if _, ok := list[0].(*Param); ok {
			v, err := b.Value(list[0])
			if err != nil {
				return err
			}
			if v.T == attr.L {
				list = nil
				for _, e := range v.L {
					list = append(list, &Lit{V: e, P: n.P})
				}
			}
		}
	}
	if len(list) == 0 {
		return awserr.Validation("%sIN requires at least one value", notWellFormed)
	}
	if err := b.operand(sb, n.X); err != nil {
		return err
	}
	sb.WriteString(" IN (")
	for i, e := range list {
		if i > 0 {
			sb.WriteString(", ")
		}
		if err := b.operand(sb, e); err != nil {
			return err
		}
	}
	sb.WriteByte(')')
	return nil
}

// is writes IS [NOT] MISSING as attribute_(not_)exists and IS [NOT] NULL
// as PartiQL reads it: a NULL value or no value at all.
func (b *Builder) is(sb *strings.Builder, n *Is) error {
	p, ok := n.X.(*Path)
	if !ok {
		return awserr.Validation("Operator or function requires a document path; operator or function: IS")
	}
	var ps strings.Builder
	b.path(&ps, p)
	switch {
	case n.Types != nil:
		var terms []string
		for _, t := range n.Types {
			ref := ":v" + strconv.Itoa(len(b.values))
			b.values[ref] = attr.Str(t.String())
			terms = append(terms, "attribute_type("+ps.String()+", "+ref+")")
		}
		either := strings.Join(terms, " OR ")
		if n.Not {
			either = "NOT (" + either + ")"
		}
		sb.WriteString(either)
	case n.Missing && n.Not:
		sb.WriteString("attribute_exists(" + ps.String() + ")")
	case n.Missing:
		sb.WriteString("attribute_not_exists(" + ps.String() + ")")
	default:
		ref := ":v" + strconv.Itoa(len(b.values))
		b.values[ref] = attr.Str("NULL")
		either := "attribute_not_exists(" + ps.String() + ") OR attribute_type(" + ps.String() + ", " + ref + ")"
		if n.Not {
			either = "NOT (" + either + ")"
		}
		sb.WriteString(either)
	}
	return nil
}

// truthTest recognizes f(...) = TRUE, f(...) <> FALSE and the like, f a
// condition function, and returns f and the truth value it must have.
func truthTest(n *Binary) (*Call, bool, bool) {
	if n.Op != "=" && n.Op != "<>" {
		return nil, false, false
	}
	c, ok := n.L.(*Call)
	lit, isLit := n.R.(*Lit)
	if !ok {
		c, ok = n.R.(*Call)
		lit, isLit = n.L.(*Lit)
	}
	if !ok || !isLit || lit.V.T != attr.BOOL || c.Name == "size" {
		return nil, false, false
	}
	return c, lit.V.Bool == (n.Op == "="), true
}

// condCall writes a function used as a condition.
func (b *Builder) condCall(sb *strings.Builder, n *Call) error {
	switch n.Name {
	case "attribute_exists", "attribute_not_exists":
		if len(n.Args) != 1 {
			return awserr.Validation("Incorrect number of operands for operator or function; operator or function: %s, number of operands: %d", n.Name, len(n.Args))
		}
		if _, ok := n.Args[0].(*Path); !ok {
			return awserr.Validation("Operator or function requires a document path; operator or function: %s", n.Name)
		}
	case "begins_with", "contains", "attribute_type":
	default:
		return awserr.Validation("Unrecognized function: %s at %s", n.Name, b.at(n.P, len(n.Name)))
	}
	return b.call(sb, n, b.operand)
}

func (b *Builder) call(sb *strings.Builder, n *Call, arg func(*strings.Builder, Node) error) error {
	sb.WriteString(n.Name + "(")
	for i, a := range n.Args {
		if i > 0 {
			sb.WriteString(", ")
		}
		if err := arg(sb, a); err != nil {
			return err
		}
	}
	sb.WriteByte(')')
	return nil
}

// operand writes a comparison operand: a path, a constant or size(path).
func (b *Builder) operand(sb *strings.Builder, n Node) error {
	switch x := n.(type) {
	case *Path:
		b.path(sb, x)
		return nil
	case *Call:
		if x.Name != "size" {
			return awserr.Validation("Unrecognized function: %s at %s", x.Name, b.at(x.P, len(x.Name)))
		}
		return b.call(sb, x, b.operand)
	case *Binary:
		return awserr.Validation("%sUnexpected operator %s at %s", notWellFormed, x.Op, b.at(x.P, len(x.Op)))
	}
	if !IsConst(n) {
		return awserr.Validation("%sExpected a path or a value at %s", notWellFormed, b.at(n.Pos(), 1))
	}
	return b.value(sb, n)
}

// Update builds an UPDATE's SET and REMOVE clauses as an
// UpdateExpression. SET p = set_add(p, <<..>>) is ADD and set_delete is
// DELETE.
func (b *Builder) Update(st *Statement) (*expr.Update, error) {
	var set, add, del, rm []string
	for _, a := range st.Sets {
		var sb strings.Builder
		b.path(&sb, a.Path)
		if c, ok := a.Value.(*Call); ok && (c.Name == "set_add" || c.Name == "set_delete") {
			if err := b.setFunc(&sb, a.Path, c); err != nil {
				return nil, err
			}
			if c.Name == "set_add" {
				add = append(add, sb.String())
			} else {
				del = append(del, sb.String())
			}
			continue
		}
		sb.WriteString(" = ")
		if err := b.updOperand(&sb, a.Value); err != nil {
			return nil, err
		}
		set = append(set, sb.String())
	}
	for _, p := range st.Removes {
		var sb strings.Builder
		b.path(&sb, p)
		rm = append(rm, sb.String())
	}
	var out []string
	for i, clause := range [][]string{set, rm, add, del} {
		if len(clause) > 0 {
			out = append(out, []string{"SET ", "REMOVE ", "ADD ", "DELETE "}[i]+strings.Join(clause, ", "))
		}
	}
	u, err := expr.ParseUpdate(strings.Join(out, " "), b.exprParams())
	return u, clean(err)
}

// setFunc checks set_add(path, <<...>>) / set_delete and writes its set.
func (b *Builder) setFunc(sb *strings.Builder, target *Path, c *Call) error {
	fn := strings.ToUpper(c.Name)
	if len(c.Args) != 2 {
		return awserr.Validation("%s must have exactly two arguments at %s", fn, b.at(c.P, len(c.Name)))
	}
	first, ok := c.Args[0].(*Path)
	if !ok || !first.Equal(target) {
		return awserr.Validation("The first argument to %s must equal the assignment value at %s", fn, b.at(c.P, len(c.Name)))
	}
	v, err := b.Value(c.Args[1])
	if err == nil && !v.IsSet() {
		return awserr.Validation("The second argument to %s must be a value with type SET at %s", fn, b.at(first.P, pathLen(b.src, first)))
	}
	if err != nil {
		if _, isConst := c.Args[1].(*SetLit); !isConst && !IsConst(c.Args[1]) {
			return awserr.Validation("The second argument to %s must be a value with type SET at %s", fn, b.at(first.P, pathLen(b.src, first)))
		}
		return err
	}
	sb.WriteByte(' ')
	ref := ":v" + strconv.Itoa(len(b.values))
	b.values[ref] = v
	sb.WriteString(ref)
	return nil
}

// pathLen is the length of the path's first name as written.
func pathLen(src string, p *Path) int {
	if p.P < len(src) && src[p.P] == '"' {
		return len(p.Elems[0].Name) + 2
	}
	return len(p.Elems[0].Name)
}

// updOperand writes a SET value: a path, a constant, a + b, a - b,
// list_append(a, b) or if_not_exists(path, v).
func (b *Builder) updOperand(sb *strings.Builder, n Node) error {
	switch x := n.(type) {
	case *Path:
		b.path(sb, x)
		return nil
	case *Binary:
		if x.Op != "+" && x.Op != "-" {
			return awserr.Validation("%sUnexpected operator %s at %s", notWellFormed, x.Op, b.at(x.P, len(x.Op)))
		}
		if err := b.updOperand(sb, x.L); err != nil {
			return err
		}
		sb.WriteString(" " + x.Op + " ")
		return b.updOperand(sb, x.R)
	case *Call:
		switch x.Name {
		case "list_append", "if_not_exists":
			return b.call(sb, x, b.updOperand)
		}
		return awserr.Validation("Unrecognized function: %s at %s", x.Name, b.at(x.P, len(x.Name)))
	}
	if !IsConst(n) {
		return awserr.Validation("%sExpected a path or a value at %s", notWellFormed, b.at(n.Pos(), 1))
	}
	return b.value(sb, n)
}
