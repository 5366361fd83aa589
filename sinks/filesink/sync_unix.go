package filesink

import (
	"errors"
	"syscall"
)

// isUnsyncable reports whether a Sync error only says the file (a pipe, a
// terminal) cannot be synced.
func isUnsyncable(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EBADF)
}
