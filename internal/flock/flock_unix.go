//go:build unix

package flock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// TryLock takes an exclusive, non-blocking flock on f. Locks belong to the
// open file description, so a second open of the same file, even in this
// process, conflicts and gets an error matching [ErrHeld]; closing f
// releases the lock, also when the process dies.
func TryLock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EAGAIN):
			return fmt.Errorf("flock: %w", ErrHeld)
		}
		return fmt.Errorf("flock: %w", err)
	}
}
