// Package apimodel is DynamoDB's first line of request validation. Before any
// operation runs, DynamoDB checks each request's members against the API
// model's constraints (required members, string lengths and patterns,
// integer ranges, enum value sets, list and map sizes) and reports every
// violation of one request in one ValidationException:
//
//	2 validation errors detected: Value 'a;' at 'tableName' failed to satisfy
//	constraint: Member must satisfy regular expression pattern:
//	[a-zA-Z0-9_.-]+; Value '0' at 'limit' failed to satisfy constraint:
//	Member must have value greater than or equal to 1
//
// Only a request that passes goes on to the handlers' semantic checks.
// shapes holds, per operation, the constrained members in the order
// DynamoDB reports them (where that order is known from captures of the
// real service it is kept even where it differs from the model's member
// order, e.g. CreateTable reports attributeDefinitions before tableName);
// Check walks a request body against them. Nested members are named
// by dotted paths with 1-based list indexes and map keys, each followed by
// "member": 'keySchema.1.member.keyType',
// 'transactItems.1.member.put.tableName', 'requestItems.T.member.keys'.
//
// The walk reads the raw JSON without decoding it into Go values: items,
// keys and other AttributeValue maps are skipped over (checked only for
// presence), so PutItem of a large item costs one byte scan of the body.
package apimodel

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// maxShapeErrors is how many violations DynamoDB lists in one message.
const maxShapeErrors = 10

// kind is the JSON type a shape expects.
type kind uint8

const (
	kAny    kind = iota // anything (AttributeValues, free-form maps): presence only
	kString             // a JSON string
	kInt                // a JSON integer
	kBool               // true or false
	kStruct             // an object with named members
	kList               // an array
	kMap                // an object with arbitrary keys
)

// shape is the model of one value: its JSON type and its constraints.
type shape struct {
	kind     kind
	min, max int64 // length (string, list, map) or value (int) bounds, when hasMin/hasMax
	hasMin   bool
	hasMax   bool
	pattern  func([]byte) bool // reports whether the whole string matches patText
	patText  string            // the pattern as DynamoDB prints it
	// arnOK: a table name that may also be given as the table's ARN
	// ("arn:...", 1 to 1024 characters, no pattern). An empty one breaks
	// only the ARN's minimum length, as DynamoDB reports it.
	arnOK bool
	// hideValue: DynamoDB names the member as sent ("Limit") and omits
	// its value: "Value at 'Limit' failed to satisfy constraint: ...".
	hideValue bool
	enum      []string // allowed values, in DynamoDB's printed order
	fields    []field  // kStruct: members in report order
	name      string   // kStruct: the model's name, for printing values
	elem      *shape   // kList: element; kMap: value
	key       *shape   // kMap: key constraints
}

// field is one member of a structure.
type field struct {
	name     string // on the wire: "TableName"
	path     string // in messages: "tableName"
	shape    *shape
	required bool
}

// mem is an optional member; must a required one.
func mem(name string, s *shape) field {
	return field{name: name, path: strings.ToLower(name[:1]) + name[1:], shape: s}
}

func must(name string, s *shape) field {
	fl := mem(name, s)
	fl.required = true
	return fl
}

func structOf(name string, fields ...field) *shape {
	return &shape{kind: kStruct, name: name, fields: fields}
}

func listOf(elem *shape, lo, hi int64) *shape {
	return bounded(&shape{kind: kList, elem: elem}, lo, hi)
}

func mapOf(key, elem *shape, lo, hi int64) *shape {
	return bounded(&shape{kind: kMap, key: key, elem: elem}, lo, hi)
}

func strLen(lo, hi int64) *shape { return bounded(&shape{kind: kString}, lo, hi) }

func intRange(lo, hi int64) *shape { return bounded(&shape{kind: kInt}, lo, hi) }

func enumOf(values ...string) *shape { return &shape{kind: kString, enum: values} }

// noBound marks a bound that the model does not set.
const noBound = -1 << 63

func bounded(s *shape, lo, hi int64) *shape {
	s.min, s.hasMin = lo, lo != noBound
	s.max, s.hasMax = hi, hi != noBound
	return s
}

func patterned(s *shape, text string, match func([]byte) bool) *shape {
	s.pattern, s.patText = match, text
	return s
}

// tableRef is a TableName that DynamoDB also takes as the table's ARN
// (every operation on an existing table).
func tableRef() *shape {
	s := patterned(strLen(3, 255), "[a-zA-Z0-9_.-]+", matchName)
	s.arnOK = true
	return s
}

// arnShape is what a table ARN in a TableName is held to.
var arnShape = strLen(1, 1024)

// ValidTableRef reports whether Check passes name as the TableName of an
// operation on an existing table: 3 to 255 characters of [a-zA-Z0-9_.-],
// or an ARN ("arn:...") of at most 1024.
func ValidTableRef(name string) bool {
	if strings.HasPrefix(name, "arn:") {
		// A UTF-16 length is at most the UTF-8 one.
		return len(name) <= int(arnShape.max) || javaLen([]byte(name)) <= int(arnShape.max)
	}
	return len(name) >= int(tableS.min) && len(name) <= int(tableS.max) && ValidName(name)
}

// asARN returns the shape v is checked against: arnShape for an ARN, or
// for an empty name, where s allows one, else s.
func asARN(s *shape, v []byte) *shape {
	if s.arnOK && (len(v) == 0 || bytes.HasPrefix(v, []byte("arn:"))) {
		return arnShape
	}
	return s
}

// matchName matches DynamoDB's name pattern [a-zA-Z0-9_.-]+.
func matchName(b []byte) bool { return nameChars(b) }

// ValidName reports whether s matches DynamoDB's pattern for table and
// index names, [a-zA-Z0-9_.-]+ (one character at least), as Check holds
// them: for the handlers' own checks, without a regular expression.
func ValidName(s string) bool { return nameChars(s) }

func nameChars[T string | []byte](b T) bool {
	for i := 0; i < len(b); i++ {
		if c := b[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return len(b) > 0
}

// Shapes shared by several operations.
var (
	anyS      = &shape{kind: kAny}
	boolS     = &shape{kind: kBool}
	strS      = &shape{kind: kString}                                   // an unconstrained string, typed only
	nameS     = patterned(strLen(3, 255), "[a-zA-Z0-9_.-]+", matchName) // TableName, IndexName
	tableS    = tableRef()                                              // a TableName that may be an ARN
	attrNameS = strLen(1, 255)                                          // KeySchemaAttributeName
	limitS    = intRange(1, noBound)
	// Query's Limit is reported by its wire name, without its value
	// (captured from DynamoDB; Scan's is not).
	queryLimit = mem("Limit", &shape{kind: kInt, min: 1, hasMin: true, hideValue: true})
	rccS       = enumOf("INDEXES", "TOTAL", "NONE")
	ricmS      = enumOf("SIZE", "NONE")
	rvS        = enumOf("ALL_NEW", "UPDATED_OLD", "ALL_OLD", "NONE", "UPDATED_NEW")
	rvoccfS    = enumOf("ALL_OLD", "NONE")
	condOpS    = enumOf("OR", "AND")
	selectS    = enumOf("SPECIFIC_ATTRIBUTES", "COUNT", "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES")
	compOpS    = enumOf("IN", "NULL", "BETWEEN", "LT", "NOT_CONTAINS", "EQ", "GT", "NOT_NULL", "NE", "LE", "BEGINS_WITH", "GE", "CONTAINS")
	attrsToGS  = listOf(&shape{kind: kString}, 1, noBound) // AttributesToGet
	tokenS     = strLen(1, 36)                             // ClientRequestToken
	statement  = strLen(1, 8192)                           // a PartiQL statement
	paramsS    = listOf(anyS, 1, noBound)                  // PartiQL parameters

	// Unconstrained members, named so that a wrong JSON type is left to the
	// handler's SerializationException and values print as DynamoDB prints
	// them.
	eanS   = mem("ExpressionAttributeNames", anyS)
	eavS   = mem("ExpressionAttributeValues", anyS)
	condS  = mem("ConditionExpression", strS)
	projS  = mem("ProjectionExpression", strS)
	consS  = mem("ConsistentRead", boolS)
	filtS  = mem("FilterExpression", strS)
	protS  = mem("DeletionProtectionEnabled", boolS)
	updExS = mem("UpdateExpression", strS)

	expectedS = mapOf(nil, structOf("ExpectedAttributeValue",
		mem("Value", anyS), mem("Exists", boolS), mem("ComparisonOperator", compOpS), mem("AttributeValueList", anyS)), noBound, noBound)
	conditionsS = mapOf(nil, structOf("Condition",
		mem("AttributeValueList", anyS), must("ComparisonOperator", compOpS)), noBound, noBound)
	attrUpdatesS = mapOf(nil, structOf("AttributeValueUpdate",
		mem("Value", anyS), mem("Action", enumOf("ADD", "PUT", "DELETE"))), noBound, noBound)

	throughputS = structOf("ProvisionedThroughput",
		must("WriteCapacityUnits", intRange(1, noBound)), must("ReadCapacityUnits", intRange(1, noBound)))
	keySchemaS = listOf(structOf("KeySchemaElement",
		must("AttributeName", attrNameS), must("KeyType", enumOf("HASH", "RANGE"))), 1, 2)
	projectionS = structOf("Projection",
		mem("ProjectionType", enumOf("ALL", "INCLUDE", "KEYS_ONLY")), mem("NonKeyAttributes", listOf(strLen(1, 255), 1, 20)))
	attrDefsS = listOf(structOf("AttributeDefinition",
		must("AttributeName", attrNameS), must("AttributeType", enumOf("B", "N", "S"))), noBound, noBound)
	streamSpecS = structOf("StreamSpecification",
		must("StreamEnabled", boolS), mem("StreamViewType", enumOf("NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES", "KEYS_ONLY")))
	billingS    = enumOf("PROVISIONED", "PAY_PER_REQUEST")
	tableClassS = enumOf("STANDARD", "STANDARD_INFREQUENT_ACCESS")
)

// batchKeysS is BatchGetItem's Keys list: over 100 keys DynamoDB names the
// path by its wire names without the value.
var batchKeysS = func() *shape { s := listOf(anyS, 1, 100); s.hideValue = true; return s }()

// shapes is the model of every operation the engine serves, by operation
// name; Streams operations are under "streams:" + name.
var shapes = map[string]*shape{
	"CreateTable": structOf("CreateTableInput",
		must("AttributeDefinitions", attrDefsS),
		must("TableName", nameS),
		mem("BillingMode", billingS),
		mem("ProvisionedThroughput", throughputS),
		must("KeySchema", keySchemaS),
		mem("LocalSecondaryIndexes", listOf(structOf("LocalSecondaryIndex",
			must("IndexName", nameS), must("KeySchema", keySchemaS), must("Projection", projectionS)), noBound, noBound)),
		mem("GlobalSecondaryIndexes", listOf(structOf("GlobalSecondaryIndex",
			must("IndexName", nameS), must("KeySchema", keySchemaS), must("Projection", projectionS),
			mem("ProvisionedThroughput", throughputS)), noBound, noBound)),
		mem("StreamSpecification", streamSpecS),
		mem("TableClass", tableClassS), protS),
	"DescribeTable": structOf("DescribeTableInput", must("TableName", tableS)),
	"DeleteTable":   structOf("DeleteTableInput", must("TableName", tableS)),
	"ListTables": structOf("ListTablesInput",
		mem("ExclusiveStartTableName", nameS), mem("Limit", intRange(1, 100))),
	"UpdateTable": structOf("UpdateTableInput",
		mem("AttributeDefinitions", attrDefsS),
		must("TableName", tableS),
		mem("BillingMode", billingS),
		mem("ProvisionedThroughput", throughputS),
		mem("GlobalSecondaryIndexUpdates", listOf(structOf("GlobalSecondaryIndexUpdate",
			mem("Update", structOf("UpdateGlobalSecondaryIndexAction",
				must("IndexName", nameS), must("ProvisionedThroughput", throughputS))),
			mem("Create", structOf("CreateGlobalSecondaryIndexAction",
				must("IndexName", nameS), must("KeySchema", keySchemaS), must("Projection", projectionS),
				mem("ProvisionedThroughput", throughputS))),
			mem("Delete", structOf("DeleteGlobalSecondaryIndexAction", must("IndexName", nameS)))), noBound, noBound)),
		mem("StreamSpecification", streamSpecS),
		mem("TableClass", tableClassS), protS),
	"DescribeTimeToLive": structOf("DescribeTimeToLiveInput", must("TableName", tableS)),
	"UpdateTimeToLive": structOf("UpdateTimeToLiveInput",
		must("TableName", tableS),
		must("TimeToLiveSpecification", structOf("TimeToLiveSpecification",
			must("Enabled", boolS), must("AttributeName", strLen(1, 255))))),

	"PutItem": structOf("PutItemInput",
		mem("ReturnConsumedCapacity", rccS), must("TableName", tableS), must("Item", anyS),
		mem("ConditionalOperator", condOpS), mem("Expected", expectedS), mem("ReturnValues", rvS),
		mem("ReturnItemCollectionMetrics", ricmS), mem("ReturnValuesOnConditionCheckFailure", rvoccfS), condS),
	"GetItem": structOf("GetItemInput",
		mem("ReturnConsumedCapacity", rccS), mem("AttributesToGet", attrsToGS), must("TableName", tableS), must("Key", anyS),
		consS, projS),
	"DeleteItem": structOf("DeleteItemInput",
		mem("ReturnConsumedCapacity", rccS), must("TableName", tableS), mem("ReturnValues", rvS),
		mem("ReturnItemCollectionMetrics", ricmS), must("Key", anyS), mem("ConditionalOperator", condOpS),
		mem("Expected", expectedS), mem("ReturnValuesOnConditionCheckFailure", rvoccfS), condS),
	"UpdateItem": structOf("UpdateItemInput",
		mem("ReturnConsumedCapacity", rccS), must("TableName", tableS), mem("ReturnItemCollectionMetrics", ricmS),
		mem("ReturnValues", rvS), must("Key", anyS), mem("ConditionalOperator", condOpS), mem("Expected", expectedS),
		mem("AttributeUpdates", attrUpdatesS), mem("ReturnValuesOnConditionCheckFailure", rvoccfS), condS, updExS),
	"Query": structOf("QueryInput",
		queryLimit, mem("KeyConditions", conditionsS), mem("ReturnConsumedCapacity", rccS),
		mem("AttributesToGet", attrsToGS), must("TableName", tableS), mem("Select", selectS), mem("IndexName", nameS),
		mem("QueryFilter", conditionsS), mem("ConditionalOperator", condOpS), consS, mem("ScanIndexForward", boolS),
		projS, filtS, mem("KeyConditionExpression", strS)),
	"Scan": structOf("ScanInput",
		mem("Limit", limitS), mem("TotalSegments", intRange(1, 1000000)), mem("ReturnConsumedCapacity", rccS),
		mem("AttributesToGet", attrsToGS), mem("Select", selectS), must("TableName", tableS),
		mem("Segment", intRange(0, 999999)), mem("ScanFilter", conditionsS), mem("IndexName", nameS),
		mem("ConditionalOperator", condOpS), consS, projS, filtS),
	"BatchGetItem": structOf("BatchGetItemInput",
		mem("ReturnConsumedCapacity", rccS),
		must("RequestItems", mapOf(tableS, structOf("KeysAndAttributes",
			// More than 100 keys for one table is this constraint (reported
			// as "Value at 'RequestItems.T.member.Keys'", see keysPath);
			// more than 100 over all tables, each within it, is the
			// handler's "Too many items requested for the BatchGetItem call".
			must("Keys", batchKeysS), mem("AttributesToGet", attrsToGS), consS, projS, eanS), 1, 100))),
	"BatchWriteItem": structOf("BatchWriteItemInput",
		mem("ReturnConsumedCapacity", rccS), mem("ReturnItemCollectionMetrics", ricmS),
		must("RequestItems", mapOf(tableS, listOf(structOf("WriteRequest",
			mem("PutRequest", structOf("PutRequest", must("Item", anyS))),
			mem("DeleteRequest", structOf("DeleteRequest", must("Key", anyS)))), 1, 25), 1, 25))),
	"TransactWriteItems": structOf("TransactWriteItemsInput",
		mem("ReturnConsumedCapacity", rccS), mem("ReturnItemCollectionMetrics", ricmS),
		mem("ClientRequestToken", tokenS),
		must("TransactItems", listOf(structOf("TransactWriteItem",
			mem("ConditionCheck", structOf("ConditionCheck", must("Key", anyS), must("TableName", tableS),
				must("ConditionExpression", strS), eanS, eavS, mem("ReturnValuesOnConditionCheckFailure", rvoccfS))),
			mem("Put", structOf("Put", must("Item", anyS), must("TableName", tableS),
				condS, eanS, eavS, mem("ReturnValuesOnConditionCheckFailure", rvoccfS))),
			mem("Delete", structOf("Delete", must("Key", anyS), must("TableName", tableS),
				condS, eanS, eavS, mem("ReturnValuesOnConditionCheckFailure", rvoccfS))),
			mem("Update", structOf("Update", must("Key", anyS), must("UpdateExpression", strS), must("TableName", tableS),
				condS, eanS, eavS, mem("ReturnValuesOnConditionCheckFailure", rvoccfS)))), 1, 100))),
	"TransactGetItems": structOf("TransactGetItemsInput",
		must("TransactItems", listOf(structOf("TransactGetItem",
			must("Get", structOf("Get", must("Key", anyS), must("TableName", tableS), projS, eanS))), 1, 100)),
		mem("ReturnConsumedCapacity", rccS)),

	// PartiQL.
	"ExecuteStatement": structOf("ExecuteStatementInput",
		must("Statement", statement), mem("Parameters", paramsS), mem("NextToken", strLen(1, 32768)),
		mem("ReturnConsumedCapacity", rccS), mem("Limit", limitS), mem("ReturnValuesOnConditionCheckFailure", rvoccfS), consS),
	"BatchExecuteStatement": structOf("BatchExecuteStatementInput",
		must("Statements", listOf(structOf("BatchStatementRequest",
			must("Statement", statement), mem("Parameters", paramsS), consS,
			mem("ReturnValuesOnConditionCheckFailure", rvoccfS)), 1, 25)),
		mem("ReturnConsumedCapacity", rccS)),
	"ExecuteTransaction": structOf("ExecuteTransactionInput",
		must("TransactStatements", listOf(structOf("ParameterizedStatement",
			must("Statement", statement), mem("Parameters", paramsS),
			mem("ReturnValuesOnConditionCheckFailure", rvoccfS)), 1, 100)),
		mem("ClientRequestToken", tokenS), mem("ReturnConsumedCapacity", rccS)),

	// DynamoDB Streams.
	"streams:ListStreams": structOf("ListStreamsInput",
		mem("TableName", nameS), mem("Limit", intRange(1, 100)), mem("ExclusiveStartStreamArn", strLen(37, 1024))),
	"streams:DescribeStream": structOf("DescribeStreamInput",
		must("StreamArn", strLen(37, 1024)), mem("Limit", intRange(1, 100)), mem("ExclusiveStartShardId", strLen(28, 65)),
		mem("ShardFilter", structOf("ShardFilter", mem("Type", enumOf("CHILD_SHARDS")), mem("ShardId", strLen(28, 65))))),
	"streams:GetShardIterator": structOf("GetShardIteratorInput",
		must("StreamArn", strLen(37, 1024)), must("ShardId", strLen(28, 65)),
		must("ShardIteratorType", enumOf("TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER", "AT_TIMESTAMP")),
		mem("SequenceNumber", strLen(21, 40))),
	"streams:GetRecords": structOf("GetRecordsInput",
		must("ShardIterator", strLen(1, 2048)), mem("Limit", intRange(1, 1000))),
}

// Check checks body, the request of operation op (of the Streams API
// when streamsAPI), against the model's constraints and returns
// every violation as one ValidationException, or nil. A body that is not
// JSON, or has a member of the wrong JSON type, is left to the handler's
// decoder, which reports it as the SerializationException DynamoDB sends
// before any constraint is checked.
func Check(streamsAPI bool, op string, body []byte) error {
	if streamsAPI {
		op = "streams:" + op
	}
	s := shapes[op]
	if s == nil {
		return nil
	}
	raw := trimWS(body)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if err := requiredFirst(op, raw); err != nil && json.Valid(raw) {
		return err
	}
	var w walker
	if !w.walk(s, raw, mpath{}) || len(w.msgs) == 0 {
		return nil
	}
	if !json.Valid(body) {
		return nil
	}
	if len(w.msgs) == 1 {
		return awserr.Validation("1 validation error detected: %s", w.msgs[0])
	}
	return awserr.Validation("%d validation errors detected: %s", len(w.msgs), strings.Join(w.msgs, "; "))
}

// requiredFirst reports what DynamoDB refuses, alone, before the model's
// constraints: a CreateTable without TableName, and a BatchGetItem or
// BatchWriteItem whose RequestItems is empty (both captured from the
// service; a TableName of JSON null is missing too).
func requiredFirst(op string, raw []byte) error {
	switch op {
	case "CreateTable":
		if v := memberValue(raw, "TableName"); v == nil || string(v) == "null" {
			return awserr.Validation("The parameter 'TableName' is required but was not present in the request")
		}
	case "BatchGetItem", "BatchWriteItem":
		if v := memberValue(raw, "RequestItems"); v != nil && string(trimWS(v)) != "null" {
			if it := (objIter{b: v}); v[0] == '{' {
				if _, _, ok := it.next(); !ok && !it.bad {
					return awserr.Validation("The requestItems parameter is required for %s", op)
				}
			}
		}
	}
	return nil
}

// memberValue returns the raw value of raw's member name (matched as
// fieldIndex matches), or nil when raw is not an object or has none.
func memberValue(raw []byte, name string) []byte {
	var found []byte
	it := objIter{b: raw}
	for {
		k, v, ok := it.next()
		if !ok {
			return found
		}
		if string(k) == name || (found == nil && strings.EqualFold(string(k), name)) {
			found = v
		}
	}
}

// walker collects the violations of one request.
type walker struct {
	msgs []string
}

// mpath names a value in a request twice: as DynamoDB's messages usually
// do ("requestItems.T.member.keys", model member names) and as the request
// spells it ("RequestItems.T.member.Keys", for shapes with hideValue).
type mpath struct{ model, wire string }

// member names a member of the value at p.
func (p mpath) member(fl field) mpath {
	if p.model == "" {
		return mpath{fl.path, fl.name}
	}
	return mpath{p.model + "." + fl.path, p.wire + "." + fl.name}
}

// elem names an element ("1", a map key) of the value at p.
func (p mpath) elem(k string) mpath {
	return mpath{p.model + "." + k + ".member", p.wire + "." + k + ".member"}
}

// fail records a violation of the value at path (raw nil: a missing value).
func (w *walker) fail(s *shape, raw []byte, path mpath, constraint string) {
	if len(w.msgs) >= maxShapeErrors {
		return
	}
	if raw != nil && s.hideValue {
		w.msgs = append(w.msgs, "Value at '"+path.wire+"' failed to satisfy constraint: "+constraint)
		return
	}
	v := "null"
	if raw != nil {
		v = "'" + render(s, raw) + "'"
	}
	w.msgs = append(w.msgs, "Value "+v+" at '"+path.model+"' failed to satisfy constraint: "+constraint)
}

// walk checks raw, a present non-null JSON value, against s. It returns
// false when raw is not of the JSON type s expects (a serialization error).
func (w *walker) walk(s *shape, raw []byte, path mpath) bool {
	switch s.kind {
	case kAny:
		return true
	case kBool:
		return string(raw) == "true" || string(raw) == "false"
	case kString:
		v, ok := jsonBytes(raw)
		if ok {
			w.checkString(s, raw, v, path)
		}
		return ok
	case kInt:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return false
		}
		if s.hasMin && n < s.min {
			w.fail(s, raw, path, "Member must have value greater than or equal to "+strconv.FormatInt(s.min, 10))
		}
		if s.hasMax && n > s.max {
			w.fail(s, raw, path, "Member must have value less than or equal to "+strconv.FormatInt(s.max, 10))
		}
		return true
	case kStruct:
		return w.walkStruct(s, raw, path)
	case kList:
		return w.walkList(s, raw, path, true)
	case kMap:
		return w.walkMap(s, raw, path)
	}
	return true
}

func (w *walker) checkString(s *shape, raw, v []byte, path mpath) {
	s = asARN(s, v)
	if s.enum != nil {
		for _, e := range s.enum {
			if string(v) == e {
				return
			}
		}
		w.fail(s, raw, path, "Member must satisfy enum value set: ["+strings.Join(s.enum, ", ")+"]")
		return
	}
	if s.pattern != nil && !s.pattern(v) {
		w.fail(s, raw, path, "Member must satisfy regular expression pattern: "+s.patText)
	}
	w.checkLen(s, raw, int64(javaLen(v)), path)
}

func (w *walker) checkLen(s *shape, raw []byte, n int64, path mpath) {
	if s.hasMin && n < s.min {
		w.fail(s, raw, path, "Member must have length greater than or equal to "+strconv.FormatInt(s.min, 10))
	}
	if s.hasMax && n > s.max {
		w.fail(s, raw, path, "Member must have length less than or equal to "+strconv.FormatInt(s.max, 10))
	}
}

func (w *walker) walkStruct(s *shape, raw []byte, path mpath) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var buf [16][]byte
	vals := buf[:0]
	if len(s.fields) > len(buf) {
		vals = make([][]byte, 0, len(s.fields))
	}
	vals = vals[:len(s.fields)]
	it := objIter{b: raw}
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		if i := fieldIndex(s.fields, k); i >= 0 {
			vals[i] = v
		}
	}
	if it.bad {
		return false
	}
	for i, fl := range s.fields {
		v := vals[i]
		if v == nil || string(v) == "null" {
			if fl.required {
				w.fail(fl.shape, nil, path.member(fl), "Member must not be null")
			}
			continue
		}
		if !w.walk(fl.shape, v, path.member(fl)) {
			return false
		}
	}
	return true
}

// fieldIndex finds the member named k, exactly or, as encoding/json
// matches the handlers' structs, case-insensitively.
func fieldIndex(fields []field, k []byte) int {
	for i := range fields {
		if string(k) == fields[i].name {
			return i
		}
	}
	for i := range fields {
		if strings.EqualFold(string(k), fields[i].name) {
			return i
		}
	}
	return -1
}

// walkList checks a list; ownLen is false when its length was already
// reported by the map holding it.
func (w *walker) walkList(s *shape, raw []byte, path mpath, ownLen bool) bool {
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	elems, ok := listElems(raw)
	if !ok {
		return false
	}
	if ownLen {
		w.checkLen(s, raw, int64(len(elems)), path)
	}
	if s.elem.kind == kAny {
		return true
	}
	for i, e := range elems {
		if string(e) == "null" {
			continue
		}
		if !w.walk(s.elem, e, path.elem(strconv.Itoa(i+1))) {
			return false
		}
	}
	return true
}

func (w *walker) walkMap(s *shape, raw []byte, path mpath) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var keys []string
	var vals [][]byte
	it := objIter{b: raw}
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		keys, vals = append(keys, string(k)), append(vals, v)
	}
	if it.bad {
		return false
	}
	w.checkLen(s, raw, int64(len(keys)), path)
	if s.key != nil {
		for _, k := range keys {
			if !keyOK(s.key, k) {
				w.fail(s, raw, path, "Map keys must satisfy constraint: ["+constraintList(s.key)+"]")
				break
			}
		}
	}
	valueLen := s.elem.kind == kList && (s.elem.hasMin || s.elem.hasMax)
	if valueLen {
		for _, v := range vals {
			if elems, ok := listElems(v); ok && !inBounds(s.elem, int64(len(elems))) {
				w.fail(s, raw, path, "Map value must satisfy constraint: ["+constraintList(s.elem)+"]")
				break
			}
		}
	}
	for i, v := range vals {
		if string(v) == "null" {
			continue
		}
		p := path.elem(keys[i])
		var ok bool
		if s.elem.kind == kList {
			ok = w.walkList(s.elem, v, p, !valueLen)
		} else {
			ok = w.walk(s.elem, v, p)
		}
		if !ok {
			return false
		}
	}
	return true
}

func inBounds(s *shape, n int64) bool {
	return (!s.hasMin || n >= s.min) && (!s.hasMax || n <= s.max)
}

func keyOK(s *shape, k string) bool {
	s = asARN(s, []byte(k))
	return inBounds(s, int64(javaLen([]byte(k)))) && (s.pattern == nil || s.pattern([]byte(k)))
}

// constraintList prints a shape's constraints as DynamoDB lists them for
// map keys and values: maximum, minimum, then pattern.
func constraintList(s *shape) string {
	var c []string
	if s.hasMax {
		c = append(c, "Member must have length less than or equal to "+strconv.FormatInt(s.max, 10))
	}
	if s.hasMin {
		c = append(c, "Member must have length greater than or equal to "+strconv.FormatInt(s.min, 10))
	}
	if s.pattern != nil {
		c = append(c, "Member must satisfy regular expression pattern: "+s.patText)
	}
	return strings.Join(c, ", ")
}

// javaLen is a string's length as Java counts it, in UTF-16 code units.
func javaLen(s []byte) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			n, i = n+1, i+1
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		n, i = n+utf16.RuneLen(r), i+size
	}
	return n
}

// render prints a value the way DynamoDB's messages do (Java's toString):
// strings bare, lists as [a, b], maps as {k=v}, structures as
// Name(member=value, ...).
func render(s *shape, raw []byte) string {
	var b strings.Builder
	renderTo(&b, s, raw)
	return b.String()
}

func renderTo(b *strings.Builder, s *shape, raw []byte) {
	if s == nil {
		s = anyS
	}
	switch {
	case string(raw) == "null":
		b.WriteString("null")
	case raw[0] == '"':
		v, _ := jsonString(raw)
		b.WriteString(v)
	case raw[0] == '[':
		elems, _ := listElems(raw)
		b.WriteByte('[')
		for i, e := range elems {
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, s.elem, e)
		}
		b.WriteByte(']')
	case raw[0] == '{' && s.kind == kStruct:
		renderStruct(b, s, raw)
	case raw[0] == '{':
		b.WriteByte('{')
		it := objIter{b: raw}
		for n := 0; ; n++ {
			k, v, ok := it.next()
			if !ok {
				break
			}
			if n > 0 {
				b.WriteString(", ")
			}
			b.Write(k)
			b.WriteByte('=')
			renderTo(b, s.elem, v)
		}
		b.WriteByte('}')
	default:
		b.Write(raw)
	}
}

func renderStruct(b *strings.Builder, s *shape, raw []byte) {
	vals := make([][]byte, len(s.fields))
	it := objIter{b: raw}
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		if i := fieldIndex(s.fields, k); i >= 0 {
			vals[i] = v
		}
	}
	b.WriteString(s.name)
	b.WriteByte('(')
	for i, fl := range s.fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(fl.path)
		b.WriteByte('=')
		if vals[i] == nil {
			b.WriteString("null")
		} else {
			renderTo(b, fl.shape, vals[i])
		}
	}
	b.WriteByte(')')
}

// ---- a minimal JSON reader: finds values' extents without decoding ----

// objIter walks the members of a JSON object. bad is set when the object
// is malformed.
type objIter struct {
	b   []byte
	i   int
	bad bool
}

// next returns the next member's raw key (unescaped) and raw value.
func (it *objIter) next() (key, val []byte, ok bool) {
	b := it.b
	i := it.i
	if i == 0 {
		i = skipWS(b, 0)
		if i >= len(b) || b[i] != '{' {
			it.bad = true
			return nil, nil, false
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			it.i = len(b)
			return nil, nil, false
		}
	} else if i >= len(b) {
		return nil, nil, false
	}
	if i >= len(b) || b[i] != '"' {
		it.bad = true
		return nil, nil, false
	}
	end := scanString(b, i)
	if end < 0 {
		it.bad = true
		return nil, nil, false
	}
	key, _ = jsonBytes(b[i:end])
	i = skipWS(b, end)
	if i >= len(b) || b[i] != ':' {
		it.bad = true
		return nil, nil, false
	}
	i = skipWS(b, i+1)
	vend := scanValue(b, i)
	if vend < 0 {
		it.bad = true
		return nil, nil, false
	}
	val = b[i:vend]
	i = skipWS(b, vend)
	switch {
	case i < len(b) && b[i] == ',':
		it.i = skipWS(b, i+1)
	case i < len(b) && b[i] == '}':
		it.i = len(b)
	default:
		it.bad = true
		return nil, nil, false
	}
	return key, val, true
}

// listElems splits a JSON array into its raw elements.
func listElems(raw []byte) ([][]byte, bool) {
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false
	}
	var out [][]byte
	i := skipWS(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return out, true
	}
	for i < len(raw) {
		end := scanValue(raw, i)
		if end < 0 {
			return nil, false
		}
		out = append(out, raw[i:end])
		i = skipWS(raw, end)
		if i < len(raw) && raw[i] == ']' {
			return out, true
		}
		if i >= len(raw) || raw[i] != ',' {
			return nil, false
		}
		i = skipWS(raw, i+1)
	}
	return nil, false
}

// jsonString decodes a raw JSON string.
func jsonString(raw []byte) (string, bool) {
	b, ok := jsonBytes(raw)
	return string(b), ok
}

// jsonBytes decodes a raw JSON string, without copying it when it has no
// escapes.
func jsonBytes(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func trimWS(b []byte) []byte {
	i := skipWS(b, 0)
	j := len(b)
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return b[i:j]
}

// scanString returns the index just past the string starting at b[i], or -1.
func scanString(b []byte, i int) int {
	// Short strings (names, types, small values) are the common case: look
	// at a few bytes before paying for IndexByte's call.
	for j := i + 1; j < len(b) && j < i+17; j++ {
		switch b[j] {
		case '\\':
			return scanStringSlow(b, i)
		case '"':
			return j + 1
		}
	}
	return scanStringSlow(b, i)
}

func scanStringSlow(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		k += j
		escaped := false // by an odd run of backslashes before it
		for p := k - 1; p > i && b[p] == '\\'; p-- {
			escaped = !escaped
		}
		if !escaped {
			return k + 1
		}
		j = k + 1
	}
}

// scanValue returns the index just past the JSON value starting at b[i],
// or -1. It checks nesting and strings, not the full grammar: the
// handler's decoder (and Check's json.Valid before it reports
// anything) does that.
func scanValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = scanString(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
