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

func TestCreateDescribeDeleteTable(t *testing.T) {
	e := newEnv(t, engine.Options{})
	d := e.createTable("orders", "N", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String("l"), AttributeType: types.ScalarAttributeTypeB})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("by-g"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}}
		in.LocalSecondaryIndexes = []types.LocalSecondaryIndex{{
			IndexName: aws.String("by-l"),
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("l"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"x"}},
		}}
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	})
	if d.TableStatus != types.TableStatusActive || aws.ToString(d.TableArn) != "arn:aws:dynamodb:us-east-1:000000000000:table/orders" {
		t.Fatalf("create: status %s arn %s", d.TableStatus, aws.ToString(d.TableArn))
	}
	if !strings.HasPrefix(aws.ToString(d.LatestStreamArn), "arn:aws:dynamodb:us-east-1:000000000000:table/orders/stream/") || d.LatestStreamLabel == nil {
		t.Fatalf("stream arn %q label %v", aws.ToString(d.LatestStreamArn), d.LatestStreamLabel)
	}
	e.put("orders", item{"pk": S("a"), "sk": N("1"), "g": S("x")})
	e.put("orders", item{"pk": S("a"), "sk": N("2")})
	out, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("orders")})
	if err != nil {
		t.Fatal(err)
	}
	tb := out.Table
	if aws.ToInt64(tb.ItemCount) != 2 || aws.ToInt64(tb.TableSizeBytes) == 0 || tb.CreationDateTime == nil {
		t.Fatalf("describe: count %d size %d", aws.ToInt64(tb.ItemCount), aws.ToInt64(tb.TableSizeBytes))
	}
	if len(tb.GlobalSecondaryIndexes) != 1 || tb.GlobalSecondaryIndexes[0].IndexStatus != types.IndexStatusActive || aws.ToInt64(tb.GlobalSecondaryIndexes[0].ItemCount) != 1 {
		t.Fatalf("gsi desc: %+v", tb.GlobalSecondaryIndexes)
	}
	if len(tb.LocalSecondaryIndexes) != 1 || tb.LocalSecondaryIndexes[0].Projection.ProjectionType != types.ProjectionTypeInclude {
		t.Fatalf("lsi desc: %+v", tb.LocalSecondaryIndexes)
	}
	if tb.StreamSpecification == nil || !aws.ToBool(tb.StreamSpecification.StreamEnabled) || tb.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Fatalf("stream spec %+v", tb.StreamSpecification)
	}
	_, err = e.db.CreateTable(e.ctx, &dynamodb.CreateTableInput{TableName: aws.String("orders"), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}}})
	if errCode(err) != "ResourceInUseException" {
		t.Fatalf("duplicate create: %v", err)
	}
	del, err := e.db.DeleteTable(e.ctx, &dynamodb.DeleteTableInput{TableName: aws.String("orders")})
	if err != nil || aws.ToString(del.TableDescription.TableName) != "orders" {
		t.Fatalf("delete: %v", err)
	}
	for _, op := range []func() error{
		func() error {
			_, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("orders")})
			return err
		},
		func() error {
			_, err := e.db.DeleteTable(e.ctx, &dynamodb.DeleteTableInput{TableName: aws.String("orders")})
			return err
		},
		func() error {
			_, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("orders"), Key: item{"pk": S("a"), "sk": N("1")}})
			return err
		},
	} {
		if err := op(); errCode(err) != "ResourceNotFoundException" {
			t.Fatalf("after delete: %v", err)
		}
	}
}

func TestCreateTableValidation(t *testing.T) {
	e := newEnv(t, engine.Options{})
	pk := []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}}
	pkDef := []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}}
	gsi := func(name string) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{IndexName: aws.String(name), KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}
	}
	cases := []struct {
		name string
		in   dynamodb.CreateTableInput
		code string
		msg  string
	}{
		{"short name", dynamodb.CreateTableInput{TableName: aws.String("ab"), KeySchema: pk, AttributeDefinitions: pkDef, BillingMode: types.BillingModePayPerRequest}, "ValidationException", "length greater than or equal to 3"},
		{"bad chars", dynamodb.CreateTableInput{TableName: aws.String("a b c"), KeySchema: pk, AttributeDefinitions: pkDef, BillingMode: types.BillingModePayPerRequest}, "ValidationException", "regular expression"},
		{"no throughput", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, AttributeDefinitions: pkDef}, "ValidationException", "ReadCapacityUnits and WriteCapacityUnits must both be specified"},
		{"throughput with on-demand", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, AttributeDefinitions: pkDef, BillingMode: types.BillingModePayPerRequest,
			ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(1), WriteCapacityUnits: aws.Int64(1)}}, "ValidationException", "PAY_PER_REQUEST"},
		{"undefined key", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("x"), AttributeType: types.ScalarAttributeTypeS}}}, "ValidationException", "not defined in AttributeDefinitions"},
		{"extra definition", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: append(pkDef, types.AttributeDefinition{AttributeName: aws.String("x"), AttributeType: types.ScalarAttributeTypeS})}, "ValidationException", "does not exactly match"},
		{"range first", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), BillingMode: types.BillingModePayPerRequest, AttributeDefinitions: pkDef,
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeRange}}}, "ValidationException", "not a HASH key"},
		{"bad type", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: "BOOL"}}}, "ValidationException", "enum value set"},
		{"lsi without range", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: append(pkDef, types.AttributeDefinition{AttributeName: aws.String("l"), AttributeType: types.ScalarAttributeTypeS}),
			LocalSecondaryIndexes: []types.LocalSecondaryIndex{{IndexName: aws.String("lsi"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
				KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("l"), KeyType: types.KeyTypeRange}}}}},
			"ValidationException", "does not have a range key"},
		{"gsi include without attrs", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: append(pkDef, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS}),
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("gsi"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude},
				KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}}}}},
			"ValidationException", "NonKeyAttributes"},
		{"duplicate index", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions:   append(pkDef, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS}),
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{gsi("gsi"), gsi("gsi")}}, "ValidationException", "Duplicate index name"},
		{"stream without view type", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, AttributeDefinitions: pkDef, BillingMode: types.BillingModePayPerRequest,
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true)}}, "ValidationException", "StreamViewType"},
	}
	var many []types.GlobalSecondaryIndex
	for i := 0; i < 21; i++ {
		many = append(many, gsi(fmt.Sprintf("gsi%02d", i)))
	}
	cases = append(cases, struct {
		name string
		in   dynamodb.CreateTableInput
		code string
		msg  string
	}{"21 gsis", dynamodb.CreateTableInput{TableName: aws.String("tbl1"), KeySchema: pk, BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions:   append(pkDef, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS}),
		GlobalSecondaryIndexes: many}, "LimitExceededException", "20"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			_, err := e.db.CreateTable(e.ctx, &in)
			if errCode(err) != c.code || !strings.Contains(errMsg(err), c.msg) {
				t.Fatalf("got %s %q, want %s containing %q", errCode(err), errMsg(err), c.code, c.msg)
			}
		})
	}
}

func TestListTablesPaging(t *testing.T) {
	e := newEnv(t, engine.Options{})
	for i := 0; i < 7; i++ {
		e.createTable(fmt.Sprintf("tbl%d", i), "", nil)
	}
	var names []string
	in := &dynamodb.ListTablesInput{Limit: aws.Int32(3)}
	pages := 0
	for {
		out, err := e.db.ListTables(e.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		names = append(names, out.TableNames...)
		if out.LastEvaluatedTableName == nil {
			break
		}
		in.ExclusiveStartTableName = out.LastEvaluatedTableName
	}
	if len(names) != 7 || names[0] != "tbl0" || names[6] != "tbl6" || pages != 3 {
		t.Fatalf("names %v pages %d", names, pages)
	}
}

func TestUpdateTableStreamsAndGSI(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tbl1", "S", nil)
	for i := 0; i < 5; i++ {
		it := item{"pk": S("p"), "sk": S(fmt.Sprint(i))}
		if i%2 == 0 {
			it["color"] = S("red")
		}
		e.put("tbl1", it)
	}
	up, err := e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("tbl1"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}})
	if err != nil {
		t.Fatal(err)
	}
	first := aws.ToString(up.TableDescription.LatestStreamArn)
	if first == "" {
		t.Fatal("no stream arn after enabling")
	}
	_, err = e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("tbl1"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}})
	if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), "already has an enabled stream") {
		t.Fatalf("enable twice: %v", err)
	}
	if _, err = e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("tbl1"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	up, err = e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("tbl1"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}})
	if err != nil {
		t.Fatal(err)
	}
	if second := aws.ToString(up.TableDescription.LatestStreamArn); second == first || second == "" {
		t.Fatalf("re-enabled stream arn %q, first %q", second, first)
	}
	// Add a GSI: existing items are backfilled.
	_, err = e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("tbl1"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("color"), AttributeType: types.ScalarAttributeTypeS}},
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
			IndexName: aws.String("by-color"), KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("color"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("tbl1"), IndexName: aws.String("by-color"),
		KeyConditionExpression: aws.String("color = :c"), ExpressionAttributeValues: item{":c": S("red")}})
	if err != nil {
		t.Fatal(err)
	}
	if q.Count != 3 {
		t.Fatalf("backfilled gsi count %d, want 3", q.Count)
	}
	_, err = e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("tbl1"),
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Delete: &types.DeleteGlobalSecondaryIndexAction{IndexName: aws.String("by-color")}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("tbl1"), IndexName: aws.String("by-color"),
		KeyConditionExpression: aws.String("color = :c"), ExpressionAttributeValues: item{":c": S("red")}})
	if errCode(err) != "ValidationException" {
		t.Fatalf("query dropped index: %v", err)
	}
	d, _ := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("tbl1")})
	if len(d.Table.AttributeDefinitions) != 2 {
		t.Fatalf("attribute definitions after dropping the index: %+v", d.Table.AttributeDefinitions)
	}
}

func TestTimeToLiveConfig(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tbl1", "", nil)
	d, err := e.db.DescribeTimeToLive(e.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("tbl1")})
	if err != nil || d.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusDisabled {
		t.Fatalf("initial: %v %+v", err, d)
	}
	e.enableTTL("tbl1", "expires")
	d, _ = e.db.DescribeTimeToLive(e.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("tbl1")})
	if d.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.TimeToLiveDescription.AttributeName) != "expires" {
		t.Fatalf("enabled: %+v", d.TimeToLiveDescription)
	}
	upd := func(name string, on bool) error {
		_, err := e.db.UpdateTimeToLive(e.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("tbl1"),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(name), Enabled: aws.Bool(on)}})
		return err
	}
	if err := upd("expires", true); !strings.Contains(errMsg(err), "TimeToLive is already enabled") {
		t.Fatalf("enable twice: %v", err)
	}
	if err := upd("other", false); !strings.Contains(errMsg(err), "different AttributeName") {
		t.Fatalf("disable other: %v", err)
	}
	if err := upd("expires", false); err != nil {
		t.Fatal(err)
	}
	if err := upd("expires", false); !strings.Contains(errMsg(err), "already disabled") {
		t.Fatalf("disable twice: %v", err)
	}
	if err := upd(strings.Repeat("x", 256), true); errCode(err) != "ValidationException" {
		t.Fatalf("long name: %v", err)
	}
	_, err = e.db.UpdateTimeToLive(e.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("nope"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("x"), Enabled: aws.Bool(true)}})
	if errCode(err) != "ResourceNotFoundException" {
		t.Fatalf("missing table: %v", err)
	}
}
