package sinks

import (
	"context"

	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
)

// ErrNotRecording is returned by Record of a sink opened with
// manifests=false: [recorder.ErrNotRecording].
var ErrNotRecording = recorder.ErrNotRecording

// manifestRecorder is what the consumer asks of a sink that records
// coverage manifests; the consumer's interface is its own, and this one
// holds the sinks to the same two methods.
type manifestRecorder interface {
	Record(ctx context.Context, r manifest.Range) error
	RecordDue(streamARN, shardID string) bool
}

var (
	_ manifestRecorder = (*S3Sink)(nil)
	_ manifestRecorder = (*FileSink)(nil)
)

// unrecorded is a sink opened with manifests=false as Open returns it:
// its methods without Record and RecordDue, so that the consumer finds
// nothing to record with and waits for no manifest of it.
type unrecorded struct{ preflightSink }

type preflightSink interface {
	Sink
	Preflighter
}

// recording returns s as Open does: wrapped in unrecorded when c or
// o.NoManifests turns recording off.
func recording(s preflightSink, c ManifestConfig, o Options) Sink {
	if c.Off || o.NoManifests {
		return unrecorded{s}
	}
	return s
}
