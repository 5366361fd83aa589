package benchkit

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// AWSConfig is the configuration of the sections' DynamoDB clients: the
// engine and the other local servers take any credentials.
func AWSConfig() aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")}
}

// Clients are DynamoDB and DynamoDB Streams clients of endpoint with the
// SDK's default HTTP client.
func Clients(endpoint string) (*dynamodb.Client, *dynamodbstreams.Client) {
	return clients(AWSConfig(), endpoint)
}

// PooledClients are Clients whose HTTP client keeps 256 idle connections,
// enough for the load of many concurrent callers.
func PooledClients(endpoint string) (*dynamodb.Client, *dynamodbstreams.Client) {
	cfg := AWSConfig()
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 256
	})
	return clients(cfg, endpoint)
}

func clients(cfg aws.Config, endpoint string) (*dynamodb.Client, *dynamodbstreams.Client) {
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	st := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(endpoint) })
	return db, st
}
