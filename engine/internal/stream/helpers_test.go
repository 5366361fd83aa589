package stream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

// clock is a test clock that only moves when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 22, 6, 13, 59, 123e6, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a registry served over HTTP with a minimal JSON 1.0 handler and a
// real dynamodbstreams client pointed at it.
type env struct {
	reg    *Registry
	clk    *clock
	client *dynamodbstreams.Client
}

func newEnv(t testing.TB, o Options) *env {
	t.Helper()
	clk := newClock()
	if o.Now == nil {
		o.Now = clk.Now
	}
	reg := NewRegistry(o)
	srv := httptest.NewServer(jsonHandler(reg))
	t.Cleanup(srv.Close)
	client := dynamodbstreams.New(dynamodbstreams.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		// Through internal/sdkhttp, as every client of this module: the SDK
		// and net/http now and then fail a body read with "use of closed
		// network connection" (aws/aws-sdk-go-v2#2737), and a test that
		// turns retries off (TestThrottle) would see it.
		HTTPClient: sdkhttp.Client(nil),
	})
	return &env{reg: reg, clk: clk, client: client}
}

// jsonHandler is the smallest AWS JSON 1.0 server around Registry.Handle.
func jsonHandler(reg *Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		op, _ := strings.CutPrefix(req.Header.Get("X-Amz-Target"), "DynamoDBStreams_20120810.")
		body, _ := io.ReadAll(req.Body)
		resp, err := reg.Handle(req.Context(), "", op, body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if err != nil {
			var ae *awserr.Error
			if !errors.As(err, &ae) {
				ae = &awserr.Error{Code: awserr.CodeInternalServerError, Message: "not an awserr: " + err.Error(), Status: 500}
			}
			w.WriteHeader(ae.HTTPStatus())
			_ = json.NewEncoder(w).Encode(map[string]string{
				"__type":  "com.amazonaws.dynamodb.v20120810#" + ae.Code,
				"message": ae.Message,
			})
			return
		}
		b, err := json.Marshal(resp)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		_, _ = w.Write(b)
	})
}

var bg = context.Background()

// key builds a one-attribute key item.
func key(id string) attr.Item { return attr.Item{"pk": attr.Str(id)} }

// errCode returns the AWS error code of err ("" for nil).
func errCode(err error) string {
	if err == nil {
		return ""
	}
	var ae *awserr.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return "non-AWS error: " + err.Error()
}

// describeAll pages through DescribeStream with the SDK.
func (e *env) describeAll(t testing.TB, arn string, limit int32, filter *types.ShardFilter) (*types.StreamDescription, []types.Shard) {
	t.Helper()
	var all []types.Shard
	var start *string
	var last *types.StreamDescription
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("DescribeStream paging does not end")
		}
		in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start, ShardFilter: filter}
		if limit > 0 {
			in.Limit = aws.Int32(limit)
		}
		out, err := e.client.DescribeStream(bg, in)
		if err != nil {
			t.Fatalf("DescribeStream: %v", err)
		}
		last = out.StreamDescription
		all = append(all, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return last, all
		}
		start = out.StreamDescription.LastEvaluatedShardId
	}
}

// readShard reads a shard from TRIM_HORIZON until NextShardIterator is
// absent (closed shard) or a read returns nothing (open shard).
func (e *env) readShard(t testing.TB, arn, shardID string, limit int32) []types.Record {
	t.Helper()
	it, err := e.client.GetShardIterator(bg, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(arn), ShardId: aws.String(shardID), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatalf("GetShardIterator %s: %v", shardID, err)
	}
	return e.drain(t, it.ShardIterator, limit)
}

func (e *env) drain(t testing.TB, iter *string, limit int32) []types.Record {
	t.Helper()
	var recs []types.Record
	for i := 0; iter != nil; i++ {
		if i > 100000 {
			t.Fatal("GetRecords loop does not end")
		}
		in := &dynamodbstreams.GetRecordsInput{ShardIterator: iter}
		if limit > 0 {
			in.Limit = aws.Int32(limit)
		}
		out, err := e.client.GetRecords(bg, in)
		if err != nil {
			t.Fatalf("GetRecords: %v", err)
		}
		recs = append(recs, out.Records...)
		if len(out.Records) == 0 && out.NextShardIterator != nil {
			return recs // open shard, caught up
		}
		iter = out.NextShardIterator
	}
	return recs
}
