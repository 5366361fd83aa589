package sinks

import (
	"io"

	"github.com/ttl-archiver/archiver/sinks/filesink"
)

// The file and stdout sinks are package filesink's; these names keep
// their callers writing sinks.FileSink and the rest.
type (
	// FileSink appends archive lines to one file per table and hour:
	// [filesink.Sink].
	FileSink = filesink.Sink
	// WriterSink writes archive lines to an io.Writer (stdout://):
	// [filesink.Writer].
	WriterSink = filesink.Writer
)

// ErrDirectoryInUse is matched by the error of a file sink opened on a
// directory another file sink holds: [filesink.ErrDirectoryInUse].
var ErrDirectoryInUse = filesink.ErrDirectoryInUse

// NewFileSink opens a file sink writing under dir: [filesink.New].
func NewFileSink(dir string, o Options) (*FileSink, error) { return filesink.New(dir, o) }

// NewFileSinkWith opens a file sink as c configures it:
// [filesink.NewWith].
func NewFileSinkWith(c FileConfig, o Options) (*FileSink, error) { return filesink.NewWith(c, o) }

// NewWriterSink returns a sink writing archive lines (or, with item, the
// items as plain JSON) to w: [filesink.NewWriter].
func NewWriterSink(name string, w io.Writer, item bool, o Options) *WriterSink {
	return filesink.NewWriter(name, w, item, o)
}
