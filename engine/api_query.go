package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
)

// pageCap is DynamoDB's 1 MB limit on the data a Query or Scan reads per
// page.
const pageCap = 1 << 20

type readRequest struct {
	TableName              string   `json:"TableName"`
	IndexName              *string  `json:"IndexName"`
	Limit                  *int     `json:"Limit"`
	ExclusiveStartKey      jitem    `json:"ExclusiveStartKey"`
	Select                 string   `json:"Select"`
	ConsistentRead         bool     `json:"ConsistentRead"`
	FilterExpression       *string  `json:"FilterExpression"`
	ProjectionExpression   *string  `json:"ProjectionExpression"`
	AttributesToGet        []string `json:"AttributesToGet"`
	ReturnConsumedCapacity string   `json:"ReturnConsumedCapacity"`
	exprFields
	legacy

	// Query
	KeyConditionExpression *string `json:"KeyConditionExpression"`
	ScanIndexForward       *bool   `json:"ScanIndexForward"`
	// Scan
	Segment       *int `json:"Segment"`
	TotalSegments *int `json:"TotalSegments"`
}

// readPlan is a validated Query or Scan.
type readPlan struct {
	t       *table
	ix      *index // nil for the table
	kc      *expr.KeyCondition
	filter  *expr.Condition
	proj    *projection
	sel     string
	limit   int
	forward bool
	start   []byte // storage key to start after (in the list read)
	segment int
	total   int
	rcc     string
	consist bool
}

func (e *Engine) opQuery(ctx context.Context, body []byte) (any, error) {
	return e.read(ctx, body, true)
}

func (e *Engine) opScan(ctx context.Context, body []byte) (any, error) {
	return e.read(ctx, body, false)
}

// read serves Query (query) and Scan: the request is checked on its own
// (readRequest.plan), then against the table under its read lock
// (readPlan.bind), and only then run.
func (e *Engine) read(ctx context.Context, body []byte, query bool) (any, error) {
	var req readRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	pl, err := req.plan(query)
	if err != nil {
		return nil, err
	}
	t, err := e.itemTable(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	pl.t = t
	t.mu.RLock()
	defer t.mu.RUnlock()
	if err := pl.bind(&req); err != nil {
		return nil, err
	}
	return pl.run()
}

// plan checks what a Query (query) or Scan request says on its own, in
// DynamoDB's order, and returns its plan, not yet bound to a table.
func (req *readRequest) plan(query bool) (*readPlan, error) {
	if err := checkTableRef(req.TableName, "tableName"); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	pl := &readPlan{forward: true, rcc: req.ReturnConsumedCapacity, consist: req.ConsistentRead}
	// apimodel.Check has held Limit, IndexName, Segment and TotalSegments (all
	// pointers, so a later null cannot leave an unchecked value behind) to
	// the model's ranges and pattern.
	if req.Limit != nil {
		pl.limit = *req.Limit
	}
	switch req.Select {
	case "", "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES", "SPECIFIC_ATTRIBUTES", "COUNT":
	default:
		return nil, awserr.Validation("1 validation error detected: Value '%s' at 'select' failed to satisfy constraint: Member must satisfy enum value set: [SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]", req.Select)
	}
	var err error
	if query {
		err = req.checkQuery(pl)
	} else {
		err = req.checkScan(pl)
	}
	if err != nil {
		return nil, err
	}
	if err := req.parseExpressions(pl, query); err != nil {
		return nil, err
	}
	if pl.sel, err = checkSelect(req.Select, pl.proj, req.IndexName != nil, query); err != nil {
		return nil, err
	}
	return pl, nil
}

// checkQuery checks the members only a Query has (and refuses Scan's),
// setting the plan's direction.
func (req *readRequest) checkQuery(pl *readPlan) error {
	if req.Segment != nil || req.TotalSegments != nil {
		return awserr.Validation("Segment and TotalSegments are not valid parameters for Query")
	}
	if req.ScanIndexForward != nil {
		pl.forward = *req.ScanIndexForward
	}
	if req.KeyConditionExpression == nil && !present(req.KeyConditions) {
		return awserr.Validation("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	return nil
}

// checkScan checks the members only a Scan has (and refuses Query's),
// setting the plan's segment.
func (req *readRequest) checkScan(pl *readPlan) error {
	if req.KeyConditionExpression != nil {
		return awserr.Validation("KeyConditionExpression is not a valid parameter for Scan")
	}
	if req.ScanIndexForward != nil {
		return awserr.Validation("ScanIndexForward is not a valid parameter for Scan")
	}
	if (req.Segment == nil) != (req.TotalSegments == nil) {
		if req.Segment != nil {
			return awserr.Validation("The TotalSegments parameter is required but was not present in the request when Segment parameter is present")
		}
		return awserr.Validation("The Segment parameter is required but was not present in the request when parameter TotalSegments is present")
	}
	if req.TotalSegments != nil {
		ts, sg := *req.TotalSegments, *req.Segment
		if sg >= ts {
			return awserr.Validation("The Segment parameter is zero-based and must be less than parameter TotalSegments: Segment: %d is not less than TotalSegments: %d", sg, ts)
		}
		pl.segment, pl.total = sg, ts
	}
	return nil
}

// parseExpressions parses a read's key condition (Query), filter and
// projection, expression or legacy (never both), into the plan, and
// refuses expression names and values that none of them uses.
func (req *readRequest) parseExpressions(pl *readPlan, query bool) error {
	if err := checkMix(map[string]bool{"KeyConditions": present(req.KeyConditions), "QueryFilter": present(req.QueryFilter),
		"ScanFilter": present(req.ScanFilter), "AttributesToGet": req.AttributesToGet != nil},
		map[string]bool{"KeyConditionExpression": req.KeyConditionExpression != nil, "FilterExpression": req.FilterExpression != nil,
			"ProjectionExpression": req.ProjectionExpression != nil}); err != nil {
		return err
	}
	exprs := []expression{{"FilterExpression", req.FilterExpression}, {"KeyConditionExpression", req.KeyConditionExpression},
		{"ProjectionExpression", req.ProjectionExpression}}
	if !query {
		exprs = append(exprs[:1], exprs[2])
	}
	p, err := req.params(exprs...)
	if err != nil {
		return err
	}
	if query {
		if pl.kc, err = req.keyCondition(p); err != nil {
			return err
		}
	} else if present(req.QueryFilter) || present(req.KeyConditions) {
		return awserr.Validation("QueryFilter and KeyConditions are not valid parameters for Scan")
	}
	if pl.filter, err = req.filter(p, query); err != nil {
		return err
	}
	if pl.proj, err = parseProjection(req.ProjectionExpression, req.AttributesToGet, p); err != nil {
		return err
	}
	return p.CheckUnused()
}

// keyCondition parses a Query's KeyConditionExpression or legacy
// KeyConditions.
func (req *readRequest) keyCondition(p *expr.Params) (*expr.KeyCondition, error) {
	switch {
	case present(req.KeyConditions) && req.KeyConditionExpression != nil:
		return nil, mixed("KeyConditions", "KeyConditionExpression")
	case present(req.KeyConditions):
		return expr.LegacyKeyConditions(req.KeyConditions)
	case *req.KeyConditionExpression == "":
		return nil, awserr.Validation("Invalid KeyConditionExpression: The expression can not be empty;")
	default:
		return expr.ParseKeyCondition(*req.KeyConditionExpression, p)
	}
}

// filter parses a read's FilterExpression or its legacy QueryFilter
// (query) or ScanFilter; nil when it has none.
func (req *readRequest) filter(p *expr.Params, query bool) (*expr.Condition, error) {
	legacyFilter, legacyName := req.ScanFilter, "ScanFilter"
	if query {
		legacyFilter, legacyName = req.QueryFilter, "QueryFilter"
		if present(req.ScanFilter) {
			return nil, awserr.Validation("ScanFilter is not a valid parameter for Query")
		}
	}
	switch {
	case present(legacyFilter) && req.FilterExpression != nil:
		return nil, mixed(legacyName, "FilterExpression")
	case present(legacyFilter):
		return expr.LegacyFilter(legacyFilter, req.condOp())
	case req.FilterExpression != nil:
		if *req.FilterExpression == "" {
			return nil, awserr.Validation("Invalid FilterExpression: The expression can not be empty;")
		}
		return expr.ParseFilter(*req.FilterExpression, p)
	}
	return nil, nil
}

// bind checks the plan against its table (pl.t, whose read lock is held):
// the index, the Select and projection it allows, the key condition's
// attributes and types, and the ExclusiveStartKey.
func (pl *readPlan) bind(req *readRequest) error {
	t := pl.t
	if req.IndexName != nil {
		pl.ix = t.indexByName(*req.IndexName)
		if pl.ix == nil {
			return awserr.Validation("The table does not have the specified index: %s", *req.IndexName)
		}
		if pl.ix.global && req.ConsistentRead {
			return awserr.Validation("Consistent reads are not supported on global secondary indexes")
		}
	}
	if pl.sel == "ALL_ATTRIBUTES" && pl.ix != nil && pl.ix.global && pl.ix.projType != "ALL" {
		return awserr.Validation("One or more parameter values were invalid: Select type ALL_ATTRIBUTES is not supported for global secondary index %s because its projection type is not ALL", pl.ix.name)
	}
	if err := pl.checkProjected(); err != nil {
		return err
	}
	keys := t.key
	if pl.ix != nil {
		keys = pl.ix.key
	}
	if pl.kc != nil {
		if err := pl.checkKeyCondition(keys); err != nil {
			return err
		}
	}
	if req.ExclusiveStartKey != nil {
		var err error
		if pl.start, err = pl.startKey(attr.Item(req.ExclusiveStartKey)); err != nil {
			return err
		}
	}
	return nil
}

// checkKeyCondition checks a Query's key condition against the keys it
// reads (the table's or the index's): their names, a filter that names
// none of them, value types and the bounds of BETWEEN and begins_with.
func (pl *readPlan) checkKeyCondition(keys keyDef) error {
	if err := pl.kc.Validate(keys.Hash, keys.Range); err != nil {
		return err
	}
	if pl.filter != nil {
		for _, n := range pl.filter.TopLevel() {
			if keys.has(n) {
				return awserr.Validation("Filter Expression can only contain non-primary key attributes: Primary key attribute: %s", n)
			}
		}
	}
	if pl.kc.HashValue.T != keys.HashType {
		return awserr.Validation("One or more parameter values were invalid: Condition parameter type does not match schema type")
	}
	for _, v := range pl.kc.RangeValues {
		if v.T != keys.RangeType {
			return awserr.Validation("One or more parameter values were invalid: Condition parameter type does not match schema type")
		}
	}
	if pl.kc.RangeOp == "BETWEEN" && len(pl.kc.RangeValues) == 2 {
		if c, ok := attr.Compare(pl.kc.RangeValues[0], pl.kc.RangeValues[1]); ok && c > 0 {
			return awserr.Validation("Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {%s:%s}, upper bound operand: AttributeValue: {%s:%s}",
				pl.kc.RangeValues[0].T, rawScalar(pl.kc.RangeValues[0]), pl.kc.RangeValues[1].T, rawScalar(pl.kc.RangeValues[1]))
		}
	}
	if pl.kc.RangeOp == "begins_with" && len(pl.kc.RangeValues) == 1 && pl.kc.RangeValues[0].T == attr.N {
		return awserr.Validation("Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N")
	}
	return nil
}

// checkSelect returns the Select a read runs with: as given, or by default
// SPECIFIC_ATTRIBUTES with a projection, ALL_PROJECTED_ATTRIBUTES on an
// index, else ALL_ATTRIBUTES. It refuses, with DynamoDB's messages, a
// projection with any other Select, SPECIFIC_ATTRIBUTES without one, and
// ALL_PROJECTED_ATTRIBUTES without an index; Query's messages carry the
// "1 validation error detected: " prefix, Scan's do not.
func checkSelect(sel string, proj *projection, index, query bool) (string, error) {
	prefix := ""
	if query {
		prefix = "1 validation error detected: "
	}
	switch {
	case sel != "":
	case proj != nil:
		sel = "SPECIFIC_ATTRIBUTES"
	case index:
		sel = "ALL_PROJECTED_ATTRIBUTES"
	default:
		sel = "ALL_ATTRIBUTES"
	}
	if sel == "SPECIFIC_ATTRIBUTES" && proj == nil {
		return "", awserr.Validation("%sMust specify the AttributesToGet or ProjectionExpression when choosing to get SPECIFIC_ATTRIBUTES", prefix)
	}
	if sel != "SPECIFIC_ATTRIBUTES" && proj != nil {
		param, what := "AttributesToGet", sel
		if proj.p != nil {
			param = "ProjectionExpression"
		}
		if sel == "COUNT" {
			what = "only the Count"
		}
		return "", awserr.Validation("%sCannot specify the %s when choosing to get %s", prefix, param, what)
	}
	if sel == "ALL_PROJECTED_ATTRIBUTES" && !index {
		return "", awserr.Validation("%sALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName", prefix)
	}
	return sel, nil
}

// checkProjected refuses a ProjectionExpression or AttributesToGet that
// names an attribute a KEYS_ONLY or INCLUDE global index does not hold: a
// GSI read cannot fetch from the table, so DynamoDB refuses the request
// (naming each missing top-level attribute once, in the order asked)
// rather than answer without them. A local index fetches the rest from the
// table, so any attribute may be asked of it.
func (pl *readPlan) checkProjected() error {
	if pl.proj == nil || pl.ix == nil {
		return nil
	}
	return unprojected(pl.t, pl.ix, pl.proj.topLevel())
}

// unprojected refuses the top-level names a KEYS_ONLY or INCLUDE global
// index ix does not project (each once, in the order asked), for a
// ProjectionExpression or AttributesToGet (checkProjected) and a PartiQL
// SELECT's columns alike.
func unprojected(t *table, ix *index, names []string) error {
	if !ix.global || ix.projType == "ALL" {
		return nil
	}
	var missing []string
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if !seen[n] && !ix.projects(t, n) {
			missing = append(missing, n)
		}
		seen[n] = true
	}
	if missing == nil {
		return nil
	}
	return awserr.Validation("One or more parameter values were invalid: Global secondary index %s does not project [%s]",
		ix.name, strings.Join(missing, ", "))
}

func rawScalar(v attr.Value) string {
	if v.T == attr.B {
		return string(v.B)
	}
	return v.S
}

// startKey validates ExclusiveStartKey and encodes it for the list read.
func (pl *readPlan) startKey(esk attr.Item) ([]byte, error) {
	t := pl.t
	bad := func() error {
		return awserr.Validation("The provided starting key is invalid: The provided key element does not match the schema")
	}
	want := map[string]attr.Type{t.key.Hash: t.key.HashType}
	if t.key.Range != "" {
		want[t.key.Range] = t.key.RangeType
	}
	if pl.ix != nil {
		want[pl.ix.key.Hash] = pl.ix.key.HashType
		if pl.ix.key.Range != "" {
			want[pl.ix.key.Range] = pl.ix.key.RangeType
		}
	}
	if len(esk) != len(want) {
		return nil, bad()
	}
	for n, ty := range want {
		v, ok := esk[n]
		if !ok || v.T != ty {
			return nil, bad()
		}
	}
	if pl.kc != nil {
		keys := t.key
		if pl.ix != nil {
			keys = pl.ix.key
		}
		if !attr.Equal(esk[keys.Hash], pl.kc.HashValue) {
			return nil, awserr.Validation("The provided starting key is outside query boundaries based on provided conditions")
		}
	}
	tk := t.key.encode(nil, esk)
	if pl.total > 0 && segmentOfKey(tk, pl.total) != pl.segment {
		return nil, awserr.Validation("The provided Exclusive start key does not map to the provided segment")
	}
	if pl.ix == nil {
		return tk, nil
	}
	k := appendComponent(nil, esk[pl.ix.key.Hash])
	if pl.ix.key.Range != "" {
		k = appendComponent(k, esk[pl.ix.key.Range])
	}
	return append(k, tk...), nil
}

// bounds returns the [lo, hi) storage-key range a Query reads (nil = open).
func (pl *readPlan) bounds() (lo, hi []byte) {
	if pl.kc == nil {
		return nil, nil
	}
	p := appendComponent(nil, pl.kc.HashValue)
	pEnd := prefixEnd(p)
	if pl.kc.RangeName == "" || len(pl.kc.RangeValues) == 0 {
		return p, pEnd
	}
	with := func(v attr.Value) []byte { return appendComponent(append([]byte(nil), p...), v) }
	v := pl.kc.RangeValues[0]
	switch pl.kc.RangeOp {
	case "=":
		k := with(v)
		return k, prefixEnd(k)
	case "<":
		return p, with(v)
	case "<=":
		return p, prefixEnd(with(v))
	case ">":
		return prefixEnd(with(v)), pEnd
	case ">=":
		return with(v), pEnd
	case "BETWEEN":
		if len(pl.kc.RangeValues) < 2 {
			return p, pEnd
		}
		return with(v), prefixEnd(with(pl.kc.RangeValues[1]))
	case "begins_with":
		k := appendEscaped(append([]byte(nil), p...), attr.OrderedKey(v))
		return k, prefixEnd(k)
	}
	return p, pEnd
}

type readResponse struct {
	Items            []json.RawMessage
	Count            int
	ScannedCount     int
	LastEvaluatedKey attr.Item
	ConsumedCapacity *capacity
}

// MarshalJSON writes the page without re-validating the stored items.
func (r readResponse) MarshalJSON() ([]byte, error) {
	n := 96
	for _, it := range r.Items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	if r.Items != nil {
		b = append(b, `"Items":[`...)
		for i, it := range r.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, it...)
		}
		b = append(b, "],"...)
	}
	b = append(b, `"Count":`...)
	b = strconv.AppendInt(b, int64(r.Count), 10)
	b = append(b, `,"ScannedCount":`...)
	b = strconv.AppendInt(b, int64(r.ScannedCount), 10)
	if r.LastEvaluatedKey != nil {
		b = append(b, `,"LastEvaluatedKey":`...)
		b = attr.AppendItemJSON(b, r.LastEvaluatedKey)
	}
	if r.ConsumedCapacity != nil {
		c, err := json.Marshal(r.ConsumedCapacity)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"ConsumedCapacity":`...)
		b = append(b, c...)
	}
	return append(b, '}'), nil
}

// run reads one page. t.mu is held for reading.
func (pl *readPlan) run() (any, error) {
	n, lo, hi := pl.seek()
	resp := readResponse{Items: []json.RawMessage{}}
	read := 0
	var lastItem attr.Item
	for n != nil {
		if pl.forward && hi != nil && bytes.Compare(n.Key(), hi) >= 0 {
			n = nil
			break
		}
		if !pl.forward && lo != nil && bytes.Compare(n.Key(), lo) < 0 {
			n = nil
			break
		}
		ent := n.val
		if pl.total > 0 && segmentOf(ent, pl.total) != pl.segment {
			n = step(n, pl.forward)
			continue
		}
		// The key bounds select exactly the items the key condition
		// matches (storage keys sort as DynamoDB orders key values), so
		// items are decoded only when something must look inside them.
		var it attr.Item
		if pl.filter != nil || pl.proj != nil || (pl.ix != nil && pl.ix.projType != "ALL" && pl.sel == "ALL_PROJECTED_ATTRIBUTES") {
			var err error
			if it, err = decodeStored(ent); err != nil {
				return nil, err
			}
		}
		resp.ScannedCount++
		read += int(ent.size)
		lastItem = it
		match := true
		if pl.filter != nil {
			ok, err := pl.filter.Eval(pl.visible(it))
			if err != nil {
				return nil, err
			}
			match = ok
		}
		if match {
			resp.Count++
			if pl.sel != "COUNT" {
				resp.Items = append(resp.Items, pl.render(ent, it))
			}
		}
		next := step(n, pl.forward)
		if (pl.limit > 0 && resp.ScannedCount >= pl.limit) || read >= pageCap {
			if (next != nil && pl.stillInRange(next, lo, hi)) || (pl.limit > 0 && resp.ScannedCount >= pl.limit) {
				// DynamoDB returns a LastEvaluatedKey whenever Limit stops
				// the read, even at the very end.
				resp.LastEvaluatedKey = pl.lastKey(ent, lastItem)
			}
			break
		}
		n = next
	}
	if pl.sel == "COUNT" {
		resp.Items = nil
	}
	resp.ConsumedCapacity = pl.consumed(read)
	return resp, nil
}

// seek returns the node a page starts at, nil when there is none, and the
// storage-key bounds of the read (nil for none), narrowed by the
// ExclusiveStartKey: lo inclusive, hi exclusive.
func (pl *readPlan) seek() (n *slNode, lo, hi []byte) {
	list := pl.t.items
	if pl.ix != nil {
		list = pl.ix.list
	}
	lo, hi = pl.bounds()
	if pl.start != nil {
		if pl.forward {
			if lo == nil || bytes.Compare(pl.start, lo) >= 0 {
				lo = append(append([]byte(nil), pl.start...), 0) // just after start
			}
		} else if hi == nil || bytes.Compare(pl.start, hi) < 0 {
			hi = pl.start
		}
	}
	switch {
	case pl.forward && lo == nil:
		n = list.First()
	case pl.forward:
		n = list.SeekGE(lo)
	case hi == nil:
		n = list.Last()
	default:
		n = list.SeekLT(hi)
	}
	return n, lo, hi
}

// consumed is the capacity a page that read the given bytes consumed, on
// the table or, read through a GSI, on the index.
func (pl *readPlan) consumed(read int) *capacity {
	units := readUnits(read, pl.consist)
	var gsi map[string]float64
	if pl.ix != nil && pl.ix.global {
		gsi = map[string]float64{pl.ix.name: units}
		units = 0
	}
	return consumed(pl.rcc, pl.t.name, units, false, gsi)
}

func step(n *slNode, forward bool) *slNode {
	if forward {
		return n.Next()
	}
	return n.Prev()
}

func (pl *readPlan) stillInRange(n *slNode, lo, hi []byte) bool {
	if pl.forward {
		return hi == nil || bytes.Compare(n.Key(), hi) < 0
	}
	return lo == nil || bytes.Compare(n.Key(), lo) >= 0
}

// lastKey renders LastEvaluatedKey: the table key, plus the index key for
// index reads.
func (pl *readPlan) lastKey(ent *entry, it attr.Item) attr.Item {
	if it == nil {
		var err error
		if it, err = decodeStored(ent); err != nil {
			return nil
		}
	}
	k := pl.t.key.project(it)
	if pl.ix != nil {
		k[pl.ix.key.Hash] = it[pl.ix.key.Hash]
		if pl.ix.key.Range != "" {
			k[pl.ix.key.Range] = it[pl.ix.key.Range]
		}
	}
	return k
}

// visible is what a filter sees of a stored item: a global index holds only
// its projection, so a filter on a KEYS_ONLY or INCLUDE GSI finds the other
// attributes missing, as in DynamoDB. A local index reads the rest from the
// table, so its filters see the whole item.
func (pl *readPlan) visible(it attr.Item) attr.Item {
	if pl.ix != nil && pl.ix.global && pl.ix.projType != "ALL" {
		return pl.ix.project(pl.t, it)
	}
	return it
}

// render encodes one result item as Select and the projection ask. A
// projection on a global index reads the index item (checkProjected has
// refused any attribute the index lacks); on a local index it reads the
// whole item, which DynamoDB fetches from the table.
func (pl *readPlan) render(ent *entry, it attr.Item) json.RawMessage {
	switch {
	case pl.proj != nil:
		src := it
		if pl.ix != nil && pl.ix.global {
			src = pl.ix.project(pl.t, it)
		}
		return attr.AppendItemJSON(nil, pl.proj.apply(src))
	case pl.ix != nil && pl.ix.projType != "ALL" && pl.sel == "ALL_PROJECTED_ATTRIBUTES":
		return attr.AppendItemJSON(nil, pl.ix.project(pl.t, it))
	default:
		return json.RawMessage(ent.raw())
	}
}

// segmentOf assigns an item to a Scan segment by its hash key, so that one
// partition's items are all in one segment.
func segmentOf(ent *entry, total int) int { return segmentOfKey(ent.key(), total) }

// segmentOfKey returns the parallel-scan segment of the item with table
// storage key k: a hash of its hash-key component.
func segmentOfKey(k []byte, total int) int {
	end := len(k)
	for i := 0; i+1 < len(k); i++ {
		if k[i] == 0 {
			if k[i+1] == 1 {
				end = i
				break
			}
			i++ // escaped 0x00
		}
	}
	h := fnv.New32a()
	h.Write(k[:end])
	return int(h.Sum32() % uint32(total))
}
