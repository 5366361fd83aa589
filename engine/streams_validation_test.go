package engine_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

// TestUpdateTableStreamSpecification: turning a stream on or off answers
// as DynamoDB does when there is nothing to turn, or the view type is
// missing or misplaced.
func TestUpdateTableStreamSpecification(t *testing.T) {
	e, arn := streamEnv(t, engine.Options{}, types.StreamViewTypeKeysOnly)
	e.createTable("nostream", "", nil)
	raw := e.rawDB()
	spec := func(on bool, view types.StreamViewType) *types.StreamSpecification {
		return &types.StreamSpecification{StreamEnabled: aws.Bool(on), StreamViewType: view}
	}
	update := func(c *dynamodb.Client, table string, s *types.StreamSpecification) func() error {
		return func() error {
			_, err := c.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String(table), StreamSpecification: s})
			return err
		}
	}
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"enable an enabled stream", update(e.db, "str1", spec(true, types.StreamViewTypeKeysOnly)),
			"Table already has an enabled stream: TableName: str1"},
		{"change the view type in place", update(e.db, "str1", spec(true, types.StreamViewTypeNewImage)),
			"Table already has an enabled stream: TableName: str1"},
		{"disable a stream the table does not have", update(e.db, "nostream", spec(false, "")),
			"Table has no stream to disable: TableName: nostream"},
		{"enable without a view type", update(e.db, "nostream", spec(true, "")),
			"One or more parameter values were invalid: If stream is being enabled then UpdateViewType is required"},
		{"disable with a view type", update(e.db, "str1", spec(false, types.StreamViewTypeKeysOnly)),
			"One or more parameter values were invalid: If stream is being disabled, then UpdateViewType must not be specified"},
		{"no StreamEnabled", update(raw, "str1", &types.StreamSpecification{StreamViewType: types.StreamViewTypeKeysOnly}),
			"1 validation error detected: Value null at 'streamSpecification.streamEnabled' failed to satisfy constraint: Member must not be null"},
		{"an unknown view type", update(e.db, "nostream", spec(true, "ALL_IMAGES")),
			"1 validation error detected: Value 'ALL_IMAGES' at 'streamSpecification.streamViewType' failed to satisfy constraint: Member must satisfy enum value set: [NEW_IMAGE, OLD_IMAGE, NEW_AND_OLD_IMAGES, KEYS_ONLY]"},
		{"create with a disabled stream and a view type", func() error {
			_, err := e.db.CreateTable(e.ctx, &dynamodb.CreateTableInput{TableName: aws.String("created"), BillingMode: types.BillingModePayPerRequest,
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
				StreamSpecification:  spec(false, types.StreamViewTypeNewImage)})
			return err
		}, "One or more parameter values were invalid: Table is being created with a stream disabled, UpdateViewType should not be specified"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); errCode(err) != "ValidationException" || errMsg(err) != c.want {
				t.Errorf("got %s: %s\nwant %s", errCode(err), errMsg(err), c.want)
			}
		})
	}
	// Off, off again (refused), on again: a new stream.
	if err := update(e.db, "str1", spec(false, ""))(); err != nil {
		t.Fatal(err)
	}
	if err := update(e.db, "str1", spec(false, ""))(); errMsg(err) != "Table has no stream to disable: TableName: str1" {
		t.Fatalf("disable twice: %v", err)
	}
	out, err := e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("str1"), StreamSpecification: spec(true, types.StreamViewTypeNewImage)})
	if err != nil || aws.ToString(out.TableDescription.LatestStreamArn) == aws.ToString(arn) {
		t.Fatalf("re-enable: %v", err)
	}
}

// TestStreamsValidation: the Streams API's constraints (all violations in
// one message) and its answers for arguments that name nothing.
func TestStreamsValidation(t *testing.T) {
	e, arn := streamEnv(t, engine.Options{}, types.StreamViewTypeNewAndOldImages)
	e.put("str1", item{"pk": S("a"), "sk": N("1")})
	shard := aws.ToString(e.shards(arn)[0].ShardId)
	stream := aws.ToString(arn)
	missingARN := strings.Replace(stream, "table/str1/", "table/gone/", 1)
	const unknownShard = "shardId-00000000000000000000-ffffffff"
	const streams = "DynamoDBStreams_20120810."
	it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: &shard, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil || len(recs.Records) != 1 {
		t.Fatalf("GetRecords: %v", err)
	}
	seq := aws.ToString(recs.Records[0].Dynamodb.SequenceNumber)
	iter := func(typ stypes.ShardIteratorType, shardID, seqNo *string, streamARN string) func() error {
		return func() error {
			_, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: &streamARN, ShardId: shardID, ShardIteratorType: typ, SequenceNumber: seqNo})
			return err
		}
	}
	rawCall := func(op, body string) func() (string, string) {
		return func() (string, string) { return e.rawRequest(streams+op, body) }
	}
	sdk := func(call func() error) func() (string, string) {
		return func() (string, string) { err := call(); return errCode(err), errMsg(err) }
	}
	const val, rnf = "ValidationException", "ResourceNotFoundException"
	cases := []struct {
		name       string
		call       func() (string, string)
		code, want string
	}{
		{"ListStreams: limit over 100", sdk(func() error {
			_, err := e.st.ListStreams(e.ctx, &dynamodbstreams.ListStreamsInput{Limit: aws.Int32(101)})
			return err
		}), val, "1 validation error detected: Value '101' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 100"},
		{"ListStreams: all violations", sdk(func() error {
			_, err := e.st.ListStreams(e.ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String("a;"), Limit: aws.Int32(0), ExclusiveStartStreamArn: aws.String("arn")})
			return err
		}), val, "4 validation errors detected: Value 'a;' at 'tableName' " + namePat + "; Value 'a;' at 'tableName' " + nameMin +
			"; Value '0' at 'limit' " + limitMin +
			"; Value 'arn' at 'exclusiveStartStreamArn' failed to satisfy constraint: Member must have length greater than or equal to 37"},
		{"ListStreams: unknown start stream", sdk(func() error {
			_, err := e.st.ListStreams(e.ctx, &dynamodbstreams.ListStreamsInput{ExclusiveStartStreamArn: &missingARN})
			return err
		}), rnf, "Requested resource not found: Stream: " + missingARN + " not found"},
		{"DescribeStream: no StreamArn", rawCall("DescribeStream", `{"Limit":101}`), val,
			"2 validation errors detected: Value null at 'streamArn' " + notNull +
				"; Value '101' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 100"},
		{"DescribeStream: malformed StreamArn", sdk(func() error {
			_, err := e.st.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(strings.Repeat("x", 40))})
			return err
		}), val, "Invalid StreamArn: " + strings.Repeat("x", 40)},
		{"ListStreams: malformed start stream", sdk(func() error {
			_, err := e.st.ListStreams(e.ctx, &dynamodbstreams.ListStreamsInput{ExclusiveStartStreamArn: aws.String(strings.Repeat("k", 48))})
			return err
		}), val, "Invalid StreamArn: " + strings.Repeat("k", 48)},
		{"DescribeStream: shard filter", sdk(func() error {
			_, err := e.st.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn,
				ShardFilter: &stypes.ShardFilter{Type: "PARENT_SHARDS", ShardId: aws.String("short")}})
			return err
		}), val, "2 validation errors detected: Value 'PARENT_SHARDS' at 'shardFilter.type' failed to satisfy constraint: Member must satisfy enum value set: [CHILD_SHARDS]" +
			"; Value 'short' at 'shardFilter.shardId' failed to satisfy constraint: Member must have length greater than or equal to 28"},
		{"GetShardIterator: nothing", rawCall("GetShardIterator", `{}`), val,
			"3 validation errors detected: Value null at 'streamArn' " + notNull + "; Value null at 'shardId' " + notNull +
				"; Value null at 'shardIteratorType' " + notNull},
		{"GetShardIterator: AT_SEQUENCE_NUMBER without one", sdk(iter(stypes.ShardIteratorTypeAtSequenceNumber, &shard, nil, stream)), val,
			"SequenceNumber is required when ShardIteratorType is AT_SEQUENCE_NUMBER"},
		{"GetShardIterator: AFTER_SEQUENCE_NUMBER without one", sdk(iter(stypes.ShardIteratorTypeAfterSequenceNumber, &shard, nil, stream)), val,
			"SequenceNumber is required when ShardIteratorType is AFTER_SEQUENCE_NUMBER"},
		{"GetShardIterator: TRIM_HORIZON with one", sdk(iter(stypes.ShardIteratorTypeTrimHorizon, &shard, &seq, stream)), val,
			"SequenceNumber must not be set when ShardIteratorType is TRIM_HORIZON"},
		{"GetShardIterator: LATEST with one", sdk(iter(stypes.ShardIteratorTypeLatest, &shard, &seq, stream)), val,
			"SequenceNumber must not be set when ShardIteratorType is LATEST"},
		{"GetShardIterator: outside the shard", sdk(iter(stypes.ShardIteratorTypeAtSequenceNumber, &shard, aws.String("999999999999999999999"), stream)), val,
			"Invalid SequenceNumber: 999999999999999999999 is outside the range of shard " + shard},
		{"GetShardIterator: short sequence number", sdk(iter(stypes.ShardIteratorTypeAtSequenceNumber, &shard, aws.String("12"), stream)), val,
			"1 validation error detected: Value '12' at 'sequenceNumber' failed to satisfy constraint: Member must have length greater than or equal to 21"},
		{"GetShardIterator: unknown shard", sdk(iter(stypes.ShardIteratorTypeLatest, aws.String(unknownShard), nil, stream)), rnf,
			"Requested resource not found: Shard: " + unknownShard + " in Stream: " + stream + " not found"},
		{"GetShardIterator: unknown stream", sdk(iter(stypes.ShardIteratorTypeLatest, &shard, nil, missingARN)), rnf,
			"Requested resource not found: Stream: " + missingARN + " not found"},
		{"GetShardIterator: malformed StreamArn", sdk(iter(stypes.ShardIteratorTypeLatest, &shard, nil, strings.Repeat("y", 37))), val,
			"Invalid StreamArn: " + strings.Repeat("y", 37)},
		{"GetRecords: limit over 1000", sdk(func() error {
			_, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1001)})
			return err
		}), val, "1 validation error detected: Value '1001' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 1000"},
		{"GetRecords: no iterator, limit 0", rawCall("GetRecords", `{"Limit":0}`), val,
			"2 validation errors detected: Value null at 'shardIterator' " + notNull + "; Value '0' at 'limit' " + limitMin},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if code, msg := c.call(); code != c.code || msg != c.want {
				t.Errorf("got %s: %s\nwant %s: %s", code, msg, c.code, c.want)
			}
		})
	}
	// An ExclusiveStartShardId that names no shard is no error: the page
	// goes on after the shards whose IDs sort before it.
	for _, c := range []struct {
		start string
		n     int
	}{{unknownShard, 1}, {"zzzzzzzzzzzzzzzzzzzzzzzzsfasdgagadfadfgagkjsdfsfsdjfjks", 0}} {
		out, err := e.st.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn, ExclusiveStartShardId: aws.String(c.start)})
		if err != nil || len(out.StreamDescription.Shards) != c.n {
			t.Errorf("DescribeStream after %s: %v, want %d shards", c.start, err, c.n)
		}
	}
	// A sequence number of the shard, AT and AFTER, is accepted.
	for _, typ := range []stypes.ShardIteratorType{stypes.ShardIteratorTypeAtSequenceNumber, stypes.ShardIteratorTypeAfterSequenceNumber} {
		if err := iter(typ, &shard, &seq, stream)(); err != nil {
			t.Errorf("%s %s: %v", typ, seq, err)
		}
	}
}
