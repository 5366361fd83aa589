package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

// env is one engine listening on a free loopback port with SDK clients
// pointed at it.
type env struct {
	srv    *engine.Server
	eng    *engine.Engine
	db     *dynamodb.Client
	st     *dynamodbstreams.Client
	clock  *engine.ManualClock
	ctx    context.Context
	t      testing.TB
	closed bool
}

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// newEnv starts an engine with a manual clock at t0 and the sweeper off
// (tests call SweepTTL), unless o says otherwise.
func newEnv(t testing.TB, o engine.Options) *env {
	t.Helper()
	clock := engine.NewManualClock(t0)
	if o.Clock == nil {
		o.Clock = clock
	}
	if o.TTLInterval == 0 {
		o.TTLInterval = -1
	}
	srv, err := engine.Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		// Through internal/sdkhttp, as every client of this module: a
		// request body the SDK closes while net/http still reads it would
		// otherwise fail a call now and then ("use of closed network
		// connection" under HTTP 200), three attempts in a row on a busy
		// machine (TestPageCap's large Scan pages).
		HTTPClient: sdkhttp.Client(nil),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &env{
		srv:   srv,
		eng:   srv.Engine(),
		clock: clock,
		ctx:   ctx,
		t:     t,
		// The default retryer, as applications use it: it also retries
		// the SDK's own "use of closed network connection" race
		// (aws/aws-sdk-go-v2#2737), which a fast local server triggers on
		// large responses.
		db: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(srv.Endpoint())
		}),
		// Streams calls are not retried on anything the API answers (tests
		// see throttling and expired iterators as they are), only on
		// connection errors: the SDK race above.
		st: dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
			o.BaseEndpoint = aws.String(srv.Endpoint())
			o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = 3
				so.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
			})
		}),
	}
}

func S(s string) types.AttributeValue  { return &types.AttributeValueMemberS{Value: s} }
func N(s string) types.AttributeValue  { return &types.AttributeValueMemberN{Value: s} }
func B(b []byte) types.AttributeValue  { return &types.AttributeValueMemberB{Value: b} }
func BOOL(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

type item = map[string]types.AttributeValue

// errCode returns the AWS error code of err, or "" for nil.
func errCode(err error) string {
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return "not an API error: " + err.Error()
}

func errMsg(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// createTable makes a PAY_PER_REQUEST table with hash key pk (S) and, when
// rangeType is not "", range key sk of that type.
func (e *env) createTable(name, rangeType string, mod func(*dynamodb.CreateTableInput)) *types.TableDescription {
	e.t.Helper()
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	}
	if rangeType != "" {
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange})
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeType(rangeType)})
	}
	if mod != nil {
		mod(in)
	}
	out, err := e.db.CreateTable(e.ctx, in)
	if err != nil {
		e.t.Fatalf("CreateTable %s: %v", name, err)
	}
	return out.TableDescription
}

func (e *env) put(table string, it item) {
	e.t.Helper()
	if _, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
		e.t.Fatalf("PutItem: %v", err)
	}
}

func (e *env) get(table string, key item) item {
	e.t.Helper()
	out, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		e.t.Fatalf("GetItem: %v", err)
	}
	return out.Item
}

func (e *env) enableTTL(table, attrName string) {
	e.t.Helper()
	_, err := e.db.UpdateTimeToLive(e.ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrName), Enabled: aws.Bool(true)},
	})
	if err != nil {
		e.t.Fatalf("UpdateTimeToLive: %v", err)
	}
}

func (e *env) sweep() int {
	e.t.Helper()
	n, err := e.eng.SweepTTL(e.ctx)
	if err != nil {
		e.t.Fatalf("SweepTTL: %v", err)
	}
	return n
}

func (e *env) scanAll(in *dynamodb.ScanInput) []item {
	e.t.Helper()
	var all []item
	for {
		out, err := e.db.Scan(e.ctx, in)
		if err != nil {
			e.t.Fatalf("Scan: %v", err)
		}
		all = append(all, out.Items...)
		if out.LastEvaluatedKey == nil {
			return all
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func sOf(it item, name string) string {
	switch v := it[name].(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case nil:
		return "<missing>"
	}
	return "<other>"
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
