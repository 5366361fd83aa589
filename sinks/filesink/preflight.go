package filesink

import (
	"context"
	"errors"
	"os"

	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// Preflight proves the directory takes files: [sinkapi.CheckDirectoryWritable]
// creates a file in it, writes, fsyncs and removes it. The error is
// classified like a failed append (see [Sink]).
func (s *Sink) Preflight(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &sinkapi.PreflightError{Sink: s.Name(), Check: sinkapi.CheckDirectoryWritable, Err: err}
	}
	f, err := os.CreateTemp(s.dir, ".archiver-preflight-*")
	if err == nil {
		_, err = f.WriteString(sinkapi.PreflightBody)
		if err == nil {
			err = s.fsync(f)
		}
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	if err != nil {
		return &sinkapi.PreflightError{Sink: s.Name(), Check: sinkapi.CheckDirectoryWritable, Err: classifyFileError(err)}
	}
	return nil
}
