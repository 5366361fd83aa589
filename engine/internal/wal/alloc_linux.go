//go:build linux

package wal

import (
	"errors"
	"os"
	"syscall"
)

// fallocKeepSize is FALLOC_FL_KEEP_SIZE: reserve blocks past the end of
// the file without changing its size, so a reader (and Replay) sees only
// what was written.
const fallocKeepSize = 1

// allocate reserves disk space for bytes [off, off+n) of f. It reports
// errUnsupported when the file system cannot reserve space (the log then
// learns of a full disk only when a write fails).
func allocate(f *os.File, off, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), fallocKeepSize, off, n)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
			return errUnsupported
		}
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
}
