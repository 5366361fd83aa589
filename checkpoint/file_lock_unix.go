//go:build unix

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// errWouldBlock is matched by flock's error when another holder has the lock.
var errWouldBlock = syscall.EWOULDBLOCK

// flock takes an exclusive, non-blocking flock on f. Locks belong to the
// open file description, so a second open of the same file, even in this
// process, conflicts; closing f releases it, also when the process dies.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EAGAIN):
			return fmt.Errorf("flock: %w", errWouldBlock)
		}
		return err
	}
}
