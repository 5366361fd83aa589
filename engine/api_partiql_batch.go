package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/partiql"
)

// PartiQL's calls of many statements: BatchExecuteStatement (each statement
// on its own, one result each) and ExecuteTransaction (all or none, through
// the transaction path of TransactWriteItems and TransactGetItems). One
// statement is api_partiql.go's.

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
