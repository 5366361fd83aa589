package objstore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/internal/sdkhttp"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// LoadAWSConfig returns the AWS configuration (credentials, retryer, HTTP
// client) for a region; nil means config.LoadDefaultConfig with that
// region.
type LoadAWSConfig func(ctx context.Context, region string) (aws.Config, error)

// NewClient builds the S3 client an S3 sink of c uses: region (c's, else
// the AWS configuration's, else us-east-1 with an Endpoint), endpoint,
// path-style addressing, and no SDK retries (callers retry whole requests
// themselves). Credentials and the HTTP client come from load (nil: the
// AWS default chain). The archive reader uses it too.
func NewClient(ctx context.Context, c S3Config, load LoadAWSConfig) (*s3.Client, error) {
	region := c.Region
	if region == "" && c.Endpoint != "" {
		region = "us-east-1"
	}
	if load == nil {
		load = func(ctx context.Context, region string) (aws.Config, error) {
			var opts []func(*config.LoadOptions) error
			if region != "" {
				opts = append(opts, config.WithRegion(region))
			}
			return config.LoadDefaultConfig(ctx, opts...)
		}
	}
	cfg, err := load(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("s3 sink: loading AWS configuration: %w", err)
	}
	if region == "" {
		region = cfg.Region
	}
	if region == "" {
		return nil, &sinkurl.ConfigError{URL: "s3://" + c.Bucket + "/" + c.Prefix, Param: "region", Problem: "not set and the AWS configuration has none"}
	}
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.Region = region
		if c.Endpoint != "" {
			so.BaseEndpoint = aws.String(c.Endpoint)
		}
		so.UsePathStyle = c.PathStyle
		so.HTTPClient = sdkhttp.Client(so.HTTPClient)
		// The sink retries whole uploads itself (with the same key and
		// bytes), so the SDK's own retries would only multiply attempts.
		so.RetryMaxAttempts = 1
	}), nil
}
