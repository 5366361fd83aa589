package sinks

import (
	"context"
	"errors"
)

// NewS3 is not implemented yet.
func NewS3(ctx context.Context, c S3Config, o Options) (Sink, error) {
	return nil, errors.New("s3 sink: not implemented yet")
}

