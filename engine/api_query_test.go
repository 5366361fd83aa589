package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

// queryEnv makes table "q" (pk S, sk N) with GSI "by-g" (g S, n N; KEYS_ONLY)
// and LSI "by-l" (pk, l S; INCLUDE x), and 3 partitions of 10 items.
func queryEnv(t *testing.T) *env {
	e := newEnv(t, engine.Options{})
	e.createTable("qtbl", "N", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String("n"), AttributeType: types.ScalarAttributeTypeN},
			types.AttributeDefinition{AttributeName: aws.String("l"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{IndexName: aws.String("by-g"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("n"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}}
		in.LocalSecondaryIndexes = []types.LocalSecondaryIndex{{IndexName: aws.String("by-l"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("l"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"x"}}}}
	})
	for p := 0; p < 3; p++ {
		for i := 0; i < 10; i++ {
			it := item{"pk": S(fmt.Sprintf("p%d", p)), "sk": N(fmt.Sprintf("%d", i-5)), "x": N(fmt.Sprint(i)), "y": S("big")}
			if i%2 == 0 {
				it["g"] = S("even")
				it["n"] = N(fmt.Sprint(p*100 + i))
			}
			if i < 4 {
				it["l"] = S(fmt.Sprintf("l%02d", 9-i))
			}
			e.put("qtbl", it)
		}
	}
	return e
}

func keysOf(items []item, name string) string {
	var s []string
	for _, it := range items {
		s = append(s, sOf(it, name))
	}
	return strings.Join(s, ",")
}

func TestQuery(t *testing.T) {
	e := queryEnv(t)
	q := func(in dynamodb.QueryInput) *dynamodb.QueryOutput {
		t.Helper()
		in.TableName = aws.String("qtbl")
		out, err := e.db.Query(e.ctx, &in)
		if err != nil {
			t.Fatalf("Query %s: %v", aws.ToString(in.KeyConditionExpression), err)
		}
		return out
	}
	v := func(kv ...any) item {
		m := item{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return m
	}
	cases := []struct {
		name string
		in   dynamodb.QueryInput
		want string
	}{
		{"hash only", dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: v(":p", S("p1"))}, "-5,-4,-3,-2,-1,0,1,2,3,4"},
		{"backward", dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND sk < :z"), ScanIndexForward: aws.Bool(false), ExpressionAttributeValues: v(":p", S("p1"), ":z", N("-2"))}, "-3,-4,-5"},
		{"between", dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND sk BETWEEN :a AND :b"), ExpressionAttributeValues: v(":p", S("p0"), ":a", N("-1"), ":b", N("1.5"))}, "-1,0,1"},
		{">=", dynamodb.QueryInput{KeyConditionExpression: aws.String("#k = :p AND sk >= :a"), ExpressionAttributeNames: map[string]string{"#k": "pk"}, ExpressionAttributeValues: v(":p", S("p0"), ":a", N("3"))}, "3,4"},
		{">", dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND sk > :a"), ExpressionAttributeValues: v(":p", S("p0"), ":a", N("3"))}, "4"},
		{"<=", dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND sk <= :a"), ExpressionAttributeValues: v(":p", S("p0"), ":a", N("-4"))}, "-5,-4"},
		{"=", dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND sk = :a"), ExpressionAttributeValues: v(":p", S("p0"), ":a", N("0"))}, "0"},
		{"filter", dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), FilterExpression: aws.String("x >= :x"), ExpressionAttributeValues: v(":p", S("p2"), ":x", N("8"))}, "3,4"},
		{"missing partition", dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: v(":p", S("nope"))}, ""},
		// A GSI holds only its projection: x is not in KEYS_ONLY "by-g", so
		// a filter on it sees it missing. An LSI fetches the rest from the
		// table, so the same filter sees x there.
		{"gsi filter on unprojected", dynamodb.QueryInput{IndexName: aws.String("by-g"), KeyConditionExpression: aws.String("g = :g"), FilterExpression: aws.String("attribute_exists(x)"), ExpressionAttributeValues: v(":g", S("even"))}, ""},
		{"gsi filter on projected", dynamodb.QueryInput{IndexName: aws.String("by-g"), KeyConditionExpression: aws.String("g = :g AND n < :n"), FilterExpression: aws.String("attribute_exists(sk)"), ExpressionAttributeValues: v(":g", S("even"), ":n", N("5"))}, "-5,-3,-1"},
		{"lsi filter on unprojected", dynamodb.QueryInput{IndexName: aws.String("by-l"), KeyConditionExpression: aws.String("pk = :p"), FilterExpression: aws.String("y = :y"), Select: types.SelectAllAttributes, ExpressionAttributeValues: v(":p", S("p0"), ":y", S("big"))}, "-2,-3,-4,-5"},
		{"lsi begins_with", dynamodb.QueryInput{IndexName: aws.String("by-l"), KeyConditionExpression: aws.String("pk = :p AND begins_with(l, :l)"), ExpressionAttributeValues: v(":p", S("p0"), ":l", S("l0"))}, "-2,-3,-4,-5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := q(c.in)
			if got := keysOf(out.Items, "sk"); got != c.want {
				t.Fatalf("got %s want %s", got, c.want)
			}
		})
	}
	// GSI: KEYS_ONLY projection returns table and index keys only.
	out := q(dynamodb.QueryInput{IndexName: aws.String("by-g"), KeyConditionExpression: aws.String("g = :g AND n > :n"), ExpressionAttributeValues: v(":g", S("even"), ":n", N("100"))})
	if out.Count != 9 || len(out.Items[0]) != 4 || out.Items[0]["x"] != nil || keysOf(out.Items[:2], "n") != "102,104" {
		t.Fatalf("gsi query: %d %+v", out.Count, out.Items)
	}
	// LSI: INCLUDE projection returns x but not y; ALL_ATTRIBUTES fetches y.
	out = q(dynamodb.QueryInput{IndexName: aws.String("by-l"), KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: v(":p", S("p0"))})
	if out.Count != 4 || out.Items[0]["x"] == nil || out.Items[0]["y"] != nil {
		t.Fatalf("lsi projected: %+v", out.Items)
	}
	out = q(dynamodb.QueryInput{IndexName: aws.String("by-l"), Select: types.SelectAllAttributes, KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: v(":p", S("p0"))})
	if out.Items[0]["y"] == nil {
		t.Fatalf("lsi all attributes: %+v", out.Items)
	}
	// COUNT.
	out = q(dynamodb.QueryInput{Select: types.SelectCount, KeyConditionExpression: aws.String("pk = :p"), FilterExpression: aws.String("x < :x"), ExpressionAttributeValues: v(":p", S("p0"), ":x", N("3"))})
	if out.Count != 3 || out.ScannedCount != 10 || out.Items != nil {
		t.Fatalf("count: %d/%d %v", out.Count, out.ScannedCount, out.Items)
	}
	// Limit counts items evaluated before the filter; paging resumes.
	in := dynamodb.QueryInput{TableName: aws.String("qtbl"), Limit: aws.Int32(3), KeyConditionExpression: aws.String("pk = :p"), FilterExpression: aws.String("x <> :x"), ExpressionAttributeValues: v(":p", S("p0"), ":x", N("1"))}
	var all []item
	pages := 0
	for {
		o, err := e.db.Query(e.ctx, &in)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if o.ScannedCount > 3 {
			t.Fatalf("scanned %d > limit", o.ScannedCount)
		}
		all = append(all, o.Items...)
		if o.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = o.LastEvaluatedKey
	}
	if len(all) != 9 || pages != 4 {
		t.Fatalf("paged %d items in %d pages", len(all), pages)
	}
	// GSI paging: LastEvaluatedKey carries table and index keys.
	gin := dynamodb.QueryInput{TableName: aws.String("qtbl"), IndexName: aws.String("by-g"), Limit: aws.Int32(4), ScanIndexForward: aws.Bool(false),
		KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: v(":g", S("even"))}
	var ns []string
	for {
		o, err := e.db.Query(e.ctx, &gin)
		if err != nil {
			t.Fatal(err)
		}
		if o.LastEvaluatedKey != nil && len(o.LastEvaluatedKey) != 4 {
			t.Fatalf("gsi LastEvaluatedKey %+v", o.LastEvaluatedKey)
		}
		ns = append(ns, keysOf(o.Items, "n"))
		if o.LastEvaluatedKey == nil {
			break
		}
		gin.ExclusiveStartKey = o.LastEvaluatedKey
	}
	if strings.Join(ns, ";") != "208,206,204,202;200,108,106,104;102,100,8,6;4,2,0" {
		t.Fatalf("gsi pages %v", ns)
	}
	// Errors.
	for _, c := range []struct {
		in  dynamodb.QueryInput
		msg string
	}{
		{dynamodb.QueryInput{KeyConditionExpression: aws.String("sk = :a"), ExpressionAttributeValues: v(":a", N("1"))}, "missed key schema element"},
		{dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: v(":p", N("1"))}, "type"},
		{dynamodb.QueryInput{IndexName: aws.String("by-g"), ConsistentRead: aws.Bool(true), KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: v(":g", S("x"))}, "Consistent reads are not supported on global secondary indexes"},
		{dynamodb.QueryInput{IndexName: aws.String("nope"), KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: v(":g", S("x"))}, "does not have the specified index"},
		{dynamodb.QueryInput{IndexName: aws.String("by-g"), Select: types.SelectAllAttributes, KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: v(":g", S("x"))}, "ALL_ATTRIBUTES"},
		{dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND sk BETWEEN :b AND :a"), ExpressionAttributeValues: v(":p", S("p"), ":a", N("1"), ":b", N("2"))}, "BETWEEN"},
		{dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), ExclusiveStartKey: v("pk", S("other"), "sk", N("1")), ExpressionAttributeValues: v(":p", S("p0"))}, "outside query boundaries"},
		{dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), ExclusiveStartKey: v("pk", S("p0")), ExpressionAttributeValues: v(":p", S("p0"))}, "starting key is invalid"},
		{dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), Limit: aws.Int32(0), ExpressionAttributeValues: v(":p", S("p0"))}, "Value at 'Limit'"},
	} {
		in := c.in
		in.TableName = aws.String("qtbl")
		_, err := e.db.Query(e.ctx, &in)
		if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), c.msg) {
			t.Errorf("%s: got %s %q want %q", aws.ToString(in.KeyConditionExpression), errCode(err), errMsg(err), c.msg)
		}
	}
}

func TestScan(t *testing.T) {
	e := queryEnv(t)
	all := e.scanAll(&dynamodb.ScanInput{TableName: aws.String("qtbl"), Limit: aws.Int32(7)})
	if len(all) != 30 {
		t.Fatalf("scan all: %d", len(all))
	}
	// Segments partition the table.
	seen := map[string]bool{}
	for s := int32(0); s < 4; s++ {
		for _, it := range e.scanAll(&dynamodb.ScanInput{TableName: aws.String("qtbl"), Segment: aws.Int32(s), TotalSegments: aws.Int32(4), Limit: aws.Int32(4)}) {
			k := sOf(it, "pk") + "/" + sOf(it, "sk")
			if seen[k] {
				t.Fatalf("item %s in two segments", k)
			}
			seen[k] = true
		}
	}
	if len(seen) != 30 {
		t.Fatalf("segments covered %d items", len(seen))
	}
	gsi := e.scanAll(&dynamodb.ScanInput{TableName: aws.String("qtbl"), IndexName: aws.String("by-g"), FilterExpression: aws.String("n < :n"), ExpressionAttributeValues: item{":n": N("100")}})
	if len(gsi) != 5 {
		t.Fatalf("gsi scan: %d", len(gsi))
	}
	proj := e.scanAll(&dynamodb.ScanInput{TableName: aws.String("qtbl"), ProjectionExpression: aws.String("x")})
	if len(proj) != 30 || len(proj[0]) != 1 {
		t.Fatalf("projected scan: %+v", proj[0])
	}
	_, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("qtbl"), Segment: aws.Int32(4), TotalSegments: aws.Int32(4)})
	if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), "Segment") {
		t.Fatalf("bad segment: %v", err)
	}
}

func TestPageCap(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("big", "N", nil)
	blob := strings.Repeat("x", 100*1024)
	for i := 0; i < 25; i++ {
		e.put("big", item{"pk": S("p"), "sk": N(fmt.Sprint(i)), "blob": S(blob)})
	}
	out, err := e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("big"), KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: item{":p": S("p")}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count >= 25 || out.Count < 9 || out.LastEvaluatedKey == nil {
		t.Fatalf("1 MB cap: count %d lek %v", out.Count, out.LastEvaluatedKey)
	}
	if n := len(e.scanAll(&dynamodb.ScanInput{TableName: aws.String("big")})); n != 25 {
		t.Fatalf("scan through pages: %d", n)
	}
}

func TestLegacyParameters(t *testing.T) {
	e := queryEnv(t)
	// Expected + AttributeUpdates.
	_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("qtbl"), Item: item{"pk": S("p0"), "sk": N("0"), "x": N("1")},
		Expected: map[string]types.ExpectedAttributeValue{"x": {Value: N("99")}}})
	if errCode(err) != "ConditionalCheckFailedException" {
		t.Fatalf("Expected: %v", err)
	}
	_, err = e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("qtbl"), Key: item{"pk": S("p0"), "sk": N("0")},
		AttributeUpdates: map[string]types.AttributeValueUpdate{"x": {Action: types.AttributeActionAdd, Value: N("10")}},
		Expected:         map[string]types.ExpectedAttributeValue{"pk": {Exists: aws.Bool(true), Value: S("p0")}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sOf(e.get("qtbl", item{"pk": S("p0"), "sk": N("0")}), "x"); got != "15" {
		t.Fatalf("AttributeUpdates ADD: x=%s", got)
	}
	// KeyConditions + QueryFilter.
	out, err := e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("qtbl"),
		KeyConditions: map[string]types.Condition{
			"pk": {ComparisonOperator: types.ComparisonOperatorEq, AttributeValueList: []types.AttributeValue{S("p1")}},
			"sk": {ComparisonOperator: types.ComparisonOperatorGe, AttributeValueList: []types.AttributeValue{N("0")}}},
		QueryFilter: map[string]types.Condition{"x": {ComparisonOperator: types.ComparisonOperatorLt, AttributeValueList: []types.AttributeValue{N("8")}}}})
	if err != nil || keysOf(out.Items, "sk") != "0,1,2" {
		t.Fatalf("legacy query: %v %s", err, keysOf(out.Items, "sk"))
	}
	sc, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("qtbl"), ConditionalOperator: types.ConditionalOperatorOr,
		ScanFilter: map[string]types.Condition{"x": {ComparisonOperator: types.ComparisonOperatorEq, AttributeValueList: []types.AttributeValue{N("9")}},
			"sk": {ComparisonOperator: types.ComparisonOperatorEq, AttributeValueList: []types.AttributeValue{N("-5")}}}})
	if err != nil || sc.Count != 6 {
		t.Fatalf("legacy scan: %v %d", err, sc.Count)
	}
	_, err = e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("qtbl"), KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: item{":p": S("p1")},
		QueryFilter: map[string]types.Condition{"x": {ComparisonOperator: types.ComparisonOperatorNotNull}}})
	if !strings.Contains(errMsg(err), "Can not use both expression and non-expression parameters") {
		t.Fatalf("mixed: %v", err)
	}
	_, err = e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("qtbl"), KeyConditionExpression: aws.String("pk = :p"), FilterExpression: aws.String("sk > :z"),
		ExpressionAttributeValues: item{":p": S("p1"), ":z": N("0")}})
	if !strings.Contains(errMsg(err), "Filter Expression can only contain non-primary key attributes: Primary key attribute: sk") {
		t.Fatalf("filter on key: %v", err)
	}
}

// TestIndexDuplicateKeysPaging pages through a GSI whose items all share
// one index key, one item per page, both directions.
func TestIndexDuplicateKeysPaging(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("dups", "S", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeB})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{IndexName: aws.String("by-g"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}
	})
	for i := 0; i < 12; i++ {
		e.put("dups", item{"pk": S(fmt.Sprint("p", i)), "sk": S("same"), "g": B([]byte{0, 1, 0})})
	}
	for _, fwd := range []bool{true, false} {
		in := &dynamodb.QueryInput{TableName: aws.String("dups"), IndexName: aws.String("by-g"), Limit: aws.Int32(1), ScanIndexForward: aws.Bool(fwd),
			KeyConditionExpression: aws.String("g = :g AND begins_with(sk, :s)"), ExpressionAttributeValues: item{":g": B([]byte{0, 1, 0}), ":s": S("sa")}}
		seen := map[string]bool{}
		for {
			out, err := e.db.Query(e.ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range out.Items {
				if seen[sOf(it, "pk")] {
					t.Fatalf("duplicate %s (forward=%v)", sOf(it, "pk"), fwd)
				}
				seen[sOf(it, "pk")] = true
			}
			if out.LastEvaluatedKey == nil {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
		if len(seen) != 12 {
			t.Fatalf("forward=%v: %d items", fwd, len(seen))
		}
	}
}
