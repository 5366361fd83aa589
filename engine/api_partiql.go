package engine

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

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

// ---- BatchExecuteStatement ----

type batchStatement struct {
	Statement                           *string      `json:"Statement"`
	Parameters                          []attr.Value `json:"Parameters"`
	ConsistentRead                      bool         `json:"ConsistentRead"`
	ReturnValuesOnConditionCheckFailure string       `json:"ReturnValuesOnConditionCheckFailure"`
}

type batchError struct {
	Code    string    `json:"Code"`
	Message string    `json:"Message"`
	Item    attr.Item `json:"Item,omitempty"`
}

type batchResponse struct {
	TableName string      `json:"TableName,omitempty"`
	Item      attr.Item   `json:"Item,omitempty"`
	Error     *batchError `json:"Error,omitempty"`
}

func (e *Engine) opBatchExecuteStatement(ctx context.Context, body []byte) (any, error) {
	var req struct {
		Statements             []batchStatement `json:"Statements"`
		ReturnConsumedCapacity string           `json:"ReturnConsumedCapacity"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if req.Statements == nil {
		return nil, nullErr("statements")
	}
	if len(req.Statements) == 0 || len(req.Statements) > maxBatchStatements {
		return nil, awserr.Validation("1 validation error detected: Value at 'statements' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", maxBatchStatements)
	}
	stmts := make([]*stmt, len(req.Statements))
	errs := make([]error, len(req.Statements))
	reads, writes := 0, 0
	for i, bs := range req.Statements {
		if err := checkRVCCF(bs.ReturnValuesOnConditionCheckFailure); err != nil {
			return nil, err
		}
		stmts[i], errs[i] = e.prepare(ctx, bs.Statement, bs.Parameters)
		switch {
		case errs[i] != nil:
		case stmts[i].st.IsRead():
			reads++
		default:
			writes++
		}
	}
	if reads > 0 && writes > 0 {
		return nil, awserr.Validation("Unsupported operation: A batch must contain either all read statements or all write statements")
	}
	out := make([]batchResponse, len(stmts))
	for i, s := range stmts {
		if s != nil {
			out[i].TableName = s.t.name
		}
		err := errs[i]
		if err == nil {
			out[i].Item, err = s.batchOne(req.Statements[i])
		}
		if err != nil {
			be, ferr := batchErrorOf(err)
			if ferr != nil {
				return nil, ferr
			}
			out[i].Error = be
		}
	}
	return map[string]any{"Responses": out}, nil
}

// batchOne runs one statement of a batch: a read of one item by its full
// key, or a write.
func (s *stmt) batchOne(bs batchStatement) (attr.Item, error) {
	if !s.st.IsRead() {
		if s.st.Kind == partiql.Exists {
			return nil, awserr.Validation("EXISTS is only supported within ExecuteTransaction")
		}
		_, _, err := s.write(bs.ReturnValuesOnConditionCheckFailure)
		return nil, err
	}
	key, err := s.getKey("Select statements within BatchExecuteStatement must specify the primary key in the where clause.")
	if err != nil {
		return nil, err
	}
	s.t.mu.RLock()
	defer s.t.mu.RUnlock()
	return s.getLocked(key)
}

// getKey checks that a SELECT reads one item by its full key and nothing
// else, as batches and transactions require, and returns the key.
func (s *stmt) getKey(msg string) (attr.Item, error) {
	if s.st.Index != "" || s.st.Where == nil || s.st.OrderBy != nil {
		return nil, awserr.Validation("%s", msg)
	}
	key, rest, err := s.whereKey()
	if err != nil {
		var ae *awserr.Error
		if errors.As(err, &ae) && ae.Message == msgNeedKey {
			return nil, awserr.Validation("%s", msg)
		}
		return nil, err
	}
	if len(rest) > 0 {
		return nil, awserr.Validation("%s", msg)
	}
	return key, nil
}

// getLocked reads one item by key with the statement's projection; nil
// when absent. t.mu is held.
func (s *stmt) getLocked(key attr.Item) (attr.Item, error) {
	sk, err := s.t.keyOf(key)
	if err != nil {
		return nil, err
	}
	ent := s.t.items.Get(sk)
	if ent == nil {
		return nil, nil
	}
	it, err := decodeStored(ent)
	if err != nil {
		return nil, err
	}
	if s.st.Columns != nil {
		it = partiql.Project(it, s.st.Columns)
	}
	return it, nil
}

// batchErrorOf turns a statement's failure into its Error entry; errors
// that are not the client's are returned as they are.
func batchErrorOf(err error) (*batchError, error) {
	var cf *condFailed
	if errors.As(err, &cf) {
		return &batchError{Code: "ConditionalCheckFailed", Message: "The conditional request failed", Item: cf.item}, nil
	}
	var ae *awserr.Error
	if !errors.As(err, &ae) {
		return nil, err
	}
	code := strings.TrimSuffix(ae.Code, "Exception")
	if code == "Validation" {
		code = "ValidationError"
	}
	return &batchError{Code: code, Message: ae.Message}, nil
}

// ---- ExecuteTransaction ----

// txStatementRequest is one member of TransactStatements.
type txStatementRequest struct {
	Statement                           *string      `json:"Statement"`
	Parameters                          []attr.Value `json:"Parameters"`
	ReturnValuesOnConditionCheckFailure string       `json:"ReturnValuesOnConditionCheckFailure"`
}

func (e *Engine) opExecuteTransaction(ctx context.Context, body []byte) (any, error) {
	var req struct {
		TransactStatements     []txStatementRequest `json:"TransactStatements"`
		ClientRequestToken     *string              `json:"ClientRequestToken"`
		ReturnConsumedCapacity string               `json:"ReturnConsumedCapacity"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if req.TransactStatements == nil {
		return nil, nullErr("transactStatements")
	}
	if n := len(req.TransactStatements); n == 0 || n > maxTransactItems {
		return nil, awserr.Validation("1 validation error detected: Value at 'transactStatements' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", maxTransactItems)
	}
	if err := checkClientRequestToken(req.ClientRequestToken); err != nil {
		return nil, err
	}
	stmts := make([]*stmt, len(req.TransactStatements))
	reads := 0
	for i, ts := range req.TransactStatements {
		if err := checkRVCCF(ts.ReturnValuesOnConditionCheckFailure); err != nil {
			return nil, err
		}
		s, err := e.prepare(ctx, ts.Statement, ts.Parameters)
		if err != nil {
			return nil, err
		}
		stmts[i] = s
		if s.st.IsRead() {
			reads++
		}
	}
	switch reads {
	case 0:
		return e.transactWrite(stmts, req.TransactStatements, req.ClientRequestToken, req.ReturnConsumedCapacity)
	case len(stmts):
		return e.transactRead(stmts)
	}
	return nil, awserr.Validation("Unsupported operation: A transaction must contain either all read statements or all write statements")
}

func txValidation(i int, msg string) error {
	return awserr.Validation("Validation failed in TransactStatements[%d]: %s", i, msg)
}

func (e *Engine) transactRead(stmts []*stmt) (any, error) {
	keys := make([]attr.Item, len(stmts))
	tables := map[string]*table{}
	for i, s := range stmts {
		key, err := s.getKey("")
		if err != nil {
			var ae *awserr.Error
			if errors.As(err, &ae) && ae.Message == "" {
				return nil, txValidation(i, "Select statements within ExecuteTransaction must specify the primary key in the where clause.")
			}
			return nil, err
		}
		keys[i] = key
		tables[s.t.name] = s.t
	}
	_, unlock := lockTables(tables, false)
	defer unlock()
	out := make([]map[string]attr.Item, len(stmts))
	for i, s := range stmts {
		it, err := s.getLocked(keys[i])
		if err != nil {
			return nil, err
		}
		out[i] = map[string]attr.Item{}
		if it != nil {
			out[i]["Item"] = it
		}
	}
	return map[string]any{"Responses": out}, nil
}

// txAction turns one write of a transaction into the action
// TransactWriteItems would run for it: INSERT is a Put guarded by
// attribute_not_exists, EXISTS a ConditionCheck.
func (s *stmt) txAction(i int, rvccf string) (*txAction, error) {
	a := &txAction{t: s.t, rvccf: rvccf}
	var err error
	switch s.st.Kind {
	case partiql.Insert:
		a.kind = "Put"
		if a.item, a.cond, err = s.insertItem(); err == nil {
			a.size = attr.ItemSize(a.item)
		}
	case partiql.Update:
		a.kind = "Update"
		a.key, a.upd, a.cond, err = s.updateParts()
	case partiql.Delete:
		a.kind = "Delete"
		a.key, a.cond, err = s.deleteParts()
	case partiql.Exists:
		a.kind = "ConditionCheck"
		var rest []partiql.Node
		if s.st.Index != "" || s.st.Where == nil || s.st.Columns != nil {
			return nil, txValidation(i, "EXISTS() must contain a single item read with additional condition")
		}
		if a.key, rest, err = s.whereKey(); err == nil {
			if len(rest) == 0 {
				return nil, txValidation(i, "EXISTS() must contain a single item read with additional condition")
			}
			a.cond, err = s.b.Condition(rest, s.t.key.Hash)
		}
	}
	if err == nil && s.st.Returning != "" {
		err = awserr.Validation("RETURNING is not supported within ExecuteTransaction")
	}
	return a, err
}

// transactWrite commits the writes all or none through commitTx, the
// code TransactWriteItems runs, with its ClientRequestToken replays. A
// failed INSERT guard is reported as DuplicateItem.
func (e *Engine) transactWrite(stmts []*stmt, reqs []txStatementRequest, token *string, rcc string) (any, error) {
	actions := make([]*txAction, len(stmts))
	tables := map[string]*table{}
	for i, s := range stmts {
		a, err := s.txAction(i, reqs[i].ReturnValuesOnConditionCheckFailure)
		if err != nil {
			return nil, err
		}
		actions[i] = a
		tables[s.t.name] = s.t
	}
	commit := func() (*txResult, error) {
		res, err := commitTx(actions, tables, false)
		var tc *txCanceled
		if errors.As(err, &tc) {
			for i, r := range tc.reasons {
				if stmts[i].st.Kind == partiql.Insert && r.Code == "ConditionalCheckFailed" {
					tc.reasons[i] = cancelReason{Code: "DuplicateItem", Message: msgDuplicateItem}
				}
			}
		}
		return res, err
	}
	answer := func(res *txResult, replay bool) any {
		resp := res.response(rcc, "", replay)
		resp["Responses"] = []any{}
		return resp
	}
	if token == nil {
		res, err := commit()
		if err != nil {
			return nil, err
		}
		return answer(res, false), nil
	}
	// Statements' tokens live apart from TransactWriteItems' ones.
	key := "PartiQL\x00" + *token
	prev, err := e.txTokens.begin(key, statementsDigest(reqs), e.clock.Now())
	if err != nil {
		return nil, err
	}
	if prev != nil {
		return answer(prev, true), nil
	}
	res, err := commit()
	if err != nil {
		e.txTokens.abort(key)
		return nil, err
	}
	e.txTokens.finish(key, res, e.clock.Now())
	return answer(res, false), nil
}

// statementsDigest identifies a transaction's statements and parameters
// for ClientRequestToken replays; parameters are compared canonically.
func statementsDigest(reqs []txStatementRequest) [sha256.Size]byte {
	h := sha256.New()
	for _, r := range reqs {
		fmt.Fprintf(h, "%d:%s;%s;", len(*r.Statement), *r.Statement, r.ReturnValuesOnConditionCheckFailure)
		for _, p := range r.Parameters {
			h.Write(p.AppendJSON(nil))
		}
		h.Write([]byte{0})
	}
	var d [sha256.Size]byte
	copy(d[:], h.Sum(nil))
	return d
}
