package shard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func TestClassify(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	resp := func(status int) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      errors.New("boom"),
		}}
	}
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want errKind
	}{
		{"expired", bg, &types.ExpiredIteratorException{}, errExpired},
		{"expired wrapped by retryer", bg, &retry.MaxAttemptsError{Attempt: 3, Err: fmt.Errorf("op: %w", &types.ExpiredIteratorException{})}, errExpired},
		{"trimmed", bg, &types.TrimmedDataAccessException{}, errTrimmed},
		{"limit exceeded", bg, &types.LimitExceededException{}, errThrottle},
		{"limit exceeded after max attempts", bg, &retry.MaxAttemptsError{Attempt: 3, Err: &types.LimitExceededException{}}, errThrottle},
		{"limit exceeded joined with quota error", bg, errors.Join(&types.LimitExceededException{}, errors.New("retry quota exceeded")), errThrottle},
		{"not found", bg, &types.ResourceNotFoundException{}, errNotFound},
		{"generic throttling code", bg, &smithy.GenericAPIError{Code: "ThrottlingException"}, errThrottle},
		{"provisioned throughput", bg, &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}, errThrottle},
		{"generic expired code", bg, &smithy.GenericAPIError{Code: "ExpiredIteratorException"}, errExpired},
		{"validation", bg, &smithy.GenericAPIError{Code: "ValidationException"}, errRejected},
		{"internal server error", bg, &smithy.GenericAPIError{Code: "InternalServerError", Fault: smithy.FaultServer}, errOther},
		{"http 503", bg, resp(503), errOther},
		{"http 429", bg, resp(429), errThrottle},
		{"network", bg, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, errOther},
		{"our context canceled", canceled, fmt.Errorf("op: %w", context.Canceled), errCanceled},
		{"unknown", bg, errors.New("something"), errOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.ctx, tc.err); got != tc.want {
				t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestParseStartPosition(t *testing.T) {
	tests := []struct {
		in      string
		want    StartPosition
		wantErr bool
	}{
		{"", TrimHorizon, false},
		{"trim-horizon", TrimHorizon, false},
		{"TRIM_HORIZON", TrimHorizon, false},
		{"latest", Latest, false},
		{"LATEST", Latest, false},
		{"earliest", "", true},
	}
	for _, tc := range tests {
		got, err := ParseStartPosition(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseStartPosition(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestTableFromStreamARN(t *testing.T) {
	tests := map[string]string{
		"arn:aws:dynamodb:us-east-1:000000000000:table/orders/stream/2026-01-01T00:00:00.000": "orders",
		"arn:aws:dynamodb:us-east-1:000000000000:table/a/b/stream/x":                          "a/b",
		"arn:aws:dynamodb:us-east-1:000000000000:table/orders":                                "",
		"nonsense": "",
	}
	for in, want := range tests {
		if got := TableFromStreamARN(in); got != want {
			t.Errorf("TableFromStreamARN(%q) = %q, want %q", in, got, want)
		}
	}
}

type nopProcessor struct{}

func (nopProcessor) Process(context.Context, Batch) error               { return nil }
func (nopProcessor) ShardEnded(context.Context, string, string) error   { return nil }
func (nopProcessor) ShardStopped(context.Context, string, string) error { return nil }

func TestNewRejectsBadOptions(t *testing.T) {
	arn := "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/1"
	streams := watch(t, nil)
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no streams client", Options{Processor: nopProcessor{}, StreamARNs: []string{arn}}, "Options.Streams"},
		{"no processor", Options{Streams: streams, StreamARNs: []string{arn}}, "Options.Processor"},
		{"nothing to read", Options{Streams: streams, Processor: nopProcessor{}}, "nothing to read"},
		{"tables without client", Options{Streams: streams, Processor: nopProcessor{}, TableNames: []string{"t"}}, "Options.Tables"},
		{"bad arn", Options{Streams: streams, Processor: nopProcessor{}, StreamARNs: []string{"orders"}}, "StreamARNs[0]"},
		{"bad start", Options{Streams: streams, Processor: nopProcessor{}, StreamARNs: []string{arn}, Start: "middle"}, "Options.Start"},
		{"negative", Options{Streams: streams, Processor: nopProcessor{}, StreamARNs: []string{arn}, MaxConcurrentShards: -1}, "negative"},
		{"negative retention", Options{Streams: streams, Processor: nopProcessor{}, StreamARNs: []string{arn}, StreamRetention: -time.Hour}, "negative"},
		{"limit", Options{Streams: streams, Processor: nopProcessor{}, StreamARNs: []string{arn}, GetRecordsLimit: 5000}, "GetRecordsLimit"},
		{"unnamed region", Options{Streams: streams, Processor: nopProcessor{}, StreamARNs: []string{arn}, Regions: []Region{{Streams: streams}}}, "Regions[0]: Name"},
		{"region twice", Options{Streams: streams, Processor: nopProcessor{}, StreamARNs: []string{arn},
			Regions: []Region{{Name: "eu-west-1", Streams: streams, Tables: tablesFunc(nil)}, {Name: "eu-west-1", Streams: streams, Tables: tablesFunc(nil)}}}, "twice"},
		{"region without clients", Options{Streams: streams, Processor: nopProcessor{}, StreamARNs: []string{arn}, Regions: []Region{{Name: "eu-west-1"}}}, "Streams and Tables"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestDropRead(t *testing.T) {
	rec := func(seq string) types.Record {
		if seq == "" {
			return types.Record{Dynamodb: &types.StreamRecord{}} // malformed: no sequence number
		}
		return types.Record{Dynamodb: &types.StreamRecord{SequenceNumber: &seq}}
	}
	recs := func(seqs ...string) []types.Record {
		var out []types.Record
		for _, s := range seqs {
			out = append(out, rec(s))
		}
		return out
	}
	tests := []struct {
		name  string
		recs  []types.Record
		skip  int
		after bool
		want  int // records kept (from the end)
	}{
		{"re-read from the horizon", recs("98", "99", "100", "101"), 0, false, 2},
		{"malformed record before seq is dropped with it", recs("98", "", "99", "100"), 0, false, 1},
		{"after seq: queued malformed records skipped", recs("", "", "100"), 2, true, 1},
		{"after seq: only as many as were queued", recs("", "", "100"), 1, true, 2},
		{"horizon with seq's record: queued malformed skipped", recs("98", "99", "", "100"), 1, false, 1},
		{"horizon without seq's record (trimmed): malformed kept", recs("", "100"), 1, false, 2},
		{"nothing to drop", recs("100", "101"), 0, true, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := dropRead(tc.recs, "99", tc.skip, tc.after)
			if len(got) != tc.want || (tc.want > 0 && &got[0] != &tc.recs[len(tc.recs)-tc.want]) {
				t.Fatalf("kept %d records, want the last %d", len(got), tc.want)
			}
		})
	}
}

// FuzzParseInputs feeds arbitrary text to the package's two small parsers:
// neither may panic, and their results must be consistent.
func FuzzParseInputs(f *testing.F) {
	f.Add("arn:aws:dynamodb:us-east-1:000000000000:table/orders/stream/2026-01-01T00:00:00.000")
	f.Add("latest")
	f.Add("TRIM_HORIZON")
	f.Add(":table//stream/")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if name := TableFromStreamARN(s); name != "" && !strings.Contains(s, ":table/"+name+"/stream/") {
			t.Fatalf("TableFromStreamARN(%q) = %q, not a part of the ARN", s, name)
		}
		p, err := ParseStartPosition(s)
		if (err == nil) != (p == TrimHorizon || p == Latest) {
			t.Fatalf("ParseStartPosition(%q) = %q, %v", s, p, err)
		}
	})
}

// tablesFunc is a TableAPI answering DescribeTable with f (nil: an empty
// description).
type tablesFunc func(name string) (*dynamodb.DescribeTableOutput, error)

func (f tablesFunc) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if f == nil {
		return &dynamodb.DescribeTableOutput{}, nil
	}
	return f(aws.ToString(in.TableName))
}
