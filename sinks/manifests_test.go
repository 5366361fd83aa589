package sinks

import (
	"testing"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
)

// The tests of coverage manifests shared by the S3 and the file sink.

// TestEmptyEndRangeAtItsConflictKey: see testkit.CheckEmptyEndRange; in
// S3, no 412 and no conflict counted.
func TestEmptyEndRangeAtItsConflictKey(t *testing.T) {
	v := testkit.StartVersity(t)
	clock := testkit.NewClock()
	s, reg := newRecordingS3(t, v, "emptyend", "gzip", clock, zap.NewNop())
	testkit.CheckEmptyEndRange(t, s, s3Archive{v, "emptyend"}, func(evs []event.Event) { writeObject(t, s, evs) },
		func() map[string]float64 { return conflictCounts(t, reg) }, clock)
}
