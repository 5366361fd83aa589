package sinks

import (
	"context"

	"github.com/ttl-archiver/archiver/sinks/natssink"
)

// The NATS sink is package natssink's; these names keep its callers
// writing sinks.NATSSink and the rest.
type (
	// NATSSink publishes one message per event: [natssink.Sink].
	NATSSink = natssink.Sink
	// NATSConfig configures a NATS sink: [natssink.Config].
	NATSConfig = natssink.Config
	// StreamSettings are the limits of the stream create-stream makes:
	// [natssink.StreamSettings].
	StreamSettings = natssink.StreamSettings
	// StreamIDs is what a JetStream stream held of a sink's subjects:
	// [natssink.StreamIDs].
	StreamIDs = natssink.StreamIDs
)

// The headers of every NATS message (see [natssink.HeaderTable]).
const (
	HeaderTable     = natssink.HeaderTable
	HeaderKind      = natssink.HeaderKind
	HeaderKeys      = natssink.HeaderKeys
	HeaderShard     = natssink.HeaderShard
	HeaderSequence  = natssink.HeaderSequence
	HeaderEventName = natssink.HeaderEventName
	HeaderRegion    = natssink.HeaderRegion
	HeaderDeletedBy = natssink.HeaderDeletedBy
)

// The NATS sink's defaults and bounds (see package natssink).
const (
	DefaultDuplicateWindow = natssink.DefaultDuplicateWindow
	DefaultStreamMaxAge    = natssink.DefaultStreamMaxAge
	DefaultMaxSubject      = natssink.DefaultMaxSubject
	MaxMaxSubject          = natssink.MaxMaxSubject
	// NATSRetryFor is how long a NATS message is re-published:
	// [natssink.RetryFor].
	NATSRetryFor = natssink.RetryFor
)

// NewNATS connects a NATS sink: [natssink.New].
func NewNATS(ctx context.Context, c NATSConfig, o Options) (*NATSSink, error) {
	return natssink.New(ctx, c, o)
}
