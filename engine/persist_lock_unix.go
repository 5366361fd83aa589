//go:build unix

package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive flock on DIR/LOCK, so that one engine at a
// time uses a data directory. The lock belongs to the returned file:
// closing it, or the process dying, releases it.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("engine: data directory %s: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EAGAIN):
		f.Close()
		return nil, fmt.Errorf("engine: data directory %s is in use: another engine holds %s", dir, path)
	default:
		f.Close()
		return nil, fmt.Errorf("engine: lock %s: %w", path, err)
	}
}
