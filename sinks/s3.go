package sinks

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/sinks/s3sink"
)

// The S3 sink is package s3sink's; these names keep its callers writing
// sinks.S3Sink and the rest.
type (
	// S3Sink buffers events per shard and uploads objects: [s3sink.Sink].
	S3Sink = s3sink.Sink
	// S3API is the part of the S3 client an S3 sink uses: [s3sink.API].
	S3API = s3sink.API
	// S3Lister is the listing an S3 sink's client needs for manifests:
	// [s3sink.Lister].
	S3Lister = s3sink.Lister
)

// The outcomes of a key conflict, the outcome label of
// archiver_sink_conflicts_total (see [s3sink.ConflictSameContent]).
const (
	ConflictSameContent = s3sink.ConflictSameContent
	ConflictSameEvents  = s3sink.ConflictSameEvents
	ConflictDistinctKey = s3sink.ConflictDistinctKey
	ConflictUnresolved  = s3sink.ConflictUnresolved
)

// NewS3 opens an S3 sink: [s3sink.New].
func NewS3(ctx context.Context, c S3Config, o Options) (*S3Sink, error) { return s3sink.New(ctx, c, o) }

// NewS3Client builds the S3 client an S3 sink of c uses:
// [s3sink.NewClient].
func NewS3Client(ctx context.Context, c S3Config, o Options) (*s3.Client, error) {
	return s3sink.NewClient(ctx, c, o)
}

// NewS3WithClient opens an S3 sink on a given client:
// [s3sink.NewWithClient].
func NewS3WithClient(c S3Config, api S3API, o Options) (*S3Sink, error) {
	return s3sink.NewWithClient(c, api, o)
}
