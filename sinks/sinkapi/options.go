package sinkapi

import (
	"context"
	"errors"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/sinkurl"
)

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("sink closed")

// Options carries what sinks need from their host process.
type Options struct {
	// Logger receives the sinks' logs (default zap.NewNop()).
	Logger *zap.Logger
	// Registerer receives the sinks' metrics (default: none registered).
	// Several sinks may share one Registerer.
	Registerer prometheus.Registerer
	// AWSConfig returns the AWS configuration (credentials, retryer, HTTP
	// client) the S3 sink uses for region. Production passes the default
	// credential chain (the ECS task role); nil means
	// config.LoadDefaultConfig with that region.
	AWSConfig func(ctx context.Context, region string) (aws.Config, error)
	// Stdout is where stdout:// writes (default os.Stdout).
	Stdout io.Writer
	// NoManifests opens S3 and file sinks without coverage manifests, as
	// manifests=false does: for a caller that reads no stream and so will
	// never call Record (replay, restore tests, benches); such a sink
	// would otherwise track its objects for a Record that never comes.
	NoManifests bool
	// Worker names this worker (run's --worker-id, or the ECS task ID, or
	// HOSTNAME-PID) in the coverage manifests it writes, their writer
	// field, so that an auditor reading a manifest learns which task
	// proved the range. "" leaves the field out.
	Worker string
}

// Manifests is c as o has it: off when o says NoManifests, its writer
// o's Worker unless c names one.
func (o Options) Manifests(c sinkurl.ManifestConfig) sinkurl.ManifestConfig {
	c.Off = c.Off || o.NoManifests
	if c.Writer == "" {
		c.Writer = o.Worker
	}
	return c
}

// Log is o.Logger, or a logger that discards when it is nil.
func (o Options) Log() *zap.Logger {
	if o.Logger == nil {
		return zap.NewNop()
	}
	return o.Logger
}
