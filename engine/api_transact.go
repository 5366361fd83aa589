package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

const (
	maxTransactItems = 100
	// maxTransactBytes is DynamoDB's limit on the aggregate size of the
	// items in one TransactWriteItems.
	maxTransactBytes = 4 << 20
)

type txOp struct {
	TableName                           string  `json:"TableName"`
	Key                                 jitem   `json:"Key"`
	Item                                jitem   `json:"Item"`
	ConditionExpression                 *string `json:"ConditionExpression"`
	UpdateExpression                    *string `json:"UpdateExpression"`
	ProjectionExpression                *string `json:"ProjectionExpression"`
	ReturnValuesOnConditionCheckFailure string  `json:"ReturnValuesOnConditionCheckFailure"`
	exprFields
}

// txAction is one validated TransactWriteItems action.
type txAction struct {
	kind  string // ConditionCheck, Put, Delete, Update
	op    *txOp
	t     *table
	cond  *expr.Condition
	upd   *expr.Update
	item  attr.Item // Put
	key   attr.Item // the others
	skey  []byte
	size  int
	rvccf string
}

// txWriteItem is one member of TransactWriteItems' TransactItems.
type txWriteItem struct {
	ConditionCheck *txOp `json:"ConditionCheck"`
	Put            *txOp `json:"Put"`
	Delete         *txOp `json:"Delete"`
	Update         *txOp `json:"Update"`
}

type txWriteRequest struct {
	TransactItems               []txWriteItem `json:"TransactItems"`
	ReturnConsumedCapacity      string        `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics string        `json:"ReturnItemCollectionMetrics"`
	ClientRequestToken          *string       `json:"ClientRequestToken"`
}

func (r *txWriteRequest) validate() error {
	if err := checkRCC(r.ReturnConsumedCapacity); err != nil {
		return err
	}
	if err := checkRICM(r.ReturnItemCollectionMetrics); err != nil {
		return err
	}
	if r.TransactItems == nil {
		return nullErr("transactItems")
	}
	// apimodel.Check has held TransactItems to 1..100 members and
	// ClientRequestToken to 1..36 characters.
	return nil
}

func (e *Engine) opTransactWriteItems(ctx context.Context, body []byte) (any, error) {
	var req txWriteRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := req.validate(); err != nil {
		return nil, err
	}
	actions := make([]*txAction, 0, len(req.TransactItems))
	tables := map[string]*table{}
	for _, ti := range req.TransactItems {
		a, err := e.txAction(ctx, ti, tables)
		if err != nil {
			return nil, err
		}
		actions = append(actions, a)
	}
	if req.ClientRequestToken == nil {
		res, err := commitTx(actions, tables, req.ReturnItemCollectionMetrics == "SIZE")
		if err != nil {
			return nil, err
		}
		return res.response(req.ReturnConsumedCapacity, req.ReturnItemCollectionMetrics, false), nil
	}
	token := *req.ClientRequestToken
	digest, err := txDigest(req.TransactItems)
	if err != nil {
		return nil, err
	}
	prev, err := e.txTokens.begin(token, digest, e.clock.Now())
	if err != nil {
		return nil, err
	}
	if prev != nil {
		return prev.response(req.ReturnConsumedCapacity, req.ReturnItemCollectionMetrics, true), nil
	}
	committed := false
	defer func() {
		if !committed {
			e.txTokens.abort(token)
		}
	}()
	// A replay may ask for the metrics the first call did not: keep them.
	res, err := commitTx(actions, tables, true)
	if err != nil {
		return nil, err
	}
	e.txTokens.finish(token, res, e.clock.Now())
	committed = true
	return res.response(req.ReturnConsumedCapacity, req.ReturnItemCollectionMetrics, false), nil
}

// txAction validates one TransactItems member and resolves its table
// (through tables, which caches lookups).
func (e *Engine) txAction(ctx context.Context, ti txWriteItem, tables map[string]*table) (*txAction, error) {
	a := &txAction{}
	n := 0
	for kind, o := range map[string]*txOp{"ConditionCheck": ti.ConditionCheck, "Put": ti.Put, "Delete": ti.Delete, "Update": ti.Update} {
		if o != nil {
			a.kind, a.op = kind, o
			n++
		}
	}
	if n != 1 {
		return nil, awserr.Validation("TransactItems can only contain one of Check, Put, Update or Delete")
	}
	o := a.op
	if err := checkTableRef(o.TableName, "transactItems.member."+a.kind+".tableName"); err != nil {
		return nil, err
	}
	switch o.ReturnValuesOnConditionCheckFailure {
	case "", "NONE", "ALL_OLD":
		a.rvccf = o.ReturnValuesOnConditionCheckFailure
	default:
		return nil, awserr.Validation("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", o.ReturnValuesOnConditionCheckFailure)
	}
	if err := a.parseExpressions(); err != nil {
		return nil, err
	}
	// Keyed by the table's own name: a name and an ARN of one table must
	// not lock it twice.
	t, err := e.itemTable(ctx, o.TableName)
	if err != nil {
		return nil, err
	}
	tables[t.name] = t
	a.t = t
	switch {
	case a.kind == "Put" && o.Item == nil:
		return nil, nullErr("transactItems.member.put.item")
	case a.kind == "Put":
		a.item = attr.Item(o.Item)
		a.size = attr.ItemSize(a.item)
		if a.size > maxItemSize {
			return nil, awserr.Validation("Item size has exceeded the maximum allowed size")
		}
	case o.Key == nil:
		return nil, nullErr("transactItems.member.key")
	default:
		a.key = attr.Item(o.Key)
	}
	return a, nil
}

// parseExpressions parses the action's condition and update expressions.
func (a *txAction) parseExpressions() error {
	o := a.op
	if a.kind == "Update" && (o.UpdateExpression == nil || *o.UpdateExpression == "") {
		return nullErr("transactItems.member.update.updateExpression")
	}
	if a.kind == "ConditionCheck" && o.ConditionExpression == nil {
		return nullErr("transactItems.member.conditionCheck.conditionExpression")
	}
	exprs := []expression{{"ConditionExpression", o.ConditionExpression}}
	if a.kind == "Update" {
		exprs = []expression{{"UpdateExpression", o.UpdateExpression}, exprs[0]}
	}
	p, err := o.params(exprs...)
	if err != nil {
		return err
	}
	if a.kind == "Update" {
		if a.upd, err = expr.ParseUpdate(*o.UpdateExpression, p); err != nil {
			return err
		}
	}
	if a.cond, err = parseCond(o.ConditionExpression, p, "ConditionExpression"); err != nil {
		return err
	}
	return p.CheckUnused()
}

// lockTables write-locks (or read-locks) every table, in name order, and
// returns the names in that order and the release.
func lockTables(tables map[string]*table, write bool) ([]string, func()) {
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if write {
			tables[n].mu.Lock()
		} else {
			tables[n].mu.RLock()
		}
	}
	return names, func() {
		for _, n := range names {
			if write {
				tables[n].mu.Unlock()
			} else {
				tables[n].mu.RUnlock()
			}
		}
	}
}

// txTargets is the set of items a transaction names; a second operation
// on one item is refused, in TransactWriteItems and TransactGetItems alike.
type txTargets map[string]bool

func (s txTargets) add(t *table, skey []byte) error {
	id := t.name + "\x00" + string(skey)
	if s[id] {
		return awserr.Validation("Transaction request cannot include multiple operations on one item")
	}
	s[id] = true
	return nil
}

// commitTx runs a validated transaction under the write locks of all its
// tables: it checks every condition (and dry-runs every update) before
// changing anything, then applies every action. With icm it also sizes
// the item collections written on tables with LSIs.
func commitTx(actions []*txAction, tables map[string]*table, icm bool) (*txResult, error) {
	names, unlock := lockTables(tables, true)
	defer unlock()
	targets := txTargets{}
	for _, a := range actions {
		var err error
		if a.kind == "Put" {
			if err = a.t.checkItem(a.item); err != nil {
				return nil, err
			}
			a.skey = a.t.key.encode(nil, a.item)
		} else if a.skey, err = a.t.keyOf(a.key); err != nil {
			return nil, err
		}
		if err := targets.add(a.t, a.skey); err != nil {
			return nil, err
		}
	}
	reasons, total, err := dryRunTx(actions)
	if err != nil {
		return nil, err
	}
	if total > maxTransactBytes {
		return nil, awserr.Validation("Collection size of items exceeded, which can also be caused by the aggregate size of the items in the transaction exceeding the 4MB limit")
	}
	if reasons != nil {
		return nil, &txCanceled{reasons: reasons}
	}
	res, err := applyTx(actions, names, tables)
	if err != nil || !icm {
		return res, err
	}
	return res, res.collectionMetricsLocked(actions)
}

// dryRunTx evaluates every action against the current items (locks held)
// and returns the cancellation reasons (nil when all pass) and the
// aggregate size of the transaction's items: each Put's and Update's new
// item, each Delete's and ConditionCheck's stored item.
func dryRunTx(actions []*txAction) ([]cancelReason, int, error) {
	reasons := make([]cancelReason, len(actions))
	failed, total := false, 0
	for i, a := range actions {
		reasons[i].Code = "None"
		var old attr.Item
		if ent := a.t.items.Get(a.skey); ent != nil {
			var err error
			if old, err = decodeStored(ent); err != nil {
				return nil, 0, err
			}
			if a.kind == "Delete" || a.kind == "ConditionCheck" {
				a.size = int(ent.size)
			}
		}
		if err := checkCond(a.cond, old, a.rvccf); err != nil {
			var cf *condFailed
			if !errors.As(err, &cf) {
				return nil, 0, err
			}
			reasons[i] = cancelReason{Code: "ConditionalCheckFailed", Message: "The conditional request failed", Item: cf.item}
			failed = true
			continue
		}
		if a.kind == "Update" {
			var err error
			if a.size, err = a.dryRunUpdate(old); err != nil {
				var ae *awserr.Error
				if !errors.As(err, &ae) || ae.Code != awserr.CodeValidation {
					return nil, 0, err
				}
				reasons[i] = cancelReason{Code: "ValidationError", Message: ae.Message}
				failed = true
				continue
			}
		}
		total += a.size
	}
	if !failed {
		reasons = nil
	}
	return reasons, total, nil
}

// dryRunUpdate applies an Update action to a copy of old (nil when the
// item is missing) and returns the new item's size, or the validation
// error the update would fail with.
func (a *txAction) dryRunUpdate(old attr.Item) (int, error) {
	base := old
	if base == nil {
		base = attr.CloneItem(a.key)
	}
	ni, touched, err := a.upd.Apply(base)
	if err != nil {
		return 0, err
	}
	for _, n := range touched {
		if a.t.key.has(n) {
			return 0, awserr.Validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", n)
		}
	}
	size := attr.ItemSize(ni)
	if size > maxItemSize {
		return 0, awserr.Validation("Item size to update has exceeded the maximum allowed size")
	}
	return size, a.t.checkIndexKeys(ni)
}

// txResult is what a committed TransactWriteItems answers, kept with its
// ClientRequestToken for replays.
type txResult struct {
	names      []string           // tables, in name order
	writeUnits map[string]float64 // per table: what the call consumed
	readUnits  map[string]float64 // per table: what a replay consumes
	icm        map[string][]*itemCollMetrics
}

// applyTx applies every action (locks held, conditions checked) all or
// none: the actions' writes are collected, logged as one entry with their
// stream records, and only then applied in memory (txWrites); a full disk
// refuses the entry, and so the whole transaction. It charges each table
// two write units per item (a transactional write) on the larger of its
// old and new sizes; a replay is charged two consistent read units per
// item on the same size.
func applyTx(actions []*txAction, names []string, tables map[string]*table) (*txResult, error) {
	w := &txWrites{}
	for _, t := range tables {
		w.p = t.p
		t.tx = w
	}
	defer func() {
		for _, t := range tables {
			t.tx = nil
		}
	}()
	res := &txResult{names: names, writeUnits: map[string]float64{}, readUnits: map[string]float64{}}
	for _, a := range actions {
		var err error
		size := a.size
		switch a.kind {
		case "Put":
			_, size, err = a.t.putLocked(a.item, a.size, nil, "", false)
		case "Delete":
			_, size, err = a.t.deleteLocked(a.key, nil, "", false)
		case "Update":
			var r updateResult
			r, err = a.t.updateLocked(a.key, a.upd, nil, "")
			size = r.size
		}
		if err != nil {
			return nil, err
		}
		res.writeUnits[a.t.name] += 2 * writeUnits(size)
		res.readUnits[a.t.name] += 2 * readUnits(size, true)
	}
	if err := w.commit(); err != nil {
		return nil, err
	}
	return res, nil
}

// txWrites collects a transaction's writes while its actions run
// (table.writeLocked), so that commit can log them as one entry before
// any is applied.
type txWrites struct {
	p       *persister // nil without a data directory
	writes  []txWrite
	changes []stream.Pending // the writes' stream records
}

// txWrite is one collected write: writeLocked's arguments, and the index
// in changes of its stream record (-1: none).
type txWrite struct {
	t       *table
	key     []byte
	old, ne *entry
	oldItem attr.Item
	newItem attr.Item
	rec     int
	rw      *replWrite // a replica's write (nil otherwise)
}

// add collects one write and its stream record, if it makes one (the
// rule of writeLocked). t.mu is held for writing.
func (w *txWrites) add(t *table, key []byte, old *entry, oldItem attr.Item, ne *entry, newItem attr.Item, service bool) {
	wr := txWrite{t: t, key: key, old: old, ne: ne, oldItem: oldItem, newItem: newItem, rec: -1}
	if t.repl != nil {
		wr.rw = t.repl.prepare(t, key, ne)
	}
	if t.stream != nil && changes(old, oldItem, ne, newItem) {
		wr.rec = len(w.changes)
		w.changes = append(w.changes, stream.Pending{Stream: t.stream, Change: t.recordOf(old, oldItem, ne, newItem, service)})
	}
	w.writes = append(w.writes, wr)
}

// commit makes the collected writes and their stream records one log
// entry (with a data directory), under the locks of every stream
// involved, then adds the records and applies the writes in memory:
// a crash keeps the whole transaction or none of it, and nothing is
// visible before it is logged. When the log refuses the entry (a full
// disk), commit returns the refusal and nothing has changed: no item, no
// record, no sequence number taken. The tables' write locks are held.
func (w *txWrites) commit() error {
	if len(w.writes) == 0 {
		return nil
	}
	var logTx func([]*stream.Event) error
	if w.p != nil {
		logTx = func(evs []*stream.Event) error { return w.p.logTx(w.writes, evs) }
	}
	if err := stream.AppendAll(w.changes, logTx); err != nil {
		return err
	}
	for _, wr := range w.writes {
		wr.t.applyLocked(wr.key, wr.old, wr.oldItem, wr.ne, wr.newItem)
		if wr.rw != nil {
			wr.t.repl.commit(wr.rw)
		}
	}
	return nil
}

// collectionMetricsLocked sizes the item collections the actions wrote on
// tables with LSIs (ConditionChecks write nothing). Locks are held.
func (r *txResult) collectionMetricsLocked(actions []*txAction) error {
	colls := map[*table]*collectionSet{}
	var order []*table
	for _, a := range actions {
		if a.kind == "ConditionCheck" || len(a.t.lsis) == 0 {
			continue
		}
		s := colls[a.t]
		if s == nil {
			s = &collectionSet{}
			colls[a.t] = s
			order = append(order, a.t)
		}
		if a.kind == "Put" {
			s.add(a.t, a.item)
		} else {
			s.add(a.t, a.key)
		}
	}
	for _, t := range order {
		m, err := colls[t].metricsLocked(t)
		if err != nil {
			return err
		}
		if r.icm == nil {
			r.icm = map[string][]*itemCollMetrics{}
		}
		r.icm[t.name] = m
	}
	return nil
}

// response renders the result for a call with these ReturnConsumedCapacity
// and ReturnItemCollectionMetrics; a replay reports read units.
func (r *txResult) response(rcc, ricm string, replay bool) map[string]any {
	resp := map[string]any{}
	if rcc == "TOTAL" || rcc == "INDEXES" {
		units := r.writeUnits
		if replay {
			units = r.readUnits
		}
		cc := make([]*capacity, 0, len(r.names))
		for _, n := range r.names {
			cc = append(cc, consumed(rcc, n, units[n], !replay, nil))
		}
		resp["ConsumedCapacity"] = cc
	}
	if ricm == "SIZE" && len(r.icm) > 0 {
		resp["ItemCollectionMetrics"] = r.icm
	}
	return resp
}

func (e *Engine) opTransactGetItems(ctx context.Context, body []byte) (any, error) {
	var req struct {
		TransactItems []struct {
			Get *txOp `json:"Get"`
		} `json:"TransactItems"`
		ReturnConsumedCapacity string `json:"ReturnConsumedCapacity"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if len(req.TransactItems) == 0 || len(req.TransactItems) > maxTransactItems {
		return nil, awserr.Validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100 and greater than or equal to 1")
	}
	gets := make([]txGet, 0, len(req.TransactItems))
	tables := map[string]*table{}
	for _, ti := range req.TransactItems {
		o := ti.Get
		if o == nil {
			return nil, nullErr("transactItems.member.get")
		}
		if err := checkTableRef(o.TableName, "transactItems.member.get.tableName"); err != nil {
			return nil, err
		}
		if o.Key == nil {
			return nil, nullErr("transactItems.member.get.key")
		}
		p, err := o.params(expression{"ProjectionExpression", o.ProjectionExpression})
		if err != nil {
			return nil, err
		}
		proj, err := parseProjection(o.ProjectionExpression, nil, p)
		if err != nil {
			return nil, err
		}
		if err := p.CheckUnused(); err != nil {
			return nil, err
		}
		t, err := e.itemTable(ctx, o.TableName)
		if err != nil {
			return nil, err
		}
		tables[t.name] = t
		gets = append(gets, txGet{t: t, key: attr.Item(o.Key), proj: proj})
	}
	_, unlock := lockTables(tables, false)
	defer unlock()
	keys, err := txGetKeys(gets)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]json.RawMessage, len(gets))
	for i, g := range gets {
		out[i] = map[string]json.RawMessage{}
		ent := g.t.items.Get(keys[i])
		if ent == nil {
			continue
		}
		if g.proj == nil {
			out[i]["Item"] = ent.raw()
			continue
		}
		it, err := decodeStored(ent)
		if err != nil {
			return nil, err
		}
		out[i]["Item"] = attr.AppendItemJSON(nil, g.proj.apply(it))
	}
	return map[string]any{"Responses": out}, nil
}

// keyMismatch is keyOf's message for a key that does not match the schema.
const keyMismatch = "The provided key element does not match the schema"

// txGet is one validated Get of a TransactGetItems.
type txGet struct {
	t    *table
	key  attr.Item
	proj *projection
}

// txGetKeys returns the storage keys of gets (their tables read-locked).
// As in DynamoDB, a key that does not match its table's schema (a key
// attribute missing, of the wrong type, or one too many) cancels the
// transaction with a ValidationError reason in that Get's place, None in
// the others'; any other bad key (an empty key value) and one item named
// twice are refused outright.
func txGetKeys(gets []txGet) ([][]byte, error) {
	keys := make([][]byte, len(gets))
	reasons := make([]cancelReason, len(gets))
	failed := false
	targets := txTargets{}
	for i, g := range gets {
		reasons[i].Code = "None"
		sk, err := g.t.keyOf(g.key)
		var ae *awserr.Error
		switch {
		case errors.As(err, &ae) && ae.Message == keyMismatch:
			reasons[i] = cancelReason{Code: "ValidationError", Message: ae.Message}
			failed = true
			continue
		case err != nil:
			return nil, err
		}
		if err := targets.add(g.t, sk); err != nil {
			return nil, err
		}
		keys[i] = sk
	}
	if failed {
		return nil, &txCanceled{reasons: reasons}
	}
	return keys, nil
}
