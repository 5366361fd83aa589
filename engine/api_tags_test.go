package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

// rawDB is an SDK client without the SDK's own input validation, so
// requests it would refuse client-side (a missing ResourceArn, a Tag
// without a Value) reach the engine, as they do from other clients.
func (e *env) rawDB() *dynamodb.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		// With retries off, the SDK's "use of closed network connection"
		// race (internal/sdkhttp) would fail a call now and then.
		HTTPClient: sdkhttp.Client(nil),
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(e.srv.Endpoint())
		o.RetryMaxAttempts = 1
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			_, err := s.Initialize.Remove("OperationInputValidation")
			return err
		})
	})
}

func tg(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }

func nTags(prefix string, from, to int) []types.Tag {
	var tags []types.Tag
	for i := from; i < to; i++ {
		tags = append(tags, tg(fmt.Sprintf("%s%02d", prefix, i), fmt.Sprint(i)))
	}
	return tags
}

func (e *env) listTags(arn string) []types.Tag {
	e.t.Helper()
	out, err := e.db.ListTagsOfResource(e.ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(arn)})
	if err != nil {
		e.t.Fatalf("ListTagsOfResource: %v", err)
	}
	if out.NextToken != nil {
		e.t.Fatalf("ListTagsOfResource returned NextToken %q; all tags fit one page", *out.NextToken)
	}
	return out.Tags
}

func renderTags(tags []types.Tag) string {
	var b strings.Builder
	for i, t := range tags {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", aws.ToString(t.Key), aws.ToString(t.Value))
	}
	return b.String()
}

func TestTagsFlow(t *testing.T) {
	e := newEnv(t, engine.Options{})
	desc := e.createTable("tagged", "", func(in *dynamodb.CreateTableInput) {
		in.Tags = []types.Tag{tg("team", "ttl"), tg("env", "dev")}
	})
	arn := aws.ToString(desc.TableArn)
	plain := aws.ToString(e.createTable("plain", "", func(in *dynamodb.CreateTableInput) { in.Tags = []types.Tag{} }).TableArn)

	steps := []struct {
		name string
		do   func() error
		arn  string
		want string
	}{
		{"CreateTable's tags", nil, arn, "team=ttl env=dev"},
		{"a table created with an empty Tags list has none", nil, plain, ""},
		{"TagResource overwrites a key in place and appends a new one", func() error {
			_, err := e.db.TagResource(e.ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String(arn), Tags: []types.Tag{tg("new", "1"), tg("team", "archiver")}})
			return err
		}, arn, "team=archiver env=dev new=1"},
		{"limits and the characters DynamoDB allows", func() error {
			_, err := e.db.TagResource(e.ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String(arn), Tags: []types.Tag{
				tg(strings.Repeat("k", 128), strings.Repeat("v", 256)),
				tg("empty", ""),
				tg("ключ café 表", "a+b-c=d.e_f:g/h@i j"),
			}})
			return err
		}, arn, "team=archiver env=dev new=1 " + strings.Repeat("k", 128) + "=" + strings.Repeat("v", 256) + " empty= ключ café 表=a+b-c=d.e_f:g/h@i j"},
		{"UntagResource removes keys; absent keys are fine", func() error {
			_, err := e.db.UntagResource(e.ctx, &dynamodb.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: []string{"new", "absent", strings.Repeat("k", 128), "empty", "ключ café 表"}})
			return err
		}, arn, "team=archiver env=dev"},
		{"the other table is untouched", nil, plain, ""},
	}
	for _, s := range steps {
		if s.do != nil {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		if got := renderTags(e.listTags(s.arn)); got != s.want {
			t.Fatalf("%s: tags %q, want %q", s.name, got, s.want)
		}
	}

	// A NextToken is accepted; every tag is in the one page.
	out, err := e.db.ListTagsOfResource(e.ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(arn), NextToken: aws.String("anything")})
	if err != nil || renderTags(out.Tags) != "team=archiver env=dev" || out.NextToken != nil {
		t.Fatalf("ListTagsOfResource with NextToken: %v %q %v", err, renderTags(out.Tags), out.NextToken)
	}
	// Deleting the table deletes its tags: the ARN is unknown, and a table
	// created again under the name starts with only its own tags.
	if _, err := e.db.DeleteTable(e.ctx, &dynamodb.DeleteTableInput{TableName: aws.String("tagged")}); err != nil {
		t.Fatal(err)
	}
	_, err = e.db.ListTagsOfResource(e.ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(arn)})
	if errCode(err) != "ResourceNotFoundException" {
		t.Fatalf("ListTagsOfResource after DeleteTable: %v", err)
	}
	again := e.createTable("tagged", "", nil)
	if aws.ToString(again.TableArn) != arn {
		t.Fatalf("ARN changed: %s", aws.ToString(again.TableArn))
	}
	if got := e.listTags(arn); len(got) != 0 {
		t.Fatalf("recreated table has tags %q", renderTags(got))
	}
}

func TestTagsLimit(t *testing.T) {
	e := newEnv(t, engine.Options{})
	arn := aws.ToString(e.createTable("fifty", "", func(in *dynamodb.CreateTableInput) { in.Tags = nTags("k", 0, 25) }).TableArn)
	tag := func(tags []types.Tag) error {
		_, err := e.db.TagResource(e.ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String(arn), Tags: tags})
		return err
	}
	if err := tag(nTags("k", 25, 50)); err != nil {
		t.Fatalf("tags 25..49: %v", err)
	}
	// At 50: overwriting is fine, any new key is refused and nothing of
	// the request is applied.
	if err := tag(nTags("k", 0, 50)); err != nil {
		t.Fatalf("overwriting all 50: %v", err)
	}
	for _, tags := range [][]types.Tag{{tg("k50", "x")}, {tg("k00", "changed"), tg("k50", "x")}} {
		err := tag(tags)
		if errCode(err) != "ValidationException" || errMsg(err) != "Number of Tags exceed the current limit for the provided ResourceArn" {
			t.Fatalf("51st tag: %v", err)
		}
	}
	got := e.listTags(arn)
	if len(got) != 50 || renderTags(got[:1]) != "k00=0" {
		t.Fatalf("after refused requests: %d tags, first %q", len(got), renderTags(got[:1]))
	}
	// Making room lets a new key in.
	if _, err := e.db.UntagResource(e.ctx, &dynamodb.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: []string{"k00"}}); err != nil {
		t.Fatal(err)
	}
	if err := tag([]types.Tag{tg("k50", "x")}); err != nil {
		t.Fatalf("50th tag after an untag: %v", err)
	}
	// CreateTable takes exactly 50 too.
	arn50 := aws.ToString(e.createTable("fifty2", "", func(in *dynamodb.CreateTableInput) { in.Tags = nTags("k", 0, 50) }).TableArn)
	if n := len(e.listTags(arn50)); n != 50 {
		t.Fatalf("CreateTable with 50 tags: %d listed", n)
	}
}

func TestTagErrors(t *testing.T) {
	e := newEnv(t, engine.Options{})
	desc := e.createTable("errs", "", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("byG"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}}
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}
	})
	arn := aws.ToString(desc.TableArn)
	indexARN := aws.ToString(desc.GlobalSecondaryIndexes[0].IndexArn)
	streamARN := aws.ToString(desc.LatestStreamArn)
	missing := strings.Replace(arn, "table/errs", "table/nope", 1)
	otherRegion := strings.Replace(arn, "us-east-1", "eu-west-1", 1)
	raw := e.rawDB()
	long := strings.Repeat("x", 129)

	tagRes := func(c *dynamodb.Client, arn *string, tags []types.Tag) func() error {
		return func() error {
			_, err := c.TagResource(e.ctx, &dynamodb.TagResourceInput{ResourceArn: arn, Tags: tags})
			return err
		}
	}
	untag := func(c *dynamodb.Client, arn *string, keys []string) func() error {
		return func() error {
			_, err := c.UntagResource(e.ctx, &dynamodb.UntagResourceInput{ResourceArn: arn, TagKeys: keys})
			return err
		}
	}
	list := func(c *dynamodb.Client, arn *string) func() error {
		return func() error {
			_, err := c.ListTagsOfResource(e.ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: arn})
			return err
		}
	}
	create := func(name string, tags []types.Tag) func() error {
		return func() error {
			_, err := e.db.CreateTable(e.ctx, &dynamodb.CreateTableInput{
				TableName:            aws.String(name),
				BillingMode:          types.BillingModePayPerRequest,
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
				Tags:                 tags,
			})
			return err
		}
	}
	ok := []types.Tag{tg("a", "b")}
	invalidARN := func(a string) string { return "Invalid TableArn: Invalid ResourceArn provided as input " + a }
	notFound := func(a string) string { return "Requested resource not found: ResourcArn: " + a + " not found" }
	const (
		val = "ValidationException"
		rnf = "ResourceNotFoundException"
	)

	cases := []struct {
		name, code, msg string
		call            func() error
	}{
		// TagResource
		{"tag: no ResourceArn", val, "Invalid TableArn", tagRes(raw, nil, ok)},
		{"tag: no Tags", val, "1 validation error detected: Value null at 'tags' failed to satisfy constraint: Member must not be null", tagRes(raw, &arn, nil)},
		{"tag: not an ARN", val, invalidARN("not-an-arn"), tagRes(e.db, aws.String("not-an-arn"), ok)},
		{"tag: empty ARN", val, invalidARN(""), tagRes(raw, aws.String(""), ok)},
		{"tag: another service's ARN", val, invalidARN("arn:aws:s3:us-east-1:000000000000:table/errs"), tagRes(e.db, aws.String("arn:aws:s3:us-east-1:000000000000:table/errs"), ok)},
		{"tag: an index ARN", val, invalidARN(indexARN), tagRes(e.db, &indexARN, ok)},
		{"tag: a stream ARN", val, invalidARN(streamARN), tagRes(e.db, &streamARN, ok)},
		{"tag: a table name under 3 characters", val, invalidARN("arn:aws:dynamodb:us-east-1:000000000000:table/ab"), tagRes(e.db, aws.String("arn:aws:dynamodb:us-east-1:000000000000:table/ab"), ok)},
		{"tag: empty Tags", val, "Atleast one Tag needs to be provided as Input.", tagRes(e.db, &arn, []types.Tag{})},
		{"tag: empty key", val, "The Tag Key provided is invalid, Key: ", tagRes(e.db, &arn, []types.Tag{tg("", "v")})},
		{"tag: no key", val, "The Tag Key provided is invalid, Key: null", tagRes(raw, &arn, []types.Tag{{Value: aws.String("v")}})},
		{"tag: key of 129", val, "The Tag Key provided is invalid, Key: " + long, tagRes(e.db, &arn, []types.Tag{tg(long, "v")})},
		{"tag: key with #", val, "The Tag Key provided is invalid, Key: a#b", tagRes(e.db, &arn, []types.Tag{tg("a#b", "v")})},
		{"tag: key with an emoji", val, "The Tag Key provided is invalid, Key: 🔑", tagRes(e.db, &arn, []types.Tag{tg("🔑", "v")})},
		{"tag: aws: prefix", val, "Tag Key cannot be prefixed with aws:, Key: aws:owner", tagRes(e.db, &arn, []types.Tag{tg("aws:owner", "v")})},
		{"tag: no value", val, "The Tag Value provided is invalid, Value: null", tagRes(raw, &arn, []types.Tag{{Key: aws.String("k")}})},
		{"tag: value of 257", val, "The Tag Value provided is invalid, Value: " + strings.Repeat("v", 257), tagRes(e.db, &arn, []types.Tag{tg("k", strings.Repeat("v", 257))})},
		{"tag: value with a comma", val, "The Tag Value provided is invalid, Value: a,b", tagRes(e.db, &arn, []types.Tag{tg("k", "a,b")})},
		{"tag: duplicate key", val, "Duplicate Tag Keys provided as input: Duplicate Tag Key found dup", tagRes(e.db, &arn, []types.Tag{tg("dup", "1"), tg("dup", "2")})},
		{"tag: 51 in one request", val, "Number of Tags exceed the current limit for the provided ResourceArn", tagRes(e.db, &arn, nTags("k", 0, 51))},
		{"tag: unknown table", rnf, notFound(missing), tagRes(e.db, &missing, ok)},
		{"tag: the table's name in another region", rnf, notFound(otherRegion), tagRes(e.db, &otherRegion, ok)},
		{"tag: a bad tag is reported before the unknown table", val, "The Tag Key provided is invalid, Key: ", tagRes(e.db, &missing, []types.Tag{tg("", "v")})},

		// UntagResource
		{"untag: no ResourceArn", val, "Invalid TableArn", untag(raw, nil, []string{"a"})},
		{"untag: no TagKeys", val, "1 validation error detected: Value null at 'tagKeys' failed to satisfy constraint: Member must not be null", untag(raw, &arn, nil)},
		{"untag: not an ARN", val, invalidARN("x"), untag(e.db, aws.String("x"), []string{"a"})},
		{"untag: an index ARN", val, invalidARN(indexARN), untag(e.db, &indexARN, []string{"a"})},
		{"untag: empty TagKeys", val, "Atleast one Tag Key needs to be provided as Input.", untag(e.db, &arn, []string{})},
		{"untag: empty key", val, "The Tag Key provided is invalid, Key: ", untag(e.db, &arn, []string{""})},
		{"untag: key of 129", val, "The Tag Key provided is invalid, Key: " + long, untag(e.db, &arn, []string{long})},
		{"untag: 51 keys", val, "Number of Tags exceed the current limit for the provided ResourceArn", untag(e.db, &arn, strings.Fields(strings.Repeat("k ", 51)))},
		{"untag: unknown table", rnf, notFound(missing), untag(e.db, &missing, []string{"a"})},

		// ListTagsOfResource
		{"list: no ResourceArn", val, "Invalid TableArn", list(raw, nil)},
		{"list: not an ARN", val, invalidARN("arn:aws:dynamodb:us-east-1"), list(e.db, aws.String("arn:aws:dynamodb:us-east-1"))},
		{"list: a stream ARN", val, invalidARN(streamARN), list(e.db, &streamARN)},
		{"list: unknown table", rnf, notFound(missing), list(e.db, &missing)},

		// CreateTable
		{"create: 51 tags", val, "Number of Tags exceed the current limit for the provided ResourceArn", create("toomany", nTags("k", 0, 51))},
		{"create: aws: prefix", val, "Tag Key cannot be prefixed with aws:, Key: aws:x", create("awsprefix", []types.Tag{tg("aws:x", "v")})},
		{"create: value of 257", val, "The Tag Value provided is invalid, Value: " + strings.Repeat("v", 257), create("longvalue", []types.Tag{tg("k", strings.Repeat("v", 257))})},
		{"create: duplicate key", val, "Duplicate Tag Keys provided as input: Duplicate Tag Key found d", create("dupkey", []types.Tag{tg("d", "1"), tg("d", "1")})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if errCode(err) != c.code || errMsg(err) != c.msg {
				t.Fatalf("got %s %q\nwant %s %q", errCode(err), errMsg(err), c.code, c.msg)
			}
		})
	}

	// Nothing of a refused request was applied, and a refused CreateTable
	// made no table.
	if got := e.listTags(arn); len(got) != 0 {
		t.Fatalf("refused requests left tags %q", renderTags(got))
	}
	for _, name := range []string{"toomany", "awsprefix", "longvalue", "dupkey"} {
		_, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if errCode(err) != "ResourceNotFoundException" {
			t.Fatalf("table %s after a refused CreateTable: %v", name, err)
		}
	}
}
