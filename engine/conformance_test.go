package engine_test

// Conformance with DynamoDB's recorded answers: each test pins one rule
// where the engine used to answer differently, with the exact error type
// and message captured from the service (the public parity suite and
// dynalite's recordings).

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

// wantErr fails t unless err has the code and exactly the message.
func wantErr(t *testing.T, what string, err error, code, msg string) {
	t.Helper()
	if errCode(err) != code || errMsg(err) != msg {
		t.Errorf("%s: got %s %q\nwant %s %q", what, errCode(err), errMsg(err), code, msg)
	}
}

func TestConformanceUpdateTableSameThroughput(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("cst", "", func(in *dynamodb.CreateTableInput) {
		in.BillingMode = types.BillingModeProvisioned
		in.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(5), WriteCapacityUnits: aws.Int64(7)}
	})
	update := func(r, w int64) error {
		_, err := e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("cst"),
			ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(r), WriteCapacityUnits: aws.Int64(w)}})
		return err
	}
	wantErr(t, "unchanged", update(5, 7), "ValidationException",
		"The provisioned throughput for the table will not change. The requested value equals the current value. "+
			"Current ReadCapacityUnits provisioned for the table: 5. Requested ReadCapacityUnits: 5. "+
			"Current WriteCapacityUnits provisioned for the table: 7. Requested WriteCapacityUnits: 7. "+
			"Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits.")
	if err := update(5, 8); err != nil {
		t.Fatalf("a changed write capacity: %v", err)
	}
}

func TestConformanceTagsOtherAccount(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("cta", "", nil)
	// The table's name in another account: denied, not looked up.
	arn := "arn:aws:dynamodb:us-east-1:123456789012:table/cta"
	denied := func(action string) string {
		return "User: arn:aws:iam::000000000000:root is not authorized to perform: dynamodb:" + action + " on resource: " + arn
	}
	_, err := e.db.ListTagsOfResource(e.ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: &arn})
	wantErr(t, "list", err, "AccessDeniedException", denied("ListTagsOfResource"))
	_, err = e.db.TagResource(e.ctx, &dynamodb.TagResourceInput{ResourceArn: &arn, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	wantErr(t, "tag", err, "AccessDeniedException", denied("TagResource"))
	_, err = e.db.UntagResource(e.ctx, &dynamodb.UntagResourceInput{ResourceArn: &arn, TagKeys: []string{"k"}})
	wantErr(t, "untag", err, "AccessDeniedException", denied("UntagResource"))
}

func TestConformanceItemOpsTableNotFound(t *testing.T) {
	e := newEnv(t, engine.Options{})
	key := item{"pk": S("a")}
	name := aws.String("nope")
	for op, call := range map[string]func() error{
		"GetItem": func() error {
			_, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: name, Key: key})
			return err
		},
		"PutItem": func() error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: name, Item: key})
			return err
		},
		"DeleteItem": func() error {
			_, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: name, Key: key})
			return err
		},
		"UpdateItem": func() error {
			_, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: name, Key: key, UpdateExpression: aws.String("SET v = :v"),
				ExpressionAttributeValues: item{":v": N("1")}})
			return err
		},
		"Query": func() error {
			_, err := e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: name, KeyConditionExpression: aws.String("pk = :v"), ExpressionAttributeValues: item{":v": S("a")}})
			return err
		},
		"Scan": func() error { _, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: name}); return err },
		"BatchGetItem": func() error {
			_, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"nope": {Keys: []item{key}}}})
			return err
		},
		"BatchWriteItem": func() error {
			_, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"nope": {{PutRequest: &types.PutRequest{Item: key}}}}})
			return err
		},
		"TransactGetItems": func() error {
			_, err := e.db.TransactGetItems(e.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{{Get: &types.Get{TableName: name, Key: key}}}})
			return err
		},
		"TransactWriteItems": func() error {
			_, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: name, Item: key}}}})
			return err
		},
	} {
		wantErr(t, op, call(), "ResourceNotFoundException", "Requested resource not found")
	}
	// The table operations name the table.
	_, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: name})
	wantErr(t, "DescribeTable", err, "ResourceNotFoundException", "Requested resource not found: Table: nope not found")
}

func TestConformanceRequiredFirst(t *testing.T) {
	e := newEnv(t, engine.Options{})
	db := e.rawDB() // the SDK without its client-side required-member check
	_, err := db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{}})
	wantErr(t, "BatchGetItem", err, "ValidationException", "The requestItems parameter is required for BatchGetItem")
	_, err = db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{}})
	wantErr(t, "BatchWriteItem", err, "ValidationException", "The requestItems parameter is required for BatchWriteItem")
	_, err = db.CreateTable(e.ctx, &dynamodb.CreateTableInput{BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}}})
	wantErr(t, "CreateTable", err, "ValidationException", "The parameter 'TableName' is required but was not present in the request")
	// Even with every other member missing too, and as JSON null.
	code, msg := e.rawRequest("DynamoDB_20120810.CreateTable", `{"TableName":null}`)
	if code != "ValidationException" || msg != "The parameter 'TableName' is required but was not present in the request" {
		t.Errorf("CreateTable with a null name: %s %q", code, msg)
	}
}

func TestConformanceCreateTableKeyAttributeTwice(t *testing.T) {
	e := newEnv(t, engine.Options{})
	_, err := e.db.CreateTable(e.ctx, &dynamodb.CreateTableInput{TableName: aws.String("ctk"), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeRange}}})
	wantErr(t, "pk twice", err, "ValidationException", "Invalid KeySchema: Some index key attribute have no definition")
}

func TestConformancePutItemEmptyTableName(t *testing.T) {
	e := newEnv(t, engine.Options{})
	_, err := e.rawDB().PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(""), Item: item{"pk": S("a")}})
	wantErr(t, "empty name", err, "ValidationException",
		"1 validation error detected: Value '' at 'tableName' failed to satisfy constraint: Member must have length greater than or equal to 1")
}

func TestConformanceValuesWithoutExpression(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("cve", "", nil)
	table, key, values := aws.String("cve"), item{"pk": S("a")}, item{":v": S("x")}
	const prefix = "ExpressionAttributeValues can only be specified when using expressions: "
	for _, c := range []struct {
		name, null string
		call       func() error
	}{
		{"PutItem", "ConditionExpression is null", func() error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: table, Item: key, ExpressionAttributeValues: values})
			return err
		}},
		{"UpdateItem", "UpdateExpression and ConditionExpression are null", func() error {
			_, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: table, Key: key, ExpressionAttributeValues: values})
			return err
		}},
		{"Query", "FilterExpression and KeyConditionExpression are null", func() error {
			_, err := e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: table, ExpressionAttributeValues: values,
				KeyConditions: map[string]types.Condition{"pk": {ComparisonOperator: types.ComparisonOperatorEq, AttributeValueList: []types.AttributeValue{S("a")}}}})
			return err
		}},
		// A ProjectionExpression takes no values.
		{"Scan", "FilterExpression is null", func() error {
			_, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: table, ProjectionExpression: aws.String("pk"), ExpressionAttributeValues: values})
			return err
		}},
		{"TransactWriteItems", "ConditionExpression is null", func() error {
			_, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Delete: &types.Delete{TableName: table, Key: key, ExpressionAttributeValues: values}}}})
			return err
		}},
	} {
		wantErr(t, c.name, c.call(), "ValidationException", prefix+c.null)
	}
}

func TestConformanceQueryLimitZero(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("cql", "S", nil)
	_, err := e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("cql"), KeyConditionExpression: aws.String("pk = :v"),
		ExpressionAttributeValues: item{":v": S("a")}, Limit: aws.Int32(0)})
	wantErr(t, "Limit 0", err, "ValidationException",
		"1 validation error detected: Value at 'Limit' failed to satisfy constraint: Member must have value greater than or equal to 1")
}

func TestConformanceTransactGetKeyMismatch(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("ctg", "S", nil)
	get := func(key item) types.TransactGetItem {
		return types.TransactGetItem{Get: &types.Get{TableName: aws.String("ctg"), Key: key}}
	}
	_, err := e.db.TransactGetItems(e.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
		get(item{"pk": S("a"), "sk": S("1")}), get(item{"pk": S("b")}), get(item{})}})
	wantErr(t, "missing key attributes", err, "TransactionCanceledException",
		"Transaction cancelled, please refer cancellation reasons for specific reasons [None, ValidationError, ValidationError]")
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		t.Fatalf("not a TransactionCanceledException: %v", err)
	}
	var got []string
	for _, r := range tc.CancellationReasons {
		got = append(got, aws.ToString(r.Code)+": "+aws.ToString(r.Message))
	}
	const mismatch = "ValidationError: The provided key element does not match the schema"
	if want := []string{"None: ", mismatch, mismatch}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("CancellationReasons = %q, want %q", got, want)
	}
}

func TestConformanceShardIteratorAtFreshShardStart(t *testing.T) {
	e, arn := streamEnv(t, engine.Options{StreamShards: 1}, types.StreamViewTypeKeysOnly)
	sh := e.shards(arn)[0]
	start := sh.SequenceNumberRange.StartingSequenceNumber
	iter := func(typ stypes.ShardIteratorType) *string {
		out, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId,
			ShardIteratorType: typ, SequenceNumber: start})
		if err != nil {
			t.Fatalf("%s %s of an empty shard: %v", typ, aws.ToString(start), err)
		}
		return out.ShardIterator
	}
	at, after := iter(stypes.ShardIteratorTypeAtSequenceNumber), iter(stypes.ShardIteratorTypeAfterSequenceNumber)
	e.put("str1", item{"pk": S("a"), "sk": N("1")})
	e.put("str1", item{"pk": S("a"), "sk": N("2")})
	read := func(it *string) []string {
		out, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []string
		for _, r := range out.Records {
			seqs = append(seqs, aws.ToString(r.Dynamodb.SequenceNumber))
		}
		return seqs
	}
	all := read(at)
	if len(all) != 2 || all[0] != aws.ToString(start) {
		t.Fatalf("AT_SEQUENCE_NUMBER of the start read %v, want two records from %s", all, aws.ToString(start))
	}
	if got := read(after); len(got) != 1 || got[0] != all[1] {
		t.Fatalf("AFTER_SEQUENCE_NUMBER of the start read %v, want [%s]", got, all[1])
	}
}

func TestConformanceBatchTableByNameAndARN(t *testing.T) {
	e := newEnv(t, engine.Options{})
	arn := aws.ToString(e.createTable("cbn", "", nil).TableArn)
	put := func(pk string) types.WriteRequest {
		return types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(pk)}}}
	}
	// One item under both spellings of one table is a duplicate.
	_, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"cbn": {put("a")}, arn: {put("a")}}})
	wantErr(t, "BatchWriteItem", err, "ValidationException", "Provided list of item keys contains duplicates")
	_, err = e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		"cbn": {Keys: []item{{"pk": S("a")}}}, arn: {Keys: []item{{"pk": S("a")}}}}})
	wantErr(t, "BatchGetItem", err, "ValidationException", "Provided list of item keys contains duplicates")
	if it := e.get("cbn", item{"pk": S("a")}); it != nil {
		t.Fatalf("the refused batch wrote %v", it)
	}
	// Distinct items under the two spellings are written.
	if _, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"cbn": {put("a")}, arn: {put("b")}}}); err != nil {
		t.Fatal(err)
	}
	if e.get("cbn", item{"pk": S("a")}) == nil || e.get("cbn", item{"pk": S("b")}) == nil {
		t.Fatal("a batch naming the table both ways lost a write")
	}
}

// projEnv makes table "cpj" (pk S, sk N) with GSI "keys" (g; KEYS_ONLY),
// GSI "incl" (g; INCLUDE x) and LSI "local" (pk, l; KEYS_ONLY), and two
// items in partition "p" that every index holds, each with x and y.
func projEnv(t *testing.T) *env {
	e := newEnv(t, engine.Options{})
	gsi := func(name string, p *types.Projection) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{IndexName: aws.String(name), Projection: p,
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}}}
	}
	e.createTable("cpj", "N", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String("l"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{
			gsi("keys", &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}),
			gsi("incl", &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"x"}})}
		in.LocalSecondaryIndexes = []types.LocalSecondaryIndex{{IndexName: aws.String("local"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("l"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}}
	})
	for i, l := range []string{"l1", "l2"} {
		e.put("cpj", item{"pk": S("p"), "sk": N(fmt.Sprint(i)), "g": S("g"), "l": S(l), "x": N("7"), "y": S("big")})
	}
	return e
}

// indexRead runs a Query (the index's hash key = its value in projEnv,
// unless mod sets KeyConditions) or a Scan of index ix of "cpj" (the table
// for ""), with mod setting the rest, and returns the items and Count.
func (e *env) indexRead(query bool, ix string, mod func(q *dynamodb.QueryInput)) ([]item, int32, error) {
	q := &dynamodb.QueryInput{TableName: aws.String("cpj")}
	if ix != "" {
		q.IndexName = aws.String(ix)
	}
	mod(q)
	if !query {
		out, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: q.TableName, IndexName: q.IndexName,
			FilterExpression: q.FilterExpression, ProjectionExpression: q.ProjectionExpression, Select: q.Select,
			ExpressionAttributeNames: q.ExpressionAttributeNames, ExpressionAttributeValues: q.ExpressionAttributeValues,
			AttributesToGet: q.AttributesToGet})
		if err != nil {
			return nil, 0, err
		}
		return out.Items, out.Count, nil
	}
	hash, v := "g", S("g")
	if ix == "local" || ix == "" {
		hash, v = "pk", S("p")
	}
	if q.KeyConditions == nil {
		q.KeyConditionExpression = aws.String(hash + " = :h")
		if q.ExpressionAttributeValues == nil {
			q.ExpressionAttributeValues = item{}
		}
		q.ExpressionAttributeValues[":h"] = v
	}
	out, err := e.db.Query(e.ctx, q)
	if err != nil {
		return nil, 0, err
	}
	return out.Items, out.Count, nil
}

// A filter on a KEYS_ONLY or INCLUDE GSI is evaluated on the index item,
// so an attribute the index does not project is missing to it; a filter
// on a local index sees the attributes DynamoDB fetches from the table.
func TestConformanceIndexFilterSeesProjection(t *testing.T) {
	e := projEnv(t)
	cases := []struct {
		ix, filter string
		want       int32
	}{
		{"keys", "attribute_exists(x)", 0},
		{"keys", "attribute_exists(l)", 0},
		{"keys", "attribute_exists(sk)", 2}, // table keys are always projected
		{"incl", "x = :seven", 2},
		{"incl", "attribute_exists(y)", 0},
		{"incl", "attribute_not_exists(y)", 2},
		{"local", "x = :seven", 2},
		{"local", "attribute_exists(y)", 2},
	}
	for _, c := range cases {
		for _, query := range []bool{true, false} {
			_, n, err := e.indexRead(query, c.ix, func(q *dynamodb.QueryInput) {
				q.FilterExpression = aws.String(c.filter)
				if strings.Contains(c.filter, ":seven") {
					q.ExpressionAttributeValues = item{":seven": N("7")}
				}
			})
			if err != nil || n != c.want {
				t.Errorf("%s on %s (query %v): Count %d, %v; want %d", c.filter, c.ix, query, n, err, c.want)
			}
		}
	}
}

// A ProjectionExpression or AttributesToGet naming attributes a KEYS_ONLY
// or INCLUDE GSI does not project is refused, naming each missing
// top-level attribute once; a local index fetches them from the table.
func TestConformanceGSIProjectionNotProjected(t *testing.T) {
	e := projEnv(t)
	notProjected := func(ix, names string) string {
		return "One or more parameter values were invalid: Global secondary index " + ix + " does not project [" + names + "]"
	}
	for _, query := range []bool{true, false} {
		_, _, err := e.indexRead(query, "keys", func(q *dynamodb.QueryInput) { q.ProjectionExpression = aws.String("pk, x") })
		wantErr(t, fmt.Sprintf("keys, x (query %v)", query), err, "ValidationException", notProjected("keys", "x"))
		_, _, err = e.indexRead(query, "incl", func(q *dynamodb.QueryInput) {
			q.ProjectionExpression = aws.String("x, y.z, #w, y.q, l")
			q.ExpressionAttributeNames = map[string]string{"#w": "w"}
		})
		wantErr(t, fmt.Sprintf("incl, y w l (query %v)", query), err, "ValidationException", notProjected("incl", "y, w, l"))
		// What the index projects is returned.
		items, _, err := e.indexRead(query, "incl", func(q *dynamodb.QueryInput) { q.ProjectionExpression = aws.String("sk, g, x") })
		if err != nil || len(items) != 2 || len(items[0]) != 3 || sOf(items[0], "x") != "7" {
			t.Errorf("incl, projected attributes (query %v): %v, %v", query, items, err)
		}
		// A local index fetches y from the table.
		items, _, err = e.indexRead(query, "local", func(q *dynamodb.QueryInput) { q.ProjectionExpression = aws.String("y") })
		if err != nil || len(items) != 2 || sOf(items[0], "y") != "big" {
			t.Errorf("local, y (query %v): %v, %v", query, items, err)
		}
	}
	// AttributesToGet is held to the same rule.
	_, _, err := e.indexRead(false, "keys", func(q *dynamodb.QueryInput) { q.AttributesToGet = []string{"x", "pk", "y"} })
	wantErr(t, "AttributesToGet", err, "ValidationException", notProjected("keys", "x, y"))
}

// A PartiQL SELECT on a KEYS_ONLY or INCLUDE GSI is held to the same rule
// as a ProjectionExpression: a column the index does not project is
// refused, each missing top-level name once; * and projected columns read.
func TestConformancePartiQLGSIProjection(t *testing.T) {
	e := projEnv(t)
	run := func(stmt string) ([]item, error) {
		out, err := e.db.ExecuteStatement(e.ctx, &dynamodb.ExecuteStatementInput{Statement: aws.String(stmt)})
		if err != nil {
			return nil, err
		}
		return out.Items, nil
	}
	msg := "One or more parameter values were invalid: Global secondary index %s does not project [%s]"
	_, err := run(`SELECT pk, x, y.z, y FROM "cpj"."keys" WHERE g = 'g'`)
	wantErr(t, "keys: x, y", err, "ValidationException", fmt.Sprintf(msg, "keys", "x, y"))
	_, err = run(`SELECT x, w FROM "cpj"."incl"`)
	wantErr(t, "incl: w", err, "ValidationException", fmt.Sprintf(msg, "incl", "w"))
	for _, stmt := range []string{
		`SELECT pk, sk, g, x FROM "cpj"."incl" WHERE g = 'g'`,
		`SELECT * FROM "cpj"."keys" WHERE g = 'g'`,
		`SELECT y FROM "cpj"."local" WHERE pk = 'p'`,
	} {
		if items, err := run(stmt); err != nil || len(items) != 2 {
			t.Errorf("%s: %v, %v", stmt, items, err)
		}
	}
}

// Select=ALL_ATTRIBUTES is refused on a GSI that does not project ALL, on
// Query and Scan alike; on a local index it fetches the whole item.
func TestConformanceGSISelectAllAttributes(t *testing.T) {
	e := projEnv(t)
	for _, query := range []bool{true, false} {
		for _, ix := range []string{"keys", "incl"} {
			_, _, err := e.indexRead(query, ix, func(q *dynamodb.QueryInput) { q.Select = types.SelectAllAttributes })
			wantErr(t, fmt.Sprintf("%s (query %v)", ix, query), err, "ValidationException",
				"One or more parameter values were invalid: Select type ALL_ATTRIBUTES is not supported for global secondary index "+ix+" because its projection type is not ALL")
		}
		items, _, err := e.indexRead(query, "local", func(q *dynamodb.QueryInput) { q.Select = types.SelectAllAttributes })
		if err != nil || len(items) != 2 || len(items[0]) != 6 {
			t.Errorf("local, ALL_ATTRIBUTES (query %v): %v, %v", query, items, err)
		}
	}
}

// The "aws:" prefix is reserved in any case, in TagResource, CreateTable
// and UntagResource alike; "aws" elsewhere in a key is fine. Nothing of a
// refused request is applied.
func TestConformanceTagKeyAWSPrefixAnyCase(t *testing.T) {
	e := newEnv(t, engine.Options{})
	arn := aws.ToString(e.createTable("ctp", "", nil).TableArn)
	reserved := func(k string) string { return "Tag Key cannot be prefixed with aws:, Key: " + k }
	for _, k := range []string{"aws:owner", "AWS:owner", "Aws:owner", "aWS:"} {
		_, err := e.db.TagResource(e.ctx, &dynamodb.TagResourceInput{ResourceArn: &arn, Tags: []types.Tag{tg("ok", "1"), tg(k, "v")}})
		wantErr(t, "TagResource "+k, err, "ValidationException", reserved(k))
		_, err = e.db.UntagResource(e.ctx, &dynamodb.UntagResourceInput{ResourceArn: &arn, TagKeys: []string{"ok", k}})
		wantErr(t, "UntagResource "+k, err, "ValidationException", reserved(k))
	}
	_, err := e.db.CreateTable(e.ctx, &dynamodb.CreateTableInput{TableName: aws.String("ctp2"), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		Tags:                 []types.Tag{tg("AWS:cost", "v")}})
	wantErr(t, "CreateTable AWS:cost", err, "ValidationException", reserved("AWS:cost"))
	if got := e.listTags(arn); len(got) != 0 {
		t.Fatalf("refused requests left tags %q", renderTags(got))
	}
	ok := []types.Tag{tg("myaws:owner", "1"), tg("aws", "2"), tg("aws-owner", "3"), tg("x:aws:y", "4")}
	if _, err := e.db.TagResource(e.ctx, &dynamodb.TagResourceInput{ResourceArn: &arn, Tags: ok}); err != nil {
		t.Fatalf("keys that only contain aws: %v", err)
	}
	if got := renderTags(e.listTags(arn)); got != "myaws:owner=1 aws=2 aws-owner=3 x:aws:y=4" {
		t.Fatalf("tags %q", got)
	}
}

// A key holds up to 128 and a value up to 256 Unicode characters, however
// many bytes they take in UTF-8; one more is refused, naming the key or
// value.
func TestConformanceTagLengthsInCharacters(t *testing.T) {
	e := newEnv(t, engine.Options{})
	arn := aws.ToString(e.createTable("ctl", "", nil).TableArn)
	key, value := strings.Repeat("é", 128), strings.Repeat("表", 256) // 256 and 768 bytes
	tag := func(k, v string) error {
		_, err := e.db.TagResource(e.ctx, &dynamodb.TagResourceInput{ResourceArn: &arn, Tags: []types.Tag{tg(k, v)}})
		return err
	}
	if err := tag(key, value); err != nil {
		t.Fatalf("128-character key, 256-character value: %v", err)
	}
	wantErr(t, "129-character key", tag(key+"é", "v"), "ValidationException", "The Tag Key provided is invalid, Key: "+key+"é")
	wantErr(t, "257-character value", tag("k", value+"表"), "ValidationException", "The Tag Value provided is invalid, Value: "+value+"表")
	_, err := e.db.UntagResource(e.ctx, &dynamodb.UntagResourceInput{ResourceArn: &arn, TagKeys: []string{key + "é"}})
	wantErr(t, "untag a 129-character key", err, "ValidationException", "The Tag Key provided is invalid, Key: "+key+"é")
	if got := e.listTags(arn); len(got) != 1 || aws.ToString(got[0].Key) != key || aws.ToString(got[0].Value) != value {
		t.Fatalf("tags %q", renderTags(got))
	}
}

// Select and a projection must agree: DynamoDB refuses a projection with
// any Select but SPECIFIC_ATTRIBUTES (before the GSI's own ALL_ATTRIBUTES
// rule), SPECIFIC_ATTRIBUTES without one and ALL_PROJECTED_ATTRIBUTES
// without an index; Query's messages carry "1 validation error detected: ",
// Scan's do not.
func TestConformanceSelectAndProjection(t *testing.T) {
	e := projEnv(t)
	pe := func(sel types.Select, expr string) func(q *dynamodb.QueryInput) {
		return func(q *dynamodb.QueryInput) { q.Select, q.ProjectionExpression = sel, aws.String(expr) }
	}
	cases := []struct {
		name, ix string
		mod      func(q *dynamodb.QueryInput)
		msg      string
	}{
		{"SPECIFIC_ATTRIBUTES alone", "", func(q *dynamodb.QueryInput) { q.Select = types.SelectSpecificAttributes },
			"Must specify the AttributesToGet or ProjectionExpression when choosing to get SPECIFIC_ATTRIBUTES"},
		{"ALL_ATTRIBUTES with a projection", "", pe(types.SelectAllAttributes, "pk"),
			"Cannot specify the ProjectionExpression when choosing to get ALL_ATTRIBUTES"},
		{"ALL_ATTRIBUTES with a projection on a KEYS_ONLY GSI", "keys", pe(types.SelectAllAttributes, "pk"),
			"Cannot specify the ProjectionExpression when choosing to get ALL_ATTRIBUTES"},
		{"ALL_PROJECTED_ATTRIBUTES with a projection", "incl", pe(types.SelectAllProjectedAttributes, "x"),
			"Cannot specify the ProjectionExpression when choosing to get ALL_PROJECTED_ATTRIBUTES"},
		{"COUNT with a projection", "local", pe(types.SelectCount, "pk"),
			"Cannot specify the ProjectionExpression when choosing to get only the Count"},
		{"ALL_PROJECTED_ATTRIBUTES on the table", "", func(q *dynamodb.QueryInput) { q.Select = types.SelectAllProjectedAttributes },
			"ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName"},
	}
	for _, c := range cases {
		for _, query := range []bool{true, false} {
			_, _, err := e.indexRead(query, c.ix, c.mod)
			msg := c.msg
			if query {
				msg = "1 validation error detected: " + msg
			}
			wantErr(t, fmt.Sprintf("%s (query %v)", c.name, query), err, "ValidationException", msg)
		}
	}
	// AttributesToGet is named as such.
	attrs := func(q *dynamodb.QueryInput) {
		q.Select, q.AttributesToGet = types.SelectCount, []string{"pk"}
		q.KeyConditions = map[string]types.Condition{"pk": {ComparisonOperator: types.ComparisonOperatorEq, AttributeValueList: []types.AttributeValue{S("p")}}}
	}
	_, _, err := e.indexRead(true, "", attrs)
	wantErr(t, "Query COUNT with AttributesToGet", err, "ValidationException", "1 validation error detected: Cannot specify the AttributesToGet when choosing to get only the Count")
	_, _, err = e.indexRead(false, "", func(q *dynamodb.QueryInput) { q.Select, q.AttributesToGet = types.SelectAllAttributes, []string{"pk"} })
	wantErr(t, "Scan ALL_ATTRIBUTES with AttributesToGet", err, "ValidationException", "Cannot specify the AttributesToGet when choosing to get ALL_ATTRIBUTES")
	// What agrees is served.
	for _, query := range []bool{true, false} {
		if _, n, err := e.indexRead(query, "keys", func(q *dynamodb.QueryInput) { q.Select = types.SelectAllProjectedAttributes }); err != nil || n != 2 {
			t.Errorf("ALL_PROJECTED_ATTRIBUTES on a GSI (query %v): %d, %v", query, n, err)
		}
		if items, _, err := e.indexRead(query, "", pe(types.SelectSpecificAttributes, "x")); err != nil || len(items) != 2 || len(items[0]) != 1 {
			t.Errorf("SPECIFIC_ATTRIBUTES with a projection (query %v): %v, %v", query, items, err)
		}
	}
}
