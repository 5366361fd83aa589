package expr

import (
	"errors"
	"sort"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// actKind is the clause an update action belongs to.
type actKind uint8

const (
	actSet actKind = iota + 1
	actRemove
	actAdd
	actDelete
)

var clauseNames = [...]string{"", "SET", "REMOVE", "ADD", "DELETE"}

// action is one SET, REMOVE, ADD or DELETE action.
type action struct {
	kind actKind
	path path
	val  operand // SET value, ADD/DELETE operand
}

// Update is a parsed UpdateExpression.
type Update struct {
	actions []action
	legacy  bool // built from AttributeUpdates: type errors are worded for it
}

// Runtime errors, as DynamoDB words them.
const (
	msgBadPath     = "The document path provided in the update expression is invalid for update"
	msgMissingAttr = "The provided expression refers to an attribute that does not exist in the item"
	msgBadType     = "An operand in the update expression has an incorrect data type"
)

// ParseUpdate parses an UpdateExpression: SET, REMOVE, ADD and DELETE
// clauses, each at most once, in any order. SET values may use + and -,
// if_not_exists(path, value) and list_append(a, b). Paths of different
// actions must not overlap or conflict.
func ParseUpdate(s string, p *Params) (*Update, error) {
	if err := checkSize(kindUpdate, s); err != nil {
		return nil, err
	}
	ps := newParser(kindUpdate, s, p)
	u := &Update{}
	var seen [5]bool
	for ps.err == nil && ps.tok.kind != tEOF {
		var k actKind
		for i := actSet; i <= actDelete; i++ {
			if ps.isKeyword(clauseNames[i]) {
				k = i
			}
		}
		if k == 0 {
			ps.fail()
			break
		}
		if seen[k] {
			ps.semantic(eSection, "The %q section can only be used once in an update expression;", clauseNames[k])
		}
		seen[k] = true
		ps.advance()
		for ps.err == nil {
			u.actions = append(u.actions, ps.parseAction(k))
			if ps.tok.kind != tComma {
				break
			}
			ps.advance()
		}
	}
	if ps.err == nil {
		paths := make([]path, len(u.actions))
		for i := range u.actions {
			paths[i] = u.actions[i].path
		}
		ps.errs[ePaths] = checkPaths(kindUpdate, paths)
	}
	if err := ps.result(); err != nil {
		return nil, err
	}
	return u, nil
}

func (ps *parser) parseAction(k actKind) action {
	a := action{kind: k, path: ps.parsePath()}
	switch k {
	case actSet:
		if !ps.expect(tEq) {
			return a
		}
		a.val = ps.parseSetValue()
	case actAdd, actDelete:
		if ps.tok.kind != tValue {
			ps.fail()
			return a
		}
		a.val = ps.parseValueRef()
		t := a.val.val.T
		if t == 0 {
			break
		}
		if k == actAdd && t != attr.N && !a.val.val.IsSet() {
			ps.semantic(eOperand, "Incorrect operand type for operator or function; operator: ADD, operand type: %s, typeSet: ALLOWED_FOR_ADD_OPERAND", longType(t))
		}
		if k == actDelete && !a.val.val.IsSet() {
			ps.semantic(eOperand, "Incorrect operand type for operator or function; operator: DELETE, operand type: %s, typeSet: ALLOWED_FOR_DELETE_OPERAND", longType(t))
		}
	}
	return a
}

// longType is the type name DynamoDB uses in ADD/DELETE messages.
func longType(t attr.Type) string {
	switch t {
	case attr.S:
		return "STRING"
	case attr.N:
		return "NUMBER"
	case attr.B:
		return "BINARY"
	case attr.BOOL:
		return "BOOLEAN"
	case attr.NULL:
		return "NULL"
	case attr.SS:
		return "STRING_SET"
	case attr.NS:
		return "NUMBER_SET"
	case attr.BS:
		return "BINARY_SET"
	case attr.M:
		return "MAP"
	case attr.L:
		return "LIST"
	}
	return t.String()
}

// parseSetValue reads operand [('+' | '-') operand].
func (ps *parser) parseSetValue() operand {
	a := ps.parseUpdOperand()
	if ps.tok.kind != tPlus && ps.tok.kind != tMinus {
		return a
	}
	k, sym := opPlus, "+"
	if ps.tok.kind == tMinus {
		k, sym = opMinus, "-"
	}
	ps.advance()
	b := ps.parseUpdOperand()
	ps.literalType(sym, &a, attr.N)
	ps.literalType(sym, &b, attr.N)
	return operand{kind: k, args: []operand{a, b}, text: sym}
}

// parseUpdOperand reads a path, a :value, if_not_exists(...) or list_append(...).
func (ps *parser) parseUpdOperand() operand {
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
		o := ps.parseSetValue()
		ps.expect(tRParen)
		return o
	case tValue:
		return ps.parseValueRef()
	case tIdent, tName:
		if !ps.isFuncCall() {
			start := ps.tok.start
			p := ps.parsePath()
			if ps.err != nil {
				return operand{}
			}
			return operand{kind: opPath, path: p, text: ps.src[start:ps.prev.end]}
		}
		if !ps.enter() {
			return operand{}
		}
		defer ps.leave()
		name := ps.text(ps.tok)
		ps.advance()
		args := ps.parseArgs(ps.parseUpdOperand)
		switch name {
		case "if_not_exists":
			if ps.nArgs(name, args, 2) && ps.needPath(name, &args[0]) {
				return operand{kind: opIfNotExists, args: args, text: name}
			}
		case "list_append":
			if ps.nArgs(name, args, 2) {
				ps.literalType(name, &args[0], attr.L)
				ps.literalType(name, &args[1], attr.L)
				return operand{kind: opListAppend, args: args, text: name}
			}
		default:
			if functionClass(name) != 0 {
				ps.semantic(eMisusedFunc, "The function is not allowed in an update expression; function: %s", name)
			} else {
				ps.semantic(eUnknownFunc, "Invalid function name; function: %s", name)
			}
		}
		return operand{}
	}
	ps.fail()
	return operand{}
}

// eval computes a SET value against the item as it was before the update.
func (o *operand) eval(item attr.Item) (attr.Value, error) {
	switch o.kind {
	case opValue:
		return o.val, nil
	case opPath:
		v, ok := o.path.resolve(item)
		if !ok {
			return attr.Value{}, awserr.Validation(msgMissingAttr)
		}
		return v, nil
	case opIfNotExists:
		if v, ok := o.args[0].path.resolve(item); ok {
			return v, nil
		}
		return o.args[1].eval(item)
	case opListAppend:
		a, err := o.args[0].eval(item)
		if err != nil {
			return attr.Value{}, err
		}
		b, err := o.args[1].eval(item)
		if err != nil {
			return attr.Value{}, err
		}
		if a.T != attr.L || b.T != attr.L {
			return attr.Value{}, awserr.Validation(msgBadType)
		}
		l := make([]attr.Value, 0, len(a.L)+len(b.L))
		l = append(l, a.L...)
		return attr.List(append(l, b.L...)...), nil
	case opPlus, opMinus:
		a, err := o.args[0].eval(item)
		if err != nil {
			return attr.Value{}, err
		}
		b, err := o.args[1].eval(item)
		if err != nil {
			return attr.Value{}, err
		}
		if a.T != attr.N || b.T != attr.N {
			return attr.Value{}, awserr.Validation(msgBadType)
		}
		na, err := a.AsNumber()
		if err != nil {
			return attr.Value{}, err
		}
		nb, err := b.AsNumber()
		if err != nil {
			return attr.Value{}, err
		}
		var r attr.Number
		if o.kind == opPlus {
			r, err = na.Add(nb)
		} else {
			r, err = na.Sub(nb)
		}
		if err != nil {
			return attr.Value{}, err
		}
		return attr.NumberValue(r), nil
	}
	return attr.Value{}, awserr.Validation(msgBadType)
}

// Apply applies the update to item and returns the new item (item itself
// is not modified; nil is treated as an empty item, as for an upsert) and
// the top-level attribute names the update touched, in expression order.
// Every value is computed from item as it was before the update, as in
// DynamoDB. Errors are ValidationExceptions worded as DynamoDB's.
func (u *Update) Apply(item attr.Item) (attr.Item, []string, error) {
	out, touched, err := u.apply(item)
	if err != nil && u.legacy {
		var ae *awserr.Error
		if errors.As(err, &ae) && ae.Message == msgBadType {
			err = awserr.Validation("Type mismatch for attribute to update")
		}
	}
	return out, touched, err
}

func (u *Update) apply(item attr.Item) (attr.Item, []string, error) {
	// Compute SET values first, against the original item.
	vals := make([]attr.Value, len(u.actions))
	for i := range u.actions {
		if u.actions[i].kind == actSet {
			v, err := u.actions[i].val.eval(item)
			if err != nil {
				return nil, nil, err
			}
			vals[i] = v.Clone()
		}
	}
	out := attr.CloneItem(item)
	if out == nil {
		out = attr.Item{}
	}
	var removes []int
	for i := range u.actions {
		a := &u.actions[i]
		var err error
		switch a.kind {
		case actSet:
			err = setPath(out, a.path, vals[i])
		case actAdd:
			err = addPath(out, a.path, a.val.val)
		case actDelete:
			err = deletePath(out, a.path, a.val.val)
		case actRemove:
			removes = append(removes, i)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	// Remove last, deepest list indexes first, so that indexes written in
	// the expression keep referring to the original lists.
	sort.Slice(removes, func(x, y int) bool {
		return pathLess(u.actions[removes[y]].path, u.actions[removes[x]].path)
	})
	for _, i := range removes {
		if err := removePath(out, u.actions[i].path); err != nil {
			return nil, nil, err
		}
	}
	touched := make([]string, 0, len(u.actions))
	for _, a := range u.actions {
		name := a.path[0].name
		dup := false
		for _, t := range touched {
			if t == name {
				dup = true
				break
			}
		}
		if !dup {
			touched = append(touched, name)
		}
	}
	return out, touched, nil
}

// pathLess orders paths element by element, list indexes numerically.
func pathLess(a, b path) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if x.idx != y.idx {
			return x.idx < y.idx
		}
		if x.name != y.name {
			return x.name < y.name
		}
	}
	return len(a) < len(b)
}

// container returns a pointer to the value holding p's last element, for
// modification in place (out is a private deep copy).
func container(out attr.Item, p path) (*attr.Value, bool) {
	v, ok := out[p[0].name]
	if !ok {
		return nil, false
	}
	// Values in a map are not addressable; M and L payloads are reference
	// types, so walking by value still reaches the shared storage.
	cur := &v
	for _, e := range p[1 : len(p)-1] {
		if e.idx >= 0 {
			if cur.T != attr.L || e.idx >= len(cur.L) {
				return nil, false
			}
			cur = &cur.L[e.idx]
		} else {
			if cur.T != attr.M {
				return nil, false
			}
			x, ok := cur.M[e.name]
			if !ok {
				return nil, false
			}
			cur = &x
		}
	}
	return cur, true
}

// get returns the current value at p in out.
func get(out attr.Item, p path) (attr.Value, bool) { return p.resolve(out) }

// put stores v at p; the parent must exist with the right type. A list
// index past the end appends.
func put(out attr.Item, p path, v attr.Value) error {
	if len(p) == 1 {
		out[p[0].name] = v
		return nil
	}
	parent, ok := container(out, p)
	if !ok {
		return awserr.Validation(msgBadPath)
	}
	last := p[len(p)-1]
	if last.idx >= 0 {
		if parent.T != attr.L {
			return awserr.Validation(msgBadPath)
		}
		if last.idx < len(parent.L) {
			parent.L[last.idx] = v
			return nil
		}
		// Appending grows the slice: write the list back to its holder.
		return put(out, p[:len(p)-1], attr.List(append(parent.L, v)...))
	}
	if parent.T != attr.M {
		return awserr.Validation(msgBadPath)
	}
	parent.M[last.name] = v
	return nil
}

func setPath(out attr.Item, p path, v attr.Value) error { return put(out, p, v) }

func addPath(out attr.Item, p path, v attr.Value) error {
	cur, ok := get(out, p)
	if !ok {
		return put(out, p, v.Clone())
	}
	switch {
	case v.T == attr.N && cur.T == attr.N:
		a, err := cur.AsNumber()
		if err != nil {
			return err
		}
		b, err := v.AsNumber()
		if err != nil {
			return err
		}
		r, err := a.Add(b)
		if err != nil {
			return err
		}
		return put(out, p, attr.NumberValue(r))
	case v.IsSet() && cur.T == v.T:
		return put(out, p, setUnion(cur, v))
	}
	return awserr.Validation(msgBadType)
}

func deletePath(out attr.Item, p path, v attr.Value) error {
	cur, ok := get(out, p)
	if !ok {
		// Nothing to delete, but the path must still be a valid place.
		if len(p) > 1 {
			parent, ok := container(out, p)
			last := p[len(p)-1]
			if !ok || last.idx >= 0 && parent.T != attr.L || last.idx < 0 && parent.T != attr.M {
				return awserr.Validation(msgBadPath)
			}
		}
		return nil
	}
	if !v.IsSet() || cur.T != v.T {
		return awserr.Validation(msgBadType)
	}
	r := setDifference(cur, v)
	if (r.T == attr.BS && len(r.BS) == 0) || (r.T != attr.BS && len(r.SS) == 0) {
		return removePath(out, p)
	}
	return put(out, p, r)
}

// removePath deletes p; a missing attribute or index is not an error, a
// missing or mistyped parent is.
func removePath(out attr.Item, p path) error {
	if len(p) == 1 {
		delete(out, p[0].name)
		return nil
	}
	parent, ok := container(out, p)
	if !ok {
		return awserr.Validation(msgBadPath)
	}
	last := p[len(p)-1]
	if last.idx >= 0 {
		if parent.T != attr.L {
			return awserr.Validation(msgBadPath)
		}
		if last.idx >= len(parent.L) {
			return nil
		}
		l := make([]attr.Value, 0, len(parent.L)-1)
		l = append(l, parent.L[:last.idx]...)
		l = append(l, parent.L[last.idx+1:]...)
		return put(out, p[:len(p)-1], attr.List(l...))
	}
	if parent.T != attr.M {
		return awserr.Validation(msgBadPath)
	}
	delete(parent.M, last.name)
	return nil
}

func setUnion(a, b attr.Value) attr.Value {
	r := a.Clone()
	if a.T == attr.BS {
		for _, x := range b.BS {
			if !hasBytes(r.BS, x) {
				r.BS = append(r.BS, append([]byte{}, x...))
			}
		}
		return r
	}
	for _, x := range b.SS {
		if !hasMember(a.T, r.SS, x) {
			r.SS = append(r.SS, x)
		}
	}
	return r
}

func setDifference(a, b attr.Value) attr.Value {
	r := attr.Value{T: a.T}
	if a.T == attr.BS {
		r.BS = [][]byte{}
		for _, x := range a.BS {
			if !hasBytes(b.BS, x) {
				r.BS = append(r.BS, x)
			}
		}
		return r
	}
	r.SS = []string{}
	for _, x := range a.SS {
		if !hasMember(a.T, b.SS, x) {
			r.SS = append(r.SS, x)
		}
	}
	return r
}

func hasBytes(set [][]byte, x []byte) bool {
	for _, y := range set {
		if string(y) == string(x) {
			return true
		}
	}
	return false
}

func hasMember(t attr.Type, set []string, x string) bool {
	for _, y := range set {
		if y == x || t == attr.NS && attr.Equal(attr.Value{T: attr.N, S: y}, attr.Value{T: attr.N, S: x}) {
			return true
		}
	}
	return false
}

// UpdatedPaths returns a projection of the document paths the update
// writes or removes. Applied to the item before and after the update it
// gives DynamoDB's ReturnValues UPDATED_OLD and UPDATED_NEW (nested updates
// return only the nested part). Paths of one update never overlap, so the
// projection is always valid.
func (u *Update) UpdatedPaths() *Projection {
	proj := &Projection{root: &projNode{}}
	for _, a := range u.actions {
		proj.paths = append(proj.paths, a.path)
		n := proj.root
		for _, e := range a.path {
			n = n.child(e)
		}
		n.leaf = true
	}
	sortOrders(proj.root)
	return proj
}
