// Package partiql reads the subset of PartiQL that DynamoDB serves
// (ExecuteStatement, BatchExecuteStatement, ExecuteTransaction): SELECT,
// INSERT, UPDATE, DELETE and, inside transactions, EXISTS. Parse turns a
// statement into a Statement; Builder turns its WHERE, SET and REMOVE
// parts into the engine's expression types (package expr), so PartiQL is
// evaluated by the same code as ConditionExpression, FilterExpression and
// UpdateExpression. Every mistake is an *awserr.Error ValidationException
// worded as DynamoDB words it; the parser never panics.
package partiql

import "github.com/ttl-archiver/archiver/engine/internal/attr"

// Kind is what a statement does.
type Kind uint8

// The statement kinds.
const (
	Select Kind = iota + 1
	Insert
	Update
	Delete
	Exists // EXISTS(SELECT ...), a condition check in ExecuteTransaction
)

func (k Kind) String() string {
	return [...]string{"", "SELECT", "INSERT", "UPDATE", "DELETE", "EXISTS"}[k]
}

// Statement is one parsed statement.
type Statement struct {
	Kind  Kind
	Table string
	Index string // FROM "Table"."Index"; "" for the table

	Columns []*Path // SELECT's projection; nil for *
	Where   Node    // nil when absent
	OrderBy *Path   // SELECT ... ORDER BY path
	Desc    bool

	Value Node // INSERT's VALUE

	Sets    []Assign // UPDATE ... SET
	Removes []*Path  // UPDATE ... REMOVE

	// Returning is "", "ALL OLD", "MODIFIED OLD", "ALL NEW" or
	// "MODIFIED NEW" (RETURNING ... *).
	Returning string

	// Params is the number of ? placeholders.
	Params int
}

// IsRead reports whether the statement only reads (SELECT).
func (s *Statement) IsRead() bool { return s.Kind == Select }

// Assign is one SET path = value.
type Assign struct {
	Path  *Path
	Value Node
}

// Node is an expression: a path, a literal, a parameter, an operator or a
// function call.
type Node interface{ Pos() int }

// Elem is one step of a path: a name, or a list index when IsIndex.
type Elem struct {
	Name    string
	Index   int
	IsIndex bool
}

// Path is a document path: a top-level name, then names and indexes.
type Path struct {
	Elems []Elem
	P     int
}

// Lit is a scalar literal: a string, a number, TRUE, FALSE or NULL.
type Lit struct {
	V attr.Value
	P int
}

// Param is the N-th ? (from 0).
type Param struct{ N, P int }

// MapLit is {'k': v, ...}.
type MapLit struct {
	Keys []string
	Vals []Node
	P    int
}

// ListLit is [v, ...].
type ListLit struct {
	Elems []Node
	P     int
}

// SetLit is <<v, ...>>.
type SetLit struct {
	Elems []Node
	P     int
}

// Binary is a comparison (=, <>, <, <=, >, >=), AND, OR, + or -.
type Binary struct {
	Op   string
	L, R Node
	P    int
}

// Not is NOT x.
type Not struct {
	X Node
	P int
}

// Between is x [NOT] BETWEEN lo AND hi.
type Between struct {
	X, Lo, Hi Node
	Not       bool
	P         int
}

// In is x [NOT] IN [a, b, ...].
type In struct {
	X    Node
	List []Node
	Not  bool
	P    int
}

// Is is x IS [NOT] MISSING, x IS [NOT] NULL or x IS [NOT] <type>.
type Is struct {
	X       Node
	Missing bool        // MISSING
	Types   []attr.Type // a type name: the DynamoDB types it stands for
	Not     bool
	P       int
}

// typeNames maps the PartiQL type names IS accepts to DynamoDB types.
var typeNames = map[string][]attr.Type{
	"BOOL": {attr.BOOL}, "BOOLEAN": {attr.BOOL}, "STRING": {attr.S},
	"NUMBER": {attr.N}, "INT": {attr.N}, "INTEGER": {attr.N}, "DECIMAL": {attr.N}, "FLOAT": {attr.N}, "DOUBLE": {attr.N},
	"BLOB": {attr.B}, "BINARY": {attr.B}, "LIST": {attr.L}, "STRUCT": {attr.M}, "TUPLE": {attr.M}, "MAP": {attr.M},
	"BAG": {attr.SS, attr.NS, attr.BS},
}

// Call is a function call, name in lower case.
type Call struct {
	Name string
	Args []Node
	P    int
}

func (n *Path) Pos() int    { return n.P }
func (n *Lit) Pos() int     { return n.P }
func (n *Param) Pos() int   { return n.P }
func (n *MapLit) Pos() int  { return n.P }
func (n *ListLit) Pos() int { return n.P }
func (n *SetLit) Pos() int  { return n.P }
func (n *Binary) Pos() int  { return n.P }
func (n *Not) Pos() int     { return n.P }
func (n *Between) Pos() int { return n.P }
func (n *In) Pos() int      { return n.P }
func (n *Is) Pos() int      { return n.P }
func (n *Call) Pos() int    { return n.P }

// Name returns the path's top-level name when the path is just that name.
func (n *Path) Name() (string, bool) {
	if len(n.Elems) == 1 && !n.Elems[0].IsIndex {
		return n.Elems[0].Name, true
	}
	return "", false
}

// Equal reports whether two paths are the same.
func (n *Path) Equal(o *Path) bool {
	if len(n.Elems) != len(o.Elems) {
		return false
	}
	for i := range n.Elems {
		if n.Elems[i] != o.Elems[i] {
			return false
		}
	}
	return true
}

// Conjuncts returns the terms of the top-level ANDs of n (n itself when it
// is not an AND); nil for nil.
func Conjuncts(n Node) []Node {
	if n == nil {
		return nil
	}
	if b, ok := n.(*Binary); ok && b.Op == "AND" {
		return append(Conjuncts(b.L), Conjuncts(b.R)...)
	}
	return []Node{n}
}

// And joins terms with AND; nil for none.
func And(terms []Node) Node {
	var out Node
	for _, t := range terms {
		if out == nil {
			out = t
		} else {
			out = &Binary{Op: "AND", L: out, R: t, P: t.Pos()}
		}
	}
	return out
}

// IsConst reports whether n is a value known before reading any item:
// literals, parameters and collections of them.
func IsConst(n Node) bool {
	switch n := n.(type) {
	case *Lit, *Param:
		return true
	case *MapLit:
		for _, v := range n.Vals {
			if !IsConst(v) {
				return false
			}
		}
		return true
	case *ListLit:
		return allConst(n.Elems)
	case *SetLit:
		return allConst(n.Elems)
	}
	return false
}

func allConst(ns []Node) bool {
	for _, v := range ns {
		if !IsConst(v) {
			return false
		}
	}
	return true
}

// Project builds a SELECT's result item from a stored item: each column
// is named by its path's last name, and holds what the path reaches from
// there, list indexes after that name kept as one-element lists (a.b.c is
// {c: ...}; a.b[1] is {b: [...]}). Paths that reach nothing are left out.
func Project(it attr.Item, cols []*Path) attr.Item {
	out := attr.Item{}
	for _, c := range cols {
		last := 0
		for i, e := range c.Elems {
			if !e.IsIndex {
				last = i
			}
		}
		v, ok := it[c.Elems[0].Name]
		for _, e := range c.Elems[1:] {
			if v, ok = step(v, ok, e); !ok {
				break
			}
		}
		if !ok {
			continue
		}
		for i := len(c.Elems) - 1; i > last; i-- {
			v = attr.List(v)
		}
		out[c.Elems[last].Name] = v
	}
	return out
}

// step follows one path element from v.
func step(v attr.Value, ok bool, e Elem) (attr.Value, bool) {
	switch {
	case !ok:
		return attr.Value{}, false
	case e.IsIndex && v.T == attr.L && e.Index < len(v.L):
		return v.L[e.Index], true
	case !e.IsIndex && v.T == attr.M:
		x, ok := v.M[e.Name]
		return x, ok
	}
	return attr.Value{}, false
}
