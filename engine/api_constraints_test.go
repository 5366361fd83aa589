package engine_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

// rawRequest POSTs body to the engine over HTTP with the given
// X-Amz-Target, for requests no SDK sends (a wrong JSON type, a member the
// SDK requires), and returns the error code and message ("" on success).
func (e *env) rawRequest(target, body string) (code, msg string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.srv.Endpoint(), strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode == 200 {
		return "", ""
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		e.t.Fatalf("%s: error body %s: %v", target, b, err)
	}
	typ, _ := doc["__type"].(string)
	msg, _ = doc["message"].(string)
	return typ[strings.LastIndexByte(typ, '#')+1:], msg
}

const (
	notNull  = "failed to satisfy constraint: Member must not be null"
	namePat  = "failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+"
	nameMin  = "failed to satisfy constraint: Member must have length greater than or equal to 3"
	rccEnum  = "failed to satisfy constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]"
	limitMin = "failed to satisfy constraint: Member must have value greater than or equal to 1"
)

// TestShapeDynamoDB: every constraint violation of a request is reported
// at once, in DynamoDB's order and wording, before any semantic check (the
// tables named here do not exist, yet no case answers
// ResourceNotFoundException).
func TestShapeDynamoDB(t *testing.T) {
	e := newEnv(t, engine.Options{})
	db := e.rawDB() // the SDK without its client-side required-member check
	ctx := e.ctx
	key := item{"pk": S("a")}
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"CreateTable: nothing but a bad name", func() error {
			_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("abc;")})
			return err
		}, "3 validation errors detected: Value null at 'attributeDefinitions' " + notNull +
			"; Value 'abc;' at 'tableName' " + namePat + "; Value null at 'keySchema' " + notNull},
		{"CreateTable: empty throughput", func() error {
			_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("abc"),
				AttributeDefinitions: []types.AttributeDefinition{}, ProvisionedThroughput: &types.ProvisionedThroughput{}})
			return err
		}, "3 validation errors detected: Value null at 'provisionedThroughput.writeCapacityUnits' " + notNull +
			"; Value null at 'provisionedThroughput.readCapacityUnits' " + notNull + "; Value null at 'keySchema' " + notNull},
		{"CreateTable: key schema elements", func() error {
			_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("abc"),
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("a"), AttributeType: "SS"}},
				KeySchema: []types.KeySchemaElement{{KeyType: "HASH"}, {AttributeName: aws.String("a")},
					{AttributeName: aws.String("a"), KeyType: "Woop"}},
				BillingMode: "FREE"})
			return err
		}, "6 validation errors detected: Value 'SS' at 'attributeDefinitions.1.member.attributeType' failed to satisfy constraint: Member must satisfy enum value set: [B, N, S]" +
			"; Value 'FREE' at 'billingMode' failed to satisfy constraint: Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]" +
			"; Value '[KeySchemaElement(attributeName=null, keyType=HASH), KeySchemaElement(attributeName=a, keyType=null), KeySchemaElement(attributeName=a, keyType=Woop)]' at 'keySchema' failed to satisfy constraint: Member must have length less than or equal to 2" +
			"; Value null at 'keySchema.1.member.attributeName' " + notNull +
			"; Value null at 'keySchema.2.member.keyType' " + notNull +
			"; Value 'Woop' at 'keySchema.3.member.keyType' failed to satisfy constraint: Member must satisfy enum value set: [HASH, RANGE]"},
		{"CreateTable: index and stream members", func() error {
			_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("abc"), BillingMode: "PAY_PER_REQUEST",
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: "S"}},
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: "HASH"}},
				GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("g"),
					KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: "HASH"}},
					Projection: &types.Projection{ProjectionType: "SOME"}}},
				StreamSpecification: &types.StreamSpecification{StreamViewType: "NEW_IMAGE"}})
			return err
		}, "3 validation errors detected: Value 'g' at 'globalSecondaryIndexes.1.member.indexName' " + nameMin +
			"; Value 'SOME' at 'globalSecondaryIndexes.1.member.projection.projectionType' failed to satisfy constraint: Member must satisfy enum value set: [ALL, INCLUDE, KEYS_ONLY]" +
			"; Value null at 'streamSpecification.streamEnabled' " + notNull},
		// An empty name breaks only the minimum of a name-or-ARN (1), as
		// DynamoDB reports it (captured 2026-06).
		{"DescribeTable: empty name", func() error {
			_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("")})
			return err
		}, "1 validation error detected: Value '' at 'tableName' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"ListTables: limit and start name", func() error {
			_, err := e.db.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(101), ExclusiveStartTableName: aws.String(strings.Repeat("t", 256))})
			return err
		}, "2 validation errors detected: Value '" + strings.Repeat("t", 256) + "' at 'exclusiveStartTableName' failed to satisfy constraint: Member must have length less than or equal to 255" +
			"; Value '101' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 100"},
		{"UpdateTimeToLive: empty specification", func() error {
			_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("abc"), TimeToLiveSpecification: &types.TimeToLiveSpecification{}})
			return err
		}, "2 validation errors detected: Value null at 'timeToLiveSpecification.enabled' " + notNull +
			"; Value null at 'timeToLiveSpecification.attributeName' " + notNull},
		{"PutItem: four at once", func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("x"), ReturnValues: "SOME", ReturnConsumedCapacity: "ALL"})
			return err
		}, "4 validation errors detected: Value 'ALL' at 'returnConsumedCapacity' " + rccEnum +
			"; Value 'x' at 'tableName' " + nameMin + "; Value null at 'item' " + notNull +
			"; Value 'SOME' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]"},
		{"GetItem: no key, bad name", func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("a;b"), AttributesToGet: []string{}})
			return err
		}, "3 validation errors detected: Value '[]' at 'attributesToGet' failed to satisfy constraint: Member must have length greater than or equal to 1" +
			"; Value 'a;b' at 'tableName' " + namePat + "; Value null at 'key' " + notNull},
		{"DeleteItem: legacy members", func() error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("abc"), Key: key, ConditionalOperator: "XOR",
				Expected: map[string]types.ExpectedAttributeValue{"a": {ComparisonOperator: "ABOUT"}}, ReturnValuesOnConditionCheckFailure: "ALL_NEW"})
			return err
		}, "3 validation errors detected: Value 'XOR' at 'conditionalOperator' failed to satisfy constraint: Member must satisfy enum value set: [OR, AND]" +
			"; Value 'ABOUT' at 'expected.a.member.comparisonOperator' failed to satisfy constraint: Member must satisfy enum value set: [IN, NULL, BETWEEN, LT, NOT_CONTAINS, EQ, GT, NOT_NULL, NE, LE, BEGINS_WITH, GE, CONTAINS]" +
			"; Value 'ALL_NEW' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]"},
		{"UpdateItem: attribute update action", func() error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("abc"), Key: key,
				AttributeUpdates: map[string]types.AttributeValueUpdate{"n": {Action: "INCREMENT", Value: N("1")}}})
			return err
		}, "1 validation error detected: Value 'INCREMENT' at 'attributeUpdates.n.member.action' failed to satisfy constraint: Member must satisfy enum value set: [ADD, PUT, DELETE]"},
		// Query's Limit is named as sent, without its value (captured).
		{"Query: limit before table name", func() error {
			_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("a;"), Limit: aws.Int32(0), Select: "EVERYTHING"})
			return err
		}, "4 validation errors detected: Value at 'Limit' " + limitMin + "; Value 'a;' at 'tableName' " + namePat +
			"; Value 'a;' at 'tableName' " + nameMin +
			"; Value 'EVERYTHING' at 'select' failed to satisfy constraint: Member must satisfy enum value set: [SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]"},
		{"Query: key condition without operator", func() error {
			_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("abc"), IndexName: aws.String("i"),
				KeyConditions: map[string]types.Condition{"pk": {AttributeValueList: []types.AttributeValue{S("a")}}}})
			return err
		}, "2 validation errors detected: Value null at 'keyConditions.pk.member.comparisonOperator' " + notNull +
			"; Value 'i' at 'indexName' " + nameMin},
		{"Scan: segments", func() error {
			_, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("abc"), TotalSegments: aws.Int32(1000001), Segment: aws.Int32(-1)})
			return err
		}, "2 validation errors detected: Value '1000001' at 'totalSegments' failed to satisfy constraint: Member must have value less than or equal to 1000000" +
			"; Value '-1' at 'segment' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{"BatchGetItem: bad table name key", func() error {
			_, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"a;": {Keys: []item{key}}}})
			return err
		}, "1 validation error detected: Value '{a;=KeysAndAttributes(keys=[{pk={S=a}}], attributesToGet=null, consistentRead=null, projectionExpression=null, expressionAttributeNames=null)}' at 'requestItems' failed to satisfy constraint: " +
			"Map keys must satisfy constraint: [Member must have length less than or equal to 255, Member must have length greater than or equal to 3, Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+]"},
		{"BatchGetItem: no keys", func() error {
			_, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"abc": {}}, ReturnConsumedCapacity: "ALL"})
			return err
		}, "2 validation errors detected: Value 'ALL' at 'returnConsumedCapacity' " + rccEnum +
			"; Value null at 'requestItems.abc.member.keys' " + notNull},
		{"BatchWriteItem: empty request list", func() error {
			_, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"abc": {}}})
			return err
		}, "1 validation error detected: Value '{abc=[]}' at 'requestItems' failed to satisfy constraint: " +
			"Map value must satisfy constraint: [Member must have length less than or equal to 25, Member must have length greater than or equal to 1]"},
		{"BatchWriteItem: request without item", func() error {
			_, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
				"abc": {{PutRequest: &types.PutRequest{Item: key}}, {PutRequest: &types.PutRequest{}}}}})
			return err
		}, "1 validation error detected: Value null at 'requestItems.abc.member.2.member.putRequest.item' " + notNull},
		{"TransactWriteItems: empty", func() error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{}})
			return err
		}, "1 validation error detected: Value '[]' at 'transactItems' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"TransactWriteItems: 101", func() error {
			items := make([]types.TransactWriteItem, 101)
			for i := range items {
				items[i].Put = &types.Put{TableName: aws.String("abc"), Item: key}
			}
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			return err
		}, "1 validation error detected: Value '[" + strings.TrimSuffix(strings.Repeat("TransactWriteItem(conditionCheck=null, put=Put(item={pk={S=a}}, tableName=abc, "+
			"conditionExpression=null, expressionAttributeNames=null, expressionAttributeValues=null, returnValuesOnConditionCheckFailure=null), delete=null, update=null), ", 101), ", ") +
			"]' at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"TransactWriteItems: nested members", func() error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String("abc"), Item: key}},
				{Put: &types.Put{TableName: aws.String("a")}},
				{Update: &types.Update{TableName: aws.String("abc"), Key: key}}}})
			return err
		}, "3 validation errors detected: Value null at 'transactItems.2.member.put.item' " + notNull +
			"; Value 'a' at 'transactItems.2.member.put.tableName' " + nameMin +
			"; Value null at 'transactItems.3.member.update.updateExpression' " + notNull},
		{"TransactGetItems: no get", func() error {
			_, err := db.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{{}}})
			return err
		}, "1 validation error detected: Value null at 'transactItems.1.member.get' " + notNull},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if errCode(err) != "ValidationException" || errMsg(err) != c.want {
				t.Errorf("got %s: %s\nwant %s", errCode(err), errMsg(err), c.want)
			}
		})
	}
}

// TestShapeWire covers what the SDK cannot send: wrong JSON types (a
// SerializationException, before any constraint), DynamoDB's cap of ten
// listed violations, and operations the engine may not serve yet.
func TestShapeWire(t *testing.T) {
	e := newEnv(t, engine.Options{})
	const ddb = "DynamoDB_20120810."
	manyNulls := `{"TableName":"abc","AttributeDefinitions":[],"KeySchema":[{},{},{},{},{},{}]}`
	cases := []struct {
		name, target, body, code, want string
	}{
		{"a wrong type wins over constraints", ddb + "Query", `{"TableName":"x;","Limit":"ten"}`, "SerializationException", ""},
		{"a wrong type in an unconstrained member wins too", ddb + "GetItem", `{"TableName":"x;","ConsistentRead":"yes"}`, "SerializationException", ""},
		{"malformed JSON wins over constraints", ddb + "PutItem", `{"TableName":"x;",`, "SerializationException", ""},
		{"an empty body is an empty request", ddb + "DescribeTable", ``, "ValidationException",
			"1 validation error detected: Value null at 'tableName' " + notNull},
		{"JSON null is a missing member", ddb + "GetItem", `{"TableName":null,"Key":null}`, "ValidationException",
			"2 validation errors detected: Value null at 'tableName' " + notNull + "; Value null at 'key' " + notNull},
		{"at most ten violations are listed", ddb + "CreateTable", manyNulls, "ValidationException", ""},
		{"escaped quotes inside an item are skipped over", ddb + "PutItem",
			`{"TableName":"a;","Item":{"s":{"S":"q\"u\\"},"t":{"S":"` + strings.Repeat(`\"`, 20) + `"}},"ReturnValues":"X"}`, "ValidationException",
			"3 validation errors detected: Value 'a;' at 'tableName' " + namePat + "; Value 'a;' at 'tableName' " + nameMin +
				"; Value 'X' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]"},
		{"escaped strings are decoded", ddb + "DescribeTable", `{"TableName":"a\u003bb"}`, "ValidationException",
			"1 validation error detected: Value 'a;b' at 'tableName' " + namePat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, msg := e.rawRequest(c.target, c.body)
			if code != c.code || (c.want != "" && msg != c.want) {
				t.Errorf("got %s: %s\nwant %s: %s", code, msg, c.code, c.want)
			}
		})
	}
	_, msg := e.rawRequest(ddb+"CreateTable", manyNulls)
	if !strings.HasPrefix(msg, "10 validation errors detected: Value '[KeySchemaElement(attributeName=null, keyType=null), ") ||
		strings.Count(msg, "; ") != 9 {
		t.Errorf("ten violations: %s", msg)
	}
}

// TestShapePartiQL checks the PartiQL operations' constraints once the
// engine serves them.
func TestShapePartiQL(t *testing.T) {
	e := newEnv(t, engine.Options{})
	const ddb = "DynamoDB_20120810."
	stmts := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(`{"Statement":"SELECT * FROM t"},`, n), ",") + "]"
	}
	cases := []struct {
		name, target, body, want string
	}{
		{"ExecuteStatement", ddb + "ExecuteStatement", `{"Statement":"","Limit":0,"Parameters":[]}`,
			"3 validation errors detected: Value '' at 'statement' failed to satisfy constraint: Member must have length greater than or equal to 1" +
				"; Value '[]' at 'parameters' failed to satisfy constraint: Member must have length greater than or equal to 1" +
				"; Value '0' at 'limit' " + limitMin},
		{"ExecuteStatement: long statement", ddb + "ExecuteStatement", `{"Statement":"` + strings.Repeat("s", 8193) + `"}`,
			"1 validation error detected: Value '" + strings.Repeat("s", 8193) + "' at 'statement' failed to satisfy constraint: Member must have length less than or equal to 8192"},
		{"BatchExecuteStatement: 26", ddb + "BatchExecuteStatement", `{"Statements":` + stmts(26) + `}`,
			"1 validation error detected: Value '[" + strings.TrimSuffix(strings.Repeat("BatchStatementRequest(statement=SELECT * FROM t, parameters=null, consistentRead=null, returnValuesOnConditionCheckFailure=null), ", 26), ", ") +
				"]' at 'statements' failed to satisfy constraint: Member must have length less than or equal to 25"},
		{"BatchExecuteStatement: no statement", ddb + "BatchExecuteStatement", `{"Statements":[{}]}`,
			"1 validation error detected: Value null at 'statements.1.member.statement' " + notNull},
		{"ExecuteTransaction: none", ddb + "ExecuteTransaction", `{"TransactStatements":[],"ClientRequestToken":""}`,
			"2 validation errors detected: Value '[]' at 'transactStatements' failed to satisfy constraint: Member must have length greater than or equal to 1" +
				"; Value '' at 'clientRequestToken' failed to satisfy constraint: Member must have length greater than or equal to 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, msg := e.rawRequest(c.target, c.body)
			if code == "UnknownOperationException" {
				t.Skip("the engine does not serve " + c.target + " yet")
			}
			if code != "ValidationException" || msg != c.want {
				t.Errorf("got %s: %s\nwant %s", code, msg, c.want)
			}
		})
	}
}

// BenchmarkShapePutItem measures a PutItem of a 64 KB item through
// ServeHTTP up to the handler's table lookup (the table does not exist):
// the constraint check's byte scan plus the handler's decode.
func BenchmarkShapePutItem(b *testing.B) {
	eng, err := engine.New(engine.Options{TTLInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	body := fmt.Sprintf(`{"TableName":"nope","Item":{"pk":{"S":"a"},"blob":{"S":%q}},"ReturnValues":"NONE"}`, strings.Repeat("x", 64<<10))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		post(eng, "DynamoDB_20120810.PutItem", body)
	}
}
