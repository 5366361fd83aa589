package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

// endpointIsLoopback reports whether endpoint is an http(s) URL on this
// machine (a local engine).
func endpointIsLoopback(endpoint string) bool {
	if endpoint == "" {
		return false
	}
	u, err := url.Parse(endpoint)
	return err == nil && cli.IsLoopbackHost(u.Hostname())
}

// loadAWSConfig loads the default AWS configuration (environment, shared
// files, the ECS task role, IMDS) for region. With a loopback endpoint it
// never waits on the instance metadata service: it looks for credentials
// without IMDS, briefly, and signs with placeholder static credentials when
// there are none, as a local engine accepts any signature. A region is then
// optional (us-east-1). command ("run", "sweep") names the subcommand in
// a usage error.
func loadAWSConfig(ctx context.Context, command, region, endpoint string, log *zap.Logger) (aws.Config, error) {
	local := endpointIsLoopback(endpoint)
	opts := []func(*config.LoadOptions) error{}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if local {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	cfg.HTTPClient = sdkhttp.Client(cfg.HTTPClient)
	if cfg.Region == "" {
		if !local {
			return aws.Config{}, cli.Usagef("archiver %s: --region: no region configured (set --region, ARCHIVER_REGION or AWS_REGION)", command)
		}
		cfg.Region = "us-east-1"
	}
	if local {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cfg.Credentials.Retrieve(cctx)
		cancel()
		if err != nil {
			log.Info("no AWS credentials configured; signing requests to the local endpoint with placeholder credentials",
				zap.String("endpoint", redact.URL(endpoint)))
			cfg.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		}
	}
	return cfg, nil
}

// endpointClients are a DynamoDB and a DynamoDB Streams client of awsCfg
// sending to endpoint (AWS's own for its Region when empty); streamOpts
// adjust the Streams client.
func endpointClients(awsCfg aws.Config, endpoint string, streamOpts ...func(*dynamodbstreams.Options)) (*dynamodb.Client, *dynamodbstreams.Client) {
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	streams := dynamodbstreams.NewFromConfig(awsCfg, append([]func(*dynamodbstreams.Options){func(o *dynamodbstreams.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}}, streamOpts...)...)
	return ddb, streams
}
