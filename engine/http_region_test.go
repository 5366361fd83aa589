package engine_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	sttypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// Each Region has its own tables and streams, chosen by the credential
// scope: the same name in two Regions is two tables, an ARN of another
// Region is not found, and ListTables and ListStreams list one Region.
func TestRegionsAreSeparate(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := t.Context()
	east, west := b.In("us-east-1"), b.In("eu-west-1")
	eastStream := enginetest.CreateTable(t, east.DynamoDB, enginetest.Table{Name: "Sessions"})
	westStream := enginetest.CreateTable(t, west.DynamoDB, enginetest.Table{Name: "Sessions"})
	enginetest.CreateTable(t, west.DynamoDB, enginetest.Table{Name: "OnlyWest"})
	if !strings.Contains(westStream, ":eu-west-1:") || !strings.Contains(eastStream, ":us-east-1:") {
		t.Fatalf("stream ARNs %s, %s: want each in its Region", eastStream, westStream)
	}
	if _, err := west.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("Sessions"),
		Item: map[string]types.AttributeValue{"pk": S("w")}}); err != nil {
		t.Fatal(err)
	}
	got, err := east.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("Sessions"), Key: map[string]types.AttributeValue{"pk": S("w")}})
	if err != nil || got.Item != nil {
		t.Fatalf("us-east-1 GetItem of an item written in eu-west-1: %v, %v; want no item", got.Item, err)
	}
	for _, c := range []struct {
		r    enginetest.Regional
		want string
	}{{east, "Sessions"}, {west, "OnlyWest,Sessions"}} {
		lt, err := c.r.DynamoDB.ListTables(ctx, &dynamodb.ListTablesInput{})
		if err != nil || strings.Join(lt.TableNames, ",") != c.want {
			t.Errorf("%s ListTables = %v, %v; want %s", c.r.Region, lt.TableNames, err, c.want)
		}
	}
	ls, err := west.Streams.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{})
	if err != nil || len(ls.Streams) != 2 {
		t.Fatalf("eu-west-1 ListStreams: %v, %v; want its 2 streams", ls, err)
	}
	// Another Region's ARNs are not found.
	westARN := "arn:aws:dynamodb:eu-west-1:000000000000:table/OnlyWest"
	if _, err := east.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(westARN)}); errCode(err) != "ResourceNotFoundException" {
		t.Errorf("us-east-1 DescribeTable of an eu-west-1 ARN: %v, want ResourceNotFoundException", err)
	}
	if _, err := west.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(westARN)}); err != nil {
		t.Errorf("eu-west-1 DescribeTable of its own ARN: %v", err)
	}
	if _, err := east.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(westStream)}); errCode(err) != "ResourceNotFoundException" {
		t.Errorf("us-east-1 DescribeStream of an eu-west-1 stream: %v, want ResourceNotFoundException", err)
	}
	// The Go API: a name is in the default Region, an ARN in its own.
	if arn, err := b.Engine.StreamARN("Sessions"); err != nil || arn != eastStream {
		t.Errorf("StreamARN(Sessions) = %s, %v; want %s", arn, err, eastStream)
	}
	if _, err := b.Engine.StreamARN("OnlyWest"); err == nil {
		t.Error("StreamARN(OnlyWest) by name found an eu-west-1 table from the default Region")
	}
	if arn, err := b.Engine.StreamARN(westARN); err != nil || !strings.Contains(arn, ":eu-west-1:") {
		t.Errorf("StreamARN(%s) = %s, %v", westARN, arn, err)
	}
	if err := b.Engine.ForceRollover(westARN); err != nil {
		t.Errorf("ForceRollover by an eu-west-1 ARN: %v", err)
	}
	if got := strings.Join(b.Engine.Regions(), ","); got != "eu-west-1,us-east-1" {
		t.Errorf("Regions() = %s", got)
	}
}

// ListStreams' ExclusiveStartStreamArn of another Region's stream is a
// stream not found, as DynamoDB answers a start it does not know, where it
// would otherwise page this Region's list from that stream's place; a
// start of this Region's pages on.
func TestListStreamsForeignStart(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1, Clock: engine.NewManualClock(t0)})
	ctx := t.Context()
	east, west := b.In("us-east-1"), b.In("eu-west-1")
	first := enginetest.CreateTable(t, east.DynamoDB, enginetest.Table{Name: "First"})
	westStream := enginetest.CreateTable(t, west.DynamoDB, enginetest.Table{Name: "West"})
	second := enginetest.CreateTable(t, east.DynamoDB, enginetest.Table{Name: "Second"})
	_, err := east.Streams.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{ExclusiveStartStreamArn: aws.String(westStream)})
	if want := "Requested resource not found: Stream: " + westStream + " not found"; errCode(err) != "ResourceNotFoundException" || errMsg(err) != want {
		t.Errorf("us-east-1 ListStreams from an eu-west-1 stream: %v; want ResourceNotFoundException %q", err, want)
	}
	out, err := east.Streams.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{ExclusiveStartStreamArn: aws.String(first)})
	if err != nil || len(out.Streams) != 1 || aws.ToString(out.Streams[0].StreamArn) != second {
		t.Errorf("us-east-1 ListStreams from its first stream: %+v, %v; want %s alone", out, err, second)
	}
	out, err = west.Streams.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{ExclusiveStartStreamArn: aws.String(westStream)})
	if err != nil || len(out.Streams) != 0 {
		t.Errorf("eu-west-1 ListStreams from its only stream: %+v, %v; want none", out, err)
	}
}

// A record's awsRegion is its stream's Region.
func TestRegionRecords(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := t.Context()
	west := b.In("ap-southeast-2")
	arn := enginetest.CreateTable(t, west.DynamoDB, enginetest.Table{Name: "Tab1"})
	if _, err := west.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("Tab1"), Item: map[string]types.AttributeValue{"pk": S("a")}}); err != nil {
		t.Fatal(err)
	}
	recs := readStream(t, west.Streams, arn)
	if len(recs) != 1 || aws.ToString(recs[0].AwsRegion) != "ap-southeast-2" {
		t.Fatalf("records %+v: want one with awsRegion ap-southeast-2", recs)
	}
	// An iterator of another Region's stream is not served there.
	ds, err := west.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	it, err := west.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
		ShardId: ds.StreamDescription.Shards[0].ShardId, ShardIteratorType: "TRIM_HORIZON"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); errCode(err) != "ResourceNotFoundException" {
		t.Errorf("us-east-1 GetRecords with an ap-southeast-2 iterator: %v, want ResourceNotFoundException", err)
	}
}

// A scope naming no valid Region is a 400 naming it; no scope, or one that
// does not parse, is the default Region.
func TestRegionScope(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1, Region: "eu-north-1"})
	post := func(auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, b.Endpoint, strings.NewReader(`{}`))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.DescribeEndpoints")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Type      string `json:"__type"`
			Message   string `json:"message"`
			Endpoints []struct{ Address string }
		}
		json.NewDecoder(resp.Body).Decode(&out)
		if out.Type != "" {
			return resp.StatusCode, out.Type + ": " + out.Message
		}
		return resp.StatusCode, out.Endpoints[0].Address
	}
	sig := func(scope string) string {
		return "AWS4-HMAC-SHA256 Credential=" + scope + ", SignedHeaders=host, Signature=00"
	}
	for _, c := range []struct {
		auth   string
		status int
		want   string
	}{
		{"", 200, "dynamodb.eu-north-1.amazonaws.com"},
		{sig("AKID/20261101/sa-east-1/dynamodb/aws4_request"), 200, "dynamodb.sa-east-1.amazonaws.com"},
		{sig("AKID/20261101/dynamodb/aws4_request"), 200, "dynamodb.eu-north-1.amazonaws.com"},
		{"Bearer whatever", 200, "dynamodb.eu-north-1.amazonaws.com"},
		{sig("AKID/20261101/US_EAST_1/dynamodb/aws4_request"), 400, "InvalidSignatureException: Credential should be scoped to a valid region, not 'US_EAST_1'."},
		{sig("AKID/20261101//dynamodb/aws4_request"), 400, "not ''."},
	} {
		status, got := post(c.auth)
		if status != c.status || !strings.Contains(got, c.want) {
			t.Errorf("Authorization %q: %d %s; want %d %s", c.auth, status, got, c.status, c.want)
		}
	}
}

// readStream reads every record of a stream's shards from TRIM_HORIZON.
func readStream(t testing.TB, st *dynamodbstreams.Client, arn string) []sttypes.Record {
	t.Helper()
	ctx := t.Context()
	ds, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatalf("DescribeStream %s: %v", arn, err)
	}
	var out []sttypes.Record
	for _, sh := range ds.StreamDescription.Shards {
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: "TRIM_HORIZON"})
		if err != nil {
			t.Fatalf("GetShardIterator: %v", err)
		}
		iter := it.ShardIterator
		for iter != nil {
			gr, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatalf("GetRecords: %v", err)
			}
			out = append(out, gr.Records...)
			if len(gr.Records) == 0 {
				break
			}
			iter = gr.NextShardIterator
		}
	}
	return out
}
