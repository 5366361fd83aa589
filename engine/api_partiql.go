package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash/fnv"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
	"github.com/ttl-archiver/archiver/engine/internal/partiql"
)

// PartiQL: ExecuteStatement, BatchExecuteStatement and ExecuteTransaction.
//
// A statement is parsed by package partiql, and its WHERE, SET and REMOVE
// become the engine's expression types, so they are evaluated by the code
// that serves ConditionExpression, FilterExpression and UpdateExpression.
// A SELECT whose WHERE pins the partition key (= or IN, in a top-level
// AND) is one Query per key value, narrowed by one sort-key condition
// when there is one, otherwise a Scan; the rest of the WHERE is the
// filter. Limit counts the items read, across the partitions of an IN,
// and NextToken names the partition and the last key. Writes go through
// put, update and delete (and commitTx in transactions), the paths
// PutItem, UpdateItem, DeleteItem and TransactWriteItems take, so
// streams, TTL tracking and indexes see them alike. An INSERT is
// a put guarded by attribute_not_exists on the hash key
// (DuplicateItemException); an UPDATE needs the item (attribute_exists,
// else ConditionalCheckFailedException); the WHERE of a write must hold an
// equality on every key attribute, and its other terms are the write's
// condition.

const (
	maxBatchStatements = 25
	codeDuplicateItem  = "DuplicateItemException"
	msgDuplicateItem   = "Duplicate primary key exists in table"
	msgNeedKey         = "Where clause does not contain a mandatory equality on all key attributes"
)

// stmt is a parsed statement bound to its table and parameters.
type stmt struct {
	src    string
	params []attr.Value
	st     *partiql.Statement
	b      *partiql.Builder
	t      *table
}

// prepare parses a statement, checks its parameters and finds its table.
func (e *Engine) prepare(ctx context.Context, src *string, params []attr.Value) (*stmt, error) {
	if src == nil {
		return nil, nullErr("statement")
	}
	if params != nil && len(params) == 0 {
		return nil, awserr.Validation("1 validation error detected: Value '[]' at 'parameters' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	st, err := partiql.Parse(*src)
	if err != nil {
		return nil, err
	}
	if st.Params != len(params) {
		return nil, awserr.Validation("Number of parameters in request and statement don't match.")
	}
	t, err := e.lookup(ctx, st.Table)
	if err != nil {
		return nil, err
	}
	return &stmt{src: *src, params: params, st: st, b: partiql.NewBuilder(*src, params), t: t}, nil
}

type executeStatementRequest struct {
	Statement                           *string      `json:"Statement"`
	Parameters                          []attr.Value `json:"Parameters"`
	ConsistentRead                      bool         `json:"ConsistentRead"`
	NextToken                           *string      `json:"NextToken"`
	Limit                               *int         `json:"Limit"`
	ReturnConsumedCapacity              string       `json:"ReturnConsumedCapacity"`
	ReturnValuesOnConditionCheckFailure string       `json:"ReturnValuesOnConditionCheckFailure"`
}

// statementResponse is ExecuteStatement's answer.
type statementResponse struct {
	Items            []json.RawMessage
	NextToken        string
	LastEvaluatedKey attr.Item
	ConsumedCapacity *capacity
}

// MarshalJSON writes the items as they are stored or projected.
func (r statementResponse) MarshalJSON() ([]byte, error) {
	b := append([]byte(nil), `{"Items":[`...)
	for i, it := range r.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	b = append(b, ']')
	if r.NextToken != "" {
		tok, _ := json.Marshal(r.NextToken)
		b = append(append(b, `,"NextToken":`...), tok...)
	}
	if r.LastEvaluatedKey != nil {
		b = attr.AppendItemJSON(append(b, `,"LastEvaluatedKey":`...), r.LastEvaluatedKey)
	}
	if r.ConsumedCapacity != nil {
		c, err := json.Marshal(r.ConsumedCapacity)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"ConsumedCapacity":`...), c...)
	}
	return append(b, '}'), nil
}

func (e *Engine) opExecuteStatement(ctx context.Context, body []byte) (any, error) {
	var req executeStatementRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if err := checkRVCCF(req.ReturnValuesOnConditionCheckFailure); err != nil {
		return nil, err
	}
	if req.Limit != nil && *req.Limit < 1 {
		return nil, awserr.Validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *req.Limit)
	}
	s, err := e.prepare(ctx, req.Statement, req.Parameters)
	if err != nil {
		return nil, err
	}
	if s.st.Kind == partiql.Exists {
		return nil, awserr.Validation("EXISTS is only supported within ExecuteTransaction")
	}
	if s.st.IsRead() {
		limit := 0
		if req.Limit != nil {
			limit = *req.Limit
		}
		return s.query(req.ConsistentRead, limit, req.NextToken, req.ReturnConsumedCapacity)
	}
	if req.NextToken != nil || req.Limit != nil {
		return nil, awserr.Validation("NextToken and Limit are only supported for SELECT statements")
	}
	ret, size, err := s.write(req.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	resp := statementResponse{Items: []json.RawMessage{}, ConsumedCapacity: consumed(req.ReturnConsumedCapacity, s.t.name, writeUnits(size), true, nil)}
	if ret != nil {
		resp.Items = append(resp.Items, attr.AppendItemJSON(nil, ret))
	}
	return resp, nil
}

func checkRVCCF(v string) error {
	switch v {
	case "", "NONE", "ALL_OLD":
		return nil
	}
	return awserr.Validation("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", v)
}

// ---- SELECT ----

// keyTerms is what a WHERE says about the key of the table or index read.
type keyTerms struct {
	query   bool         // the partition key is pinned
	hashes  []attr.Value // its values, in order, duplicates dropped
	rangeOp string       // a sort-key condition that narrows each Query
	rangeV  []attr.Value
	// The terms the key condition enforces exactly, which the filter can
	// leave out.
	hashTerm, rangeTerm partiql.Node
}

// findKeyTerms looks at the top-level AND terms of where for the partition
// key (= or IN on constants) and one sort-key condition.
func (s *stmt) findKeyTerms(keys keyDef) (keyTerms, error) {
	var kt keyTerms
	for _, term := range partiql.Conjuncts(s.st.Where) {
		if !kt.query {
			vals, ok := hashValues(term, keys.Hash)
			if ok {
				kt.query, kt.hashTerm = true, term
				for _, v := range vals {
					if err := s.addHash(&kt, keys, v, len(vals) == 1 && isIn(term)); err != nil {
						return kt, err
					}
				}
				continue
			}
		}
		if keys.Range != "" && kt.rangeOp == "" {
			op, vals := rangeCondition(term, keys.Range)
			if op == "" {
				continue
			}
			rv, err := s.values(vals...)
			if err != nil {
				return kt, err
			}
			kt.rangeOp, kt.rangeV, kt.rangeTerm = op, rv, term
		}
	}
	for _, v := range kt.rangeV {
		if v.T != keys.RangeType || kt.rangeOp == "begins_with" && v.T == attr.N {
			kt.rangeOp, kt.rangeV, kt.rangeTerm = "", nil, nil // the filter alone decides
		}
	}
	if !kt.query {
		kt.rangeOp, kt.rangeV, kt.rangeTerm = "", nil, nil
	}
	return kt, nil
}

// hashValues reports whether term pins the partition key hash (hash = c
// or hash IN [c, ...]) and returns the constants.
func hashValues(term partiql.Node, hash string) ([]partiql.Node, bool) {
	switch n := term.(type) {
	case *partiql.Binary:
		if path, val, op := pathAndConst(n); path != nil && op == "=" && isName(path, hash) {
			return []partiql.Node{val}, true
		}
	case *partiql.In:
		if p, ok := n.X.(*partiql.Path); ok && !n.Not && isName(p, hash) && allConst(n.List) {
			return n.List, true
		}
	}
	return nil, false
}

func isIn(term partiql.Node) bool {
	_, ok := term.(*partiql.In)
	return ok
}

// rangeCondition returns the key-condition operator and constants of a
// term on the sort key rng ("" when it is not one).
func rangeCondition(term partiql.Node, rng string) (string, []partiql.Node) {
	switch n := term.(type) {
	case *partiql.Binary:
		if path, val, op := pathAndConst(n); path != nil && op != "<>" && isName(path, rng) {
			return op, []partiql.Node{val}
		}
	case *partiql.Between:
		if p, ok := n.X.(*partiql.Path); ok && !n.Not && isName(p, rng) && allConst([]partiql.Node{n.Lo, n.Hi}) {
			return "BETWEEN", []partiql.Node{n.Lo, n.Hi}
		}
	case *partiql.Call:
		if n.Name == "begins_with" && len(n.Args) == 2 && partiql.IsConst(n.Args[1]) {
			if p, ok := n.Args[0].(*partiql.Path); ok && isName(p, rng) {
				return "begins_with", n.Args[1:]
			}
		}
	}
	return "", nil
}

// filterTerms returns the WHERE without the terms the key condition
// enforces exactly, so that reading a partition decodes no item it need
// not.
func (kt *keyTerms) filterTerms(where partiql.Node) partiql.Node {
	var rest []partiql.Node
	for _, term := range partiql.Conjuncts(where) {
		if term != kt.hashTerm && term != kt.rangeTerm {
			rest = append(rest, term)
		}
	}
	return partiql.And(rest)
}

// addHash adds one partition-key value (with spread, a parameter holding a
// list adds its elements: IN ?); values of the wrong type match nothing
// and are dropped.
func (s *stmt) addHash(kt *keyTerms, keys keyDef, n partiql.Node, spread bool) error {
	if !partiql.IsConst(n) {
		return nil
	}
	v, err := s.b.Value(n)
	if err != nil {
		return err
	}
	vals := []attr.Value{v}
	if _, isParam := n.(*partiql.Param); spread && isParam && v.T == attr.L {
		vals = v.L
	}
	for _, v := range vals {
		if v.T != keys.HashType {
			continue
		}
		dup := false
		for _, h := range kt.hashes {
			dup = dup || attr.Equal(h, v)
		}
		if !dup {
			kt.hashes = append(kt.hashes, v)
		}
	}
	return nil
}

func allConst(ns []partiql.Node) bool {
	for _, n := range ns {
		if !partiql.IsConst(n) {
			return false
		}
	}
	return true
}

func (s *stmt) values(ns ...partiql.Node) ([]attr.Value, error) {
	out := make([]attr.Value, 0, len(ns))
	for _, n := range ns {
		v, err := s.b.Value(n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// pathAndConst splits a comparison into its path and constant sides,
// turning the operator around when the path is on the right.
func pathAndConst(n *partiql.Binary) (*partiql.Path, partiql.Node, string) {
	flip := map[string]string{"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
	if _, ok := flip[n.Op]; !ok {
		return nil, nil, ""
	}
	if p, ok := n.L.(*partiql.Path); ok && partiql.IsConst(n.R) {
		return p, n.R, n.Op
	}
	if p, ok := n.R.(*partiql.Path); ok && partiql.IsConst(n.L) {
		return p, n.L, flip[n.Op]
	}
	return nil, nil, ""
}

func isName(p *partiql.Path, name string) bool {
	n, ok := p.Name()
	return ok && n == name
}

// selectPlan is a validated SELECT: a readPlan without its key condition,
// and the partition values to Query in turn (none: a Scan).
type selectPlan struct {
	base readPlan
	kt   keyTerms
}

func (s *stmt) plan(consistent bool, rcc string) (*selectPlan, error) {
	t, st := s.t, s.st
	sp := &selectPlan{base: readPlan{t: t, forward: true, rcc: rcc, consist: consistent}}
	keys := t.key
	if st.Index != "" {
		if sp.base.ix = t.indexByName(st.Index); sp.base.ix == nil {
			return nil, awserr.Validation("The table does not have the specified index")
		}
		if sp.base.ix.global && consistent {
			return nil, awserr.Validation("Strongly consistent read is not supported on Global Secondary Indexes")
		}
		keys = sp.base.ix.key
		if err := unprojected(t, sp.base.ix, columnNames(st.Columns)); err != nil {
			return nil, err
		}
	}
	var err error
	if sp.kt, err = s.findKeyTerms(keys); err != nil {
		return nil, err
	}
	if st.Where != nil {
		// Built whole first, so that every term is checked, then without
		// what the key condition enforces.
		if sp.base.filter, err = s.b.Filter(st.Where); err != nil {
			return nil, err
		}
		if rest := sp.kt.filterTerms(st.Where); rest == nil {
			sp.base.filter = nil
		} else if sp.base.filter, err = s.b.Filter(rest); err != nil {
			return nil, err
		}
	}
	// Columns are applied to each item read (partiql.Project): PartiQL
	// names them by their last path element, which ProjectionExpression
	// does not.
	sp.base.sel = "ALL_ATTRIBUTES"
	if sp.base.ix != nil {
		sp.base.sel = "ALL_PROJECTED_ATTRIBUTES"
	}
	if st.OrderBy != nil {
		if !sp.kt.query || keys.Range == "" || !isName(st.OrderBy, keys.Range) {
			return nil, awserr.Validation("Order by is only supported on the sort key of a query that pins the partition key")
		}
		sp.base.forward = !st.Desc
	}
	return sp, nil
}

// columnNames returns the top-level name of each SELECT column, for the
// projection rule of a global index (unprojected).
func columnNames(cols []*partiql.Path) []string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Elems[0].Name
	}
	return names
}

// part returns the readPlan for the i-th partition value (or the Scan).
func (sp *selectPlan) part(i int) readPlan {
	pl := sp.base
	if sp.kt.query {
		keys := pl.t.key
		if pl.ix != nil {
			keys = pl.ix.key
		}
		kc := &expr.KeyCondition{HashName: keys.Hash, HashValue: sp.kt.hashes[i]}
		if sp.kt.rangeOp != "" {
			kc.RangeName, kc.RangeOp, kc.RangeValues = keys.Range, sp.kt.rangeOp, sp.kt.rangeV
		}
		pl.kc = kc
	}
	return pl
}

func (sp *selectPlan) parts() int {
	if sp.kt.query {
		return len(sp.kt.hashes)
	}
	return 1
}

// pageToken is the NextToken of a SELECT: the statement it belongs to,
// the partition being read and the last key returned.
type pageToken struct {
	Stmt uint64          `json:"s"`
	Part int             `json:"p"`
	Key  json.RawMessage `json:"k,omitempty"`
}

// hash identifies the statement and its parameters, which a NextToken
// must be used with.
func (s *stmt) hash() uint64 {
	h := fnv.New64a()
	h.Write([]byte(s.src))
	for _, p := range s.params {
		h.Write(p.AppendJSON(nil))
	}
	return h.Sum64()
}

func badToken() error { return awserr.Validation("Invalid NextToken") }

func (s *stmt) decodeToken(tok string, parts int) (int, attr.Item, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	var pt pageToken
	if err != nil || json.Unmarshal(raw, &pt) != nil || pt.Stmt != s.hash() || pt.Part < 0 || pt.Part >= parts {
		return 0, nil, badToken()
	}
	if len(pt.Key) == 0 {
		return pt.Part, nil, nil
	}
	key, err := attr.UnmarshalItemJSON(pt.Key)
	if err != nil {
		return 0, nil, badToken()
	}
	return pt.Part, key, nil
}

func (s *stmt) encodeToken(part int, key attr.Item) string {
	pt := pageToken{Stmt: s.hash(), Part: part}
	if key != nil {
		pt.Key = attr.AppendItemJSON(nil, key)
	}
	b, _ := json.Marshal(pt)
	return base64.RawURLEncoding.EncodeToString(b)
}

// query runs a SELECT page: Limit counts the items read (matching or
// not), as DynamoDB documents.
func (s *stmt) query(consistent bool, limit int, token *string, rcc string) (any, error) {
	sp, err := s.plan(consistent, rcc)
	if err != nil {
		return nil, err
	}
	first, startKey := 0, attr.Item(nil)
	if token != nil {
		if first, startKey, err = s.decodeToken(*token, sp.parts()); err != nil {
			return nil, err
		}
	}
	s.t.mu.RLock()
	defer s.t.mu.RUnlock()
	resp := statementResponse{Items: []json.RawMessage{}}
	units := 0.0
	for i := first; i < sp.parts(); i++ {
		pl := sp.part(i)
		pl.limit = limit
		if i == first && startKey != nil {
			if pl.start, err = pl.startKey(startKey); err != nil {
				return nil, badToken()
			}
		}
		out, err := pl.run()
		if err != nil {
			return nil, err
		}
		page := out.(readResponse)
		if err := s.project(page.Items); err != nil {
			return nil, err
		}
		resp.Items = append(resp.Items, page.Items...)
		if page.ConsumedCapacity != nil {
			units += page.ConsumedCapacity.CapacityUnits
		}
		if page.LastEvaluatedKey != nil {
			resp.NextToken, resp.LastEvaluatedKey = s.encodeToken(i, page.LastEvaluatedKey), page.LastEvaluatedKey
			break
		}
		if limit > 0 {
			limit -= page.ScannedCount
		}
	}
	resp.ConsumedCapacity = consumed(rcc, s.t.name, units, false, nil)
	return resp, nil
}

// project applies the SELECT's columns, if any, to encoded items in place.
func (s *stmt) project(items []json.RawMessage) error {
	if s.st.Columns == nil {
		return nil
	}
	for i, raw := range items {
		it, err := attr.UnmarshalItemJSON(raw)
		if err != nil {
			return err
		}
		items[i] = attr.AppendItemJSON(nil, partiql.Project(it, s.st.Columns))
	}
	return nil
}

// ---- writes ----

// whereKey splits a write's WHERE into the key it names (an equality with
// a constant on every key attribute) and its other terms.
func (s *stmt) whereKey() (attr.Item, []partiql.Node, error) {
	key := attr.Item{}
	var rest []partiql.Node
	for _, term := range partiql.Conjuncts(s.st.Where) {
		if b, ok := term.(*partiql.Binary); ok {
			if path, val, op := pathAndConst(b); path != nil && op == "=" {
				if name, ok := path.Name(); ok && s.t.key.has(name) {
					if _, dup := key[name]; !dup {
						v, err := s.b.Value(val)
						if err != nil {
							return nil, nil, err
						}
						key[name] = v
						continue
					}
				}
			}
		}
		rest = append(rest, term)
	}
	if _, ok := key[s.t.key.Hash]; !ok {
		return nil, nil, awserr.Validation(msgNeedKey)
	}
	if _, ok := key[s.t.key.Range]; s.t.key.Range != "" && !ok {
		return nil, nil, awserr.Validation(msgNeedKey)
	}
	return key, rest, nil
}

// write runs an INSERT, UPDATE or DELETE through the engine's write paths
// and returns what RETURNING asks for and the size charged.
func (s *stmt) write(rvccf string) (attr.Item, int, error) {
	switch s.st.Kind {
	case partiql.Insert:
		item, cond, err := s.insertItem()
		if err != nil {
			return nil, 0, err
		}
		_, size, err := s.t.put(item, cond, "", false)
		return nil, size, duplicate(err)
	case partiql.Update:
		key, upd, cond, err := s.updateParts()
		if err != nil {
			return nil, 0, err
		}
		res, err := s.t.update(key, upd, cond, rvccf)
		if err != nil {
			return nil, 0, err
		}
		return s.returned(upd, res.old, res.new), res.size, nil
	case partiql.Delete:
		key, cond, err := s.deleteParts()
		if err != nil {
			return nil, 0, err
		}
		old, size, err := s.t.delete(key, cond, rvccf, s.st.Returning != "")
		if err != nil {
			return nil, 0, err
		}
		return s.returned(nil, old, nil), size, nil
	}
	return nil, 0, awserr.Validation("Unsupported statement: %s", s.st.Kind)
}

// duplicate turns the failed guard of an INSERT into DynamoDB's error.
func duplicate(err error) error {
	var cf *condFailed
	if errors.As(err, &cf) {
		return awserr.New(codeDuplicateItem, msgDuplicateItem)
	}
	return err
}

// insertItem evaluates an INSERT's VALUE and its guard.
func (s *stmt) insertItem() (attr.Item, *expr.Condition, error) {
	v, err := s.b.Value(s.st.Value)
	if err != nil {
		return nil, nil, err
	}
	if v.T != attr.M {
		return nil, nil, awserr.Validation("Unsupported data type: the value of an INSERT must be a map, not %s", v.T)
	}
	if attr.ItemSize(v.M) > maxItemSize {
		return nil, nil, awserr.Validation("Item size has exceeded the maximum allowed size")
	}
	cond, err := s.b.Absent(s.t.key.Hash)
	return v.M, cond, err
}

func (s *stmt) updateParts() (attr.Item, *expr.Update, *expr.Condition, error) {
	key, rest, err := s.whereKey()
	if err != nil {
		return nil, nil, nil, err
	}
	upd, err := s.b.Update(s.st)
	if err != nil {
		return nil, nil, nil, err
	}
	cond, err := s.b.Condition(rest, s.t.key.Hash)
	return key, upd, cond, err
}

func (s *stmt) deleteParts() (attr.Item, *expr.Condition, error) {
	if r := s.st.Returning; r != "" && r != "ALL OLD" {
		return nil, nil, awserr.Validation("%s is not supported for DELETE; use RETURNING ALL OLD *", "RETURNING "+r+" *")
	}
	key, rest, err := s.whereKey()
	if err != nil {
		return nil, nil, err
	}
	cond, err := s.b.Condition(rest, "")
	return key, cond, err
}

// returned applies RETURNING to a write's old and new item.
func (s *stmt) returned(upd *expr.Update, old, new attr.Item) attr.Item {
	var out attr.Item
	switch s.st.Returning {
	case "ALL OLD":
		out = old
	case "ALL NEW":
		out = new
	case "MODIFIED OLD", "MODIFIED NEW":
		src := old
		if s.st.Returning == "MODIFIED NEW" {
			src = new
		}
		if upd != nil && src != nil {
			out = upd.UpdatedPaths().Apply(src)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
