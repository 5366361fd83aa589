//go:build !unix

package flock

import (
	"errors"
	"os"
)

// TryLock fails: flock is not available on this platform, and callers
// refuse to run unlocked rather than share what they own.
func TryLock(f *os.File) error {
	return errors.New("flock is not available on this platform")
}
