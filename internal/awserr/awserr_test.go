package awserr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

// answered wraps err as the SDK does for an HTTP answer with status.
func answered(status int, err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem",
		Err: &awshttp.ResponseError{RequestID: "r", ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      err,
		}}}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, None},
		{"provisioned throughput, typed", answered(400, &ddbtypes.ProvisionedThroughputExceededException{}), Throttled},
		{"streams limit exceeded, typed", &streamtypes.LimitExceededException{}, Throttled},
		{"limit exceeded after max attempts", &retry.MaxAttemptsError{Attempt: 3, Err: &streamtypes.LimitExceededException{}}, Throttled},
		{"limit exceeded joined with quota error", errors.Join(&streamtypes.LimitExceededException{}, errors.New("retry quota exceeded")), Throttled},
		{"request limit exceeded", answered(400, &ddbtypes.RequestLimitExceeded{}), Throttled},
		{"generic throttling code", &smithy.GenericAPIError{Code: "ThrottlingException"}, Throttled},
		{"S3 SlowDown with 503", answered(503, &smithy.GenericAPIError{Code: "SlowDown"}), Throttled},
		{"KMS throttling through S3", answered(400, &smithy.GenericAPIError{Code: "KMS.ThrottlingException"}), Throttled},
		{"HTTP 429 without a code", answered(429, errors.New("too many")), Throttled},
		{"throttling after the caller gave up", fmt.Errorf("%w (gave up: %w)", answered(400, &smithy.GenericAPIError{Code: "ThrottlingException"}), context.DeadlineExceeded), Throttled},
		{"internal server error, typed", answered(500, &ddbtypes.InternalServerError{}), Transient},
		{"internal server error, generic", &smithy.GenericAPIError{Code: "InternalServerError", Fault: smithy.FaultServer}, Transient},
		{"transaction conflict", answered(400, &ddbtypes.TransactionConflictException{}), Transient},
		{"replicated write conflict", answered(400, &ddbtypes.ReplicatedWriteConflictException{}), Transient},
		{"server fault with an unknown code", &smithy.GenericAPIError{Code: "Whatever", Fault: smithy.FaultServer}, Transient},
		{"HTTP 503 without a code", answered(503, errors.New("boom")), Transient},
		{"HTTP 500 with an unknown code", answered(500, &smithy.GenericAPIError{Code: "Whatever"}), Transient},
		{"network", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, Transient},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), Transient},
		{"plain error", errors.New("something"), Transient},
		{"validation", answered(400, &smithy.GenericAPIError{Code: "ValidationException"}), Rejected},
		{"validation without an answer", &smithy.GenericAPIError{Code: "ValidationException"}, Rejected},
		{"access denied", answered(400, &smithy.GenericAPIError{Code: "AccessDeniedException"}), Rejected},
		{"bare 400", answered(400, errors.New("bad")), Rejected},
		{"condition failed", answered(400, &ddbtypes.ConditionalCheckFailedException{}), Refused},
		{"resource not found", answered(400, &ddbtypes.ResourceNotFoundException{}), Refused},
		{"403 with an unknown code", answered(403, &smithy.GenericAPIError{Code: "ExpiredTokenException"}), Refused},
		{"404 without a code", answered(404, errors.New("nope")), Refused},
		{"client fault without an answer", &smithy.GenericAPIError{Code: "Whatever", Fault: smithy.FaultClient}, Refused},
		{"unknown fault without an answer", &smithy.GenericAPIError{Code: "Whatever"}, Transient},
		{"canceled", fmt.Errorf("op: %w", context.Canceled), Canceled},
		{"deadline", &smithy.OperationError{Err: context.DeadlineExceeded}, Canceled},
		{"dial canceled", &net.OpError{Op: "dial", Err: context.Canceled}, Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestPredicates(t *testing.T) {
	tests := []struct {
		name                       string
		err                        error
		throttle, retry, condition bool
	}{
		{"nil", nil, false, false, false},
		{"throttled", answered(400, &ddbtypes.ProvisionedThroughputExceededException{}), true, true, false},
		{"transient", answered(500, &ddbtypes.InternalServerError{}), false, true, false},
		{"network", &net.OpError{Op: "read", Err: errors.New("reset")}, false, true, false},
		{"condition failed, typed", answered(400, &ddbtypes.ConditionalCheckFailedException{}), false, false, true},
		{"condition failed, generic", &smithy.GenericAPIError{Code: "ConditionalCheckFailedException", Fault: smithy.FaultClient}, false, false, true},
		{"rejected", answered(400, &smithy.GenericAPIError{Code: "ValidationException"}), false, false, false},
		{"canceled", context.Canceled, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if IsCredentials(tc.err) {
				t.Errorf("IsCredentials = true, want false")
			}
			if got := IsThrottle(tc.err); got != tc.throttle {
				t.Errorf("IsThrottle = %v, want %v", got, tc.throttle)
			}
			if got := IsRetryable(tc.err); got != tc.retry {
				t.Errorf("IsRetryable = %v, want %v", got, tc.retry)
			}
			if got := IsConditionFailed(tc.err); got != tc.condition {
				t.Errorf("IsConditionFailed = %v, want %v", got, tc.condition)
			}
		})
	}
}

// TestClassifyWhatTheSDKBuilds sends requests through a real DynamoDB
// client to a server that answers with errors the engine does not produce,
// so the chains classified are exactly those the SDK builds.
func TestClassifyWhatTheSDKBuilds(t *testing.T) {
	tests := []struct {
		status int
		body   string // a JSON error document; "" for none
		want   Class
	}{
		{400, `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow"}`, Throttled},
		{400, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow"}`, Throttled},
		{400, `{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}`, Rejected},
		{400, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"no"}`, Refused},
		{500, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"oops"}`, Transient},
		{503, `{"__type":"ServiceUnavailable","message":"later"}`, Transient},
		{502, "", Transient},
		{429, "", Throttled},
		{403, `{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"expired"}`, Refused},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d %s", tc.status, tc.body), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := dynamodb.New(dynamodb.Options{
				Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Retryer: aws.NopRetryer{},
				HTTPClient:  sdkhttp.Client(nil), // without retries, the SDK's closed-connection race would show
				Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
			})
			_, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
				Key: map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: "v"}}})
			if err == nil {
				t.Fatal("no error")
			}
			if got := Classify(err); got != tc.want {
				t.Errorf("Classify(%v) = %v, want %v", err, got, tc.want)
			}
			if got := StatusCode(err); got != tc.status {
				t.Errorf("StatusCode = %d, want %d", got, tc.status)
			}
		})
	}
	// A server that is gone: no answer at all.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", "")})
	_, err := c.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String("t")})
	if got := Classify(err); got != Transient {
		t.Errorf("refused connection: Classify(%v) = %v, want transient", err, got)
	}
}

func TestIsCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"S3 unknown access key", answered(403, &smithy.GenericAPIError{Code: "InvalidAccessKeyId"}), true},
		{"S3 wrong secret", answered(403, &smithy.GenericAPIError{Code: "SignatureDoesNotMatch"}), true},
		{"S3 expired session token", answered(400, &smithy.GenericAPIError{Code: "ExpiredToken"}), true},
		{"DynamoDB unknown access key", answered(400, &smithy.GenericAPIError{Code: "UnrecognizedClientException"}), true},
		{"versitygw unknown access key", answered(404, &smithy.GenericAPIError{Code: "XAdminUserNotFound"}), true},
		{"access denied to valid credentials", answered(403, &smithy.GenericAPIError{Code: "AccessDenied"}), false},
		{"a bare 403", answered(403, errors.New("forbidden")), false},
		{"no such bucket", answered(404, &smithy.GenericAPIError{Code: "NoSuchBucket"}), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsCredentials(tc.err); got != tc.want {
				t.Errorf("IsCredentials = %v, want %v", got, tc.want)
			}
		})
	}
}
