package expr

import (
	"sort"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// Projection is a parsed ProjectionExpression: the document paths to keep.
type Projection struct {
	paths []path
	root  *projNode
}

// projNode is a trie of projected paths.
type projNode struct {
	leaf  bool
	keys  map[string]*projNode
	idxs  map[int]*projNode
	order []int // sorted keys of idxs
}

func (n *projNode) child(e pathElem) *projNode {
	if e.idx >= 0 {
		if n.idxs == nil {
			n.idxs = map[int]*projNode{}
		}
		c := n.idxs[e.idx]
		if c == nil {
			c = &projNode{}
			n.idxs[e.idx] = c
			n.order = append(n.order, e.idx)
		}
		return c
	}
	if n.keys == nil {
		n.keys = map[string]*projNode{}
	}
	c := n.keys[e.name]
	if c == nil {
		c = &projNode{}
		n.keys[e.name] = c
	}
	return c
}

// ParseProjection parses a ProjectionExpression: document paths separated
// by commas. Overlapping paths (a and a.b) are rejected as DynamoDB does.
func ParseProjection(s string, p *Params) (*Projection, error) {
	if err := checkSize(kindProjection, s); err != nil {
		return nil, err
	}
	ps := newParser(kindProjection, s, p)
	var paths []path
	for ps.err == nil {
		paths = append(paths, ps.parsePath())
		if ps.tok.kind == tComma {
			ps.advance()
			continue
		}
		if ps.tok.kind != tEOF {
			ps.fail()
		}
		break
	}
	if ps.err == nil {
		ps.errs[ePaths] = checkPaths(kindProjection, paths)
	}
	if err := ps.result(); err != nil {
		return nil, err
	}
	proj := &Projection{paths: paths, root: &projNode{}}
	for _, pa := range paths {
		n := proj.root
		for _, e := range pa {
			n = n.child(e)
		}
		n.leaf = true
	}
	sortOrders(proj.root)
	return proj, nil
}

func sortOrders(n *projNode) {
	sort.Ints(n.order)
	for _, c := range n.keys {
		sortOrders(c)
	}
	for _, c := range n.idxs {
		sortOrders(c)
	}
}

// Apply returns a new item holding only the projected paths of item, as
// DynamoDB builds it: nested map keys keep their nesting, selected list
// elements are kept in index order (compacted), and paths that do not
// resolve are left out. The result shares nothing with item.
func (p *Projection) Apply(item attr.Item) attr.Item {
	if item == nil {
		return nil
	}
	out := attr.Item{}
	for name, c := range p.root.keys {
		v, ok := item[name]
		if !ok {
			continue
		}
		if pv, ok := c.project(v); ok {
			out[name] = pv
		}
	}
	return out
}

func (n *projNode) project(v attr.Value) (attr.Value, bool) {
	if n.leaf {
		return v.Clone(), true
	}
	switch {
	case v.T == attr.M && n.keys != nil:
		m := attr.Item{}
		for k, c := range n.keys {
			x, ok := v.M[k]
			if !ok {
				continue
			}
			if px, ok := c.project(x); ok {
				m[k] = px
			}
		}
		if len(m) == 0 {
			return attr.Value{}, false
		}
		return attr.Map(m), true
	case v.T == attr.L && n.idxs != nil:
		var l []attr.Value
		for _, i := range n.order {
			if i >= len(v.L) {
				break
			}
			if px, ok := n.idxs[i].project(v.L[i]); ok {
				l = append(l, px)
			}
		}
		if len(l) == 0 {
			return attr.Value{}, false
		}
		return attr.List(l...), true
	}
	return attr.Value{}, false
}

// TopLevel returns the top-level attribute names the projection reads, in
// the order first written.
func (p *Projection) TopLevel() []string {
	out := make([]string, 0, len(p.paths))
	seen := make(map[string]struct{}, len(p.paths))
	for _, pa := range p.paths {
		if _, ok := seen[pa[0].name]; !ok {
			seen[pa[0].name] = struct{}{}
			out = append(out, pa[0].name)
		}
	}
	return out
}

// NewProjection builds a projection of whole top-level attributes, as the
// legacy AttributesToGet parameter asks.
func NewProjection(names []string) *Projection {
	proj := &Projection{root: &projNode{}}
	for _, n := range names {
		pa := path{{name: n, idx: -1}}
		proj.paths = append(proj.paths, pa)
		proj.root.child(pa[0]).leaf = true
	}
	return proj
}
