//go:build !unix

package checkpoint

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("lock held elsewhere")

// flock is not available on this platform: the file store refuses to open
// rather than run unlocked.
func flock(f *os.File) error {
	return errors.New("the file checkpoint store needs flock, which this platform lacks")
}
