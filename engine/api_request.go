package engine

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
)

// What the API handlers share to read a request: attribute maps decoded
// with attr's strict codec, expression attribute names and values, the
// legacy parameters (Expected, AttributesToGet, ...) and the rule against
// mixing them with expressions, conditions, and projections.

// jitem decodes an attribute map with attr's strict codec.
type jitem attr.Item

func (j *jitem) UnmarshalJSON(b []byte) error {
	it, err := attr.UnmarshalItemJSON(b)
	if err != nil {
		return err
	}
	*j = jitem(it)
	return nil
}

// jvalues decodes ExpressionAttributeValues; a bad value's error names its
// key as DynamoDB does: "ExpressionAttributeValues contains invalid value:
// <problem> for key :v".
type jvalues attr.Item

func (j *jvalues) UnmarshalJSON(b []byte) error {
	it, err := attr.UnmarshalItemJSON(b)
	if err == nil {
		*j = jvalues(it)
		return nil
	}
	// Slow path, errors only: find the offending key.
	var ae *awserr.Error
	var raw map[string]json.RawMessage
	if !errors.As(err, &ae) || json.Unmarshal(b, &raw) != nil {
		return err
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v attr.Value
		var ve *awserr.Error
		if e := v.UnmarshalJSON(raw[k]); errors.As(e, &ve) {
			return awserr.Validation("ExpressionAttributeValues contains invalid value: %s for key %s", ve.Message, k)
		}
	}
	return err
}

// exprFields are the expression parameters shared by most operations.
type exprFields struct {
	ExpressionAttributeNames  map[string]string `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues jvalues           `json:"ExpressionAttributeValues"`
}

// expression is one expression parameter of a request: its name
// ("ConditionExpression") and its value, nil when absent.
type expression struct {
	name string
	s    *string
}

// params validates the expression parameters of a request whose
// expressions are exprs, in the order DynamoDB names them, and returns
// them for parsing.
func (f *exprFields) params(exprs ...expression) (*expr.Params, error) {
	if f.ExpressionAttributeNames != nil && len(f.ExpressionAttributeNames) == 0 {
		return nil, awserr.Validation("ExpressionAttributeNames must not be empty")
	}
	if f.ExpressionAttributeValues != nil && len(f.ExpressionAttributeValues) == 0 {
		return nil, awserr.Validation("ExpressionAttributeValues must not be empty")
	}
	if err := f.withoutExpressions(exprs); err != nil {
		return nil, err
	}
	for k := range f.ExpressionAttributeNames {
		if !strings.HasPrefix(k, "#") {
			return nil, awserr.Validation("ExpressionAttributeNames contains invalid key: Syntax error; key: \"%s\"", k)
		}
	}
	for k := range f.ExpressionAttributeValues {
		if !strings.HasPrefix(k, ":") {
			return nil, awserr.Validation("ExpressionAttributeValues contains invalid key: Syntax error; key: \"%s\"", k)
		}
	}
	return expr.NewParams(f.ExpressionAttributeNames, attr.Item(f.ExpressionAttributeValues)), nil
}

// withoutExpressions refuses names given to a request using none of its
// expressions, and values given to one using none that takes values (a
// ProjectionExpression takes none): "ExpressionAttributeValues can only be
// specified when using expressions: UpdateExpression and
// ConditionExpression are null", naming the ones it could have used.
func (f *exprFields) withoutExpressions(exprs []expression) error {
	if f.ExpressionAttributeNames == nil && f.ExpressionAttributeValues == nil {
		return nil
	}
	var used, usedValues bool
	var null []string
	for _, x := range exprs {
		used = used || x.s != nil
		if x.name != "ProjectionExpression" {
			usedValues = usedValues || x.s != nil
			null = append(null, x.name)
		}
	}
	if !used && f.ExpressionAttributeNames != nil {
		return awserr.Validation("ExpressionAttributeNames can only be specified when using expressions")
	}
	if usedValues || f.ExpressionAttributeValues == nil {
		return nil
	}
	if len(null) == 0 {
		return awserr.Validation("ExpressionAttributeValues can only be specified when using expressions")
	}
	verb := " is null"
	if len(null) > 1 {
		verb = " are null"
	}
	return awserr.Validation("ExpressionAttributeValues can only be specified when using expressions: %s%s", strings.Join(null, " and "), verb)
}

// legacy holds the pre-expression parameters (Expected, AttributeUpdates,
// KeyConditions, QueryFilter, ScanFilter with ConditionalOperator), which
// expr translates into the structures the expressions build.
type legacy struct {
	Expected            json.RawMessage `json:"Expected"`
	ConditionalOperator *string         `json:"ConditionalOperator"`
	AttributeUpdates    json.RawMessage `json:"AttributeUpdates"`
	KeyConditions       json.RawMessage `json:"KeyConditions"`
	QueryFilter         json.RawMessage `json:"QueryFilter"`
	ScanFilter          json.RawMessage `json:"ScanFilter"`
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// checkMix rejects a request that uses legacy and expression parameters
// together; each map says which parameters of either kind are present.
func checkMix(legacyParams, exprParams map[string]bool) error {
	var l, x []string
	for n, ok := range legacyParams {
		if ok {
			l = append(l, n)
		}
	}
	for n, ok := range exprParams {
		if ok {
			x = append(x, n)
		}
	}
	if len(l) == 0 || len(x) == 0 {
		return nil
	}
	sort.Strings(l)
	sort.Strings(x)
	return mixed(strings.Join(l, ", "), strings.Join(x, ", "))
}

// mixed is DynamoDB's error for a request that uses a legacy parameter and
// its expression counterpart together.
func mixed(legacyName, exprName string) error {
	return awserr.Validation("Can not use both expression and non-expression parameters in the same request: Non-expression parameters: {%s} Expression parameters: {%s}", legacyName, exprName)
}

// condOp is the ConditionalOperator ("" when absent); apimodel.Check has
// already held it to AND or OR.
func (l *legacy) condOp() string {
	if l.ConditionalOperator == nil {
		return ""
	}
	return *l.ConditionalOperator
}

// condition returns the write's condition from ConditionExpression or the
// legacy Expected parameter.
// conditionOnly parses the ConditionExpression of a write that takes no
// other expression (PutItem, DeleteItem) and checks that every expression
// attribute name and value was used.
func (w *writeCommon) conditionOnly() (*expr.Condition, error) {
	p, err := w.params(expression{"ConditionExpression", w.ConditionExpression})
	if err != nil {
		return nil, err
	}
	cond, err := w.condition(p)
	if err != nil {
		return nil, err
	}
	return cond, p.CheckUnused()
}

func (w *writeCommon) condition(p *expr.Params) (*expr.Condition, error) {
	if present(w.Expected) {
		if w.ConditionExpression != nil {
			return nil, mixed("Expected", "ConditionExpression")
		}
		return expr.LegacyExpected(w.Expected, w.condOp())
	}
	if w.ConditionalOperator != nil {
		return nil, awserr.Validation("ConditionalOperator can only be used when Expected or QueryFilter or ScanFilter are present")
	}
	return parseCond(w.ConditionExpression, p, "ConditionExpression")
}

type writeCommon struct {
	TableName                           string  `json:"TableName"`
	ConditionExpression                 *string `json:"ConditionExpression"`
	ReturnValues                        string  `json:"ReturnValues"`
	ReturnConsumedCapacity              string  `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics         string  `json:"ReturnItemCollectionMetrics"`
	ReturnValuesOnConditionCheckFailure string  `json:"ReturnValuesOnConditionCheckFailure"`
	exprFields
	legacy
}

func (w *writeCommon) validate(allowed ...string) error {
	if err := checkTableRef(w.TableName, "tableName"); err != nil {
		return err
	}
	if err := checkRCC(w.ReturnConsumedCapacity); err != nil {
		return err
	}
	if err := checkRICM(w.ReturnItemCollectionMetrics); err != nil {
		return err
	}
	switch w.ReturnValuesOnConditionCheckFailure {
	case "", "NONE", "ALL_OLD":
	default:
		return awserr.Validation("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", w.ReturnValuesOnConditionCheckFailure)
	}
	switch w.ReturnValues {
	case "", "NONE":
		return nil
	case "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW":
		for _, a := range allowed {
			if a == w.ReturnValues {
				return nil
			}
		}
		return awserr.Validation("Return values set to invalid value")
	default:
		return awserr.Validation("1 validation error detected: Value '%s' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]", w.ReturnValues)
	}
}

// condition parses ConditionExpression (nil when absent).
func parseCond(s *string, p *expr.Params, what string) (*expr.Condition, error) {
	if s == nil {
		return nil, nil
	}
	if *s == "" {
		return nil, awserr.Validation("Invalid %s: The expression can not be empty;", what)
	}
	return expr.ParseCondition(*s, p)
}

func checkCond(c *expr.Condition, old attr.Item, rvccf string) error {
	if c == nil {
		return nil
	}
	subject := old
	if subject == nil {
		subject = attr.Item{}
	}
	ok, err := c.Eval(subject)
	if err != nil {
		return err
	}
	if !ok {
		cf := &condFailed{}
		if rvccf == "ALL_OLD" && old != nil {
			cf.item = old
		}
		return cf
	}
	return nil
}

// projection is a ProjectionExpression or the legacy AttributesToGet.
type projection struct {
	p     *expr.Projection
	names []string
}

func parseProjection(s *string, attrsToGet []string, p *expr.Params) (*projection, error) {
	if s != nil && attrsToGet != nil {
		return nil, awserr.Validation("Can not use both expression and non-expression parameters in the same request: Non-expression parameters: {AttributesToGet} Expression parameters: {ProjectionExpression}")
	}
	if attrsToGet != nil {
		if len(attrsToGet) == 0 {
			return nil, awserr.Validation("1 validation error detected: Value '[]' at 'attributesToGet' failed to satisfy constraint: Member must have length greater than or equal to 1")
		}
		seen := map[string]bool{}
		for _, n := range attrsToGet {
			if seen[n] {
				return nil, awserr.Validation("One or more parameter values were invalid: Duplicate value in attribute name: %s", n)
			}
			seen[n] = true
		}
		return &projection{names: attrsToGet}, nil
	}
	if s == nil {
		return nil, nil
	}
	if *s == "" {
		return nil, awserr.Validation("Invalid ProjectionExpression: The expression can not be empty;")
	}
	pe, err := expr.ParseProjection(*s, p)
	if err != nil {
		return nil, err
	}
	return &projection{p: pe}, nil
}

func (pr *projection) apply(it attr.Item) attr.Item {
	if pr.p != nil {
		return pr.p.Apply(it)
	}
	out := attr.Item{}
	for _, n := range pr.names {
		if v, ok := it[n]; ok {
			out[n] = v
		}
	}
	return out
}

func (pr *projection) topLevel() []string {
	if pr.p != nil {
		return pr.p.TopLevel()
	}
	return pr.names
}

// decode parses a request body into req. An empty body counts as {}.
func decode(body []byte, req any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, req); err != nil {
		var ae *awserr.Error
		if errors.As(err, &ae) {
			return ae
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "request"
			}
			return awserr.Newf(awserr.CodeSerialization, "Unexpected value type in payload for field %s: expected %s", field, te.Type)
		}
		return awserr.Newf(awserr.CodeSerialization, "Malformed request body: %v", err)
	}
	return nil
}

// decodeAs is decode into a new T, returned by value: a caller whose
// request would otherwise escape to the heap through decode's interface
// keeps its own on the stack and pays for the heap only here.
func decodeAs[T any](body []byte) (T, error) {
	var req T
	err := decode(body, &req)
	return req, err
}

// nullErr is AWS's wording for a required parameter that is missing.
func nullErr(field string) error {
	return awserr.Validation("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", field)
}

// rawResponse is a response body already encoded as JSON.
type rawResponse []byte
