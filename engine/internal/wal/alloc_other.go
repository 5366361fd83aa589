//go:build !linux

package wal

import "os"

// allocate cannot reserve disk space on this system: the log learns of a
// full disk only when a write fails.
func allocate(f *os.File, off, n int64) error { return errUnsupported }
