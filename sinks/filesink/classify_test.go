package filesink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

func TestClassifyFileError(t *testing.T) {
	for _, tc := range []struct {
		err       error
		permanent bool
	}{
		{syscall.EACCES, true},
		{syscall.EPERM, true},
		{syscall.EROFS, true},
		{syscall.ENOTDIR, true},
		{syscall.EISDIR, true},
		{syscall.ENAMETOOLONG, true},
		{syscall.ENOSPC, false},
		{syscall.EDQUOT, false},
		{syscall.EIO, false},
		{syscall.EMFILE, false},
		{syscall.EINTR, false},
		{errors.New("something else"), false},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			err := fmt.Errorf("file sink: %w", &os.PathError{Op: "open", Path: "/x", Err: tc.err})
			got := classifyFileError(err)
			if sinkapi.IsPermanent(got) != tc.permanent {
				t.Fatalf("IsPermanent(%v) = %v, want %v", got, sinkapi.IsPermanent(got), tc.permanent)
			}
			if !errors.Is(got, tc.err) || got.Error() != err.Error() {
				t.Fatalf("classified %v lost the cause or changed the message", got)
			}
		})
	}
}

// TestFileSinkFailureClasses makes the file system fail for real where it
// can: a file where a directory belongs is permanent, and so is a
// directory without write permission (skipped as root, whom permissions do
// not stop), and a symbolic link where the hour file or a folder belongs
// (the sink follows none below DIR, even one to /dev/full). A full device
// is not permanent; a regular file cannot be made to fill up on demand, so
// its fsync reports ENOSPC through the sink's fsync hook.
func TestFileSinkFailureClasses(t *testing.T) {
	hourFile := func(dir, table string) string { return filepath.Join(dir, table, "2026-03-04", "05.jsonl") }
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, s *Sink, dir string)
		permanent bool
		errno     error
	}{
		{"full device", func(t *testing.T, s *Sink, dir string) {
			s.fsync = func(f *os.File) error { return &os.PathError{Op: "fsync", Path: f.Name(), Err: syscall.ENOSPC} }
		}, false, syscall.ENOSPC},
		{"hour file is a link to /dev/full", func(t *testing.T, s *Sink, dir string) {
			mkdir(t, filepath.Dir(hourFile(dir, "t")))
			if err := os.Symlink("/dev/full", hourFile(dir, "t")); err != nil {
				t.Fatal(err)
			}
		}, true, errSymlink},
		{"table folder is a link", func(t *testing.T, s *Sink, dir string) {
			if err := os.Symlink(t.TempDir(), filepath.Join(dir, "t")); err != nil {
				t.Fatal(err)
			}
		}, true, errSymlink},
		{"file where the table directory belongs", func(t *testing.T, s *Sink, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "t"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, true, syscall.ENOTDIR},
		{"directory not writable", func(t *testing.T, s *Sink, dir string) {
			if os.Geteuid() == 0 {
				t.Skip("permissions do not stop root")
			}
			mkdir(t, filepath.Join(dir, "t"))
			if err := os.Chmod(filepath.Join(dir, "t"), 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(filepath.Join(dir, "t"), 0o755) })
		}, true, syscall.EACCES},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			s, dir := newTestFileSink(t)
			tc.setup(t, s, dir)
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			err := a.WaitAck(t, "b")
			if !errors.Is(err, tc.errno) || sinkapi.IsPermanent(err) != tc.permanent {
				t.Fatalf("ack error %v: want %v, permanent %v", err, tc.errno, tc.permanent)
			}
		})
	}
}

func mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
