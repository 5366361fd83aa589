// Package flock takes the exclusive advisory locks (flock(2)) that keep a
// second archiver off what one archiver owns: a checkpoint file, a file
// sink's directory.
package flock

import "errors"

// ErrHeld is matched (errors.Is) by TryLock's error when another open file
// description holds the lock: another process, or another open of the same
// file in this one.
var ErrHeld = errors.New("lock held by another open file")
