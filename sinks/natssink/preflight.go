package natssink

import (
	"context"

	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// Preflight proves the sink can publish. [sinkapi.CheckConnected]: a round trip to
// the server. [sinkapi.CheckStreamCaptures], in JetStream mode: a stream captures
// the subject template (creating it first when create-stream says so), as
// [New] checked already; the check runs again so a stream deleted
// since shows before reading starts. [CheckMsgTTL], with msg-ttl: the
// server is 2.11 or later and that stream allows per-message TTLs.
func (s *Sink) Preflight(ctx context.Context) error {
	ctx, cancel := sinkapi.PreflightContext(ctx)
	defer cancel()
	c := s.cur()
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return &sinkapi.PreflightError{Sink: s.name, Check: sinkapi.CheckConnected, Err: err}
	}
	if c.js == nil {
		return nil
	}
	if _, err := s.checkStream(ctx); err != nil {
		return &sinkapi.PreflightError{Sink: s.name, Check: streamCheck(err), Err: err}
	}
	return nil
}
