//go:build unix

package flock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ttl-archiver/archiver/internal/flock"
)

// TestTryLock: a second open of a locked file is refused with ErrHeld,
// and closing the holder frees the lock.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		t.Helper()
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	first, second := open(), open()
	if err := flock.TryLock(first); err != nil {
		t.Fatal(err)
	}
	if err := flock.TryLock(second); !errors.Is(err, flock.ErrHeld) {
		t.Fatalf("second lock: %v, want ErrHeld", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := flock.TryLock(second); err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
}
