//go:build unix

package checkpoint

import (
	"os"

	iflock "github.com/ttl-archiver/archiver/internal/flock"
)

// errWouldBlock is matched by flock's error when another holder has the lock.
var errWouldBlock = iflock.ErrHeld

// flock takes an exclusive, non-blocking flock on f (see
// [iflock.TryLock]): a second open of the same file, even in this process,
// conflicts; closing f releases it, also when the process dies.
func flock(f *os.File) error { return iflock.TryLock(f) }
