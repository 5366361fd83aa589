// Package smallfs gives tests a real, small file system to fill: a tmpfs
// of a given size, mounted for the test and unmounted after it. Mounting
// needs root (or CAP_SYS_ADMIN) on Linux; where it is not permitted the
// test is skipped, since a full disk cannot be produced otherwise.
package smallfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes (a mount option such as "1m") on a
// new directory and returns it, or skips the test when it cannot.
func Mount(t testing.TB, size string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("a small file system is a tmpfs mount: Linux only")
	}
	dir := filepath.Join(t.TempDir(), "smallfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %s tmpfs (needs root): %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Fill writes a ballast file of n bytes into dir and returns its path;
// removing it gives the space back.
func Fill(t testing.TB, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// FillUp writes a ballast file into dir until the file system refuses
// more (ENOSPC) and returns its path: afterwards not even a small file
// fits. Removing it gives the space back.
func FillUp(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast-full")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v, want ENOSPC at the end", dir, err)
			}
			return path
		}
	}
}
