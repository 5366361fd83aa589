package filesink

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

func TestFilePreflight(t *testing.T) {
	ctx := testkit.Ctx(t)
	t.Run("writable", func(t *testing.T) {
		s, dir := newTestFileSink(t)
		if err := s.Preflight(ctx); err != nil {
			t.Fatal(err)
		}
		// Only the sink's own lock folder stays.
		if left, _ := os.ReadDir(dir); len(left) != 1 || left[0].Name() != "_archiver" {
			t.Fatalf("preflight left %v behind", left)
		}
	})
	t.Run("a file where the directory was", func(t *testing.T) {
		s, dir := newTestFileSink(t)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		err := s.Preflight(ctx)
		testkit.WantPreflightError(t, err, "file://"+dir, sinkapi.CheckDirectoryWritable, "not a directory")
		if !sinkapi.IsPermanent(err) {
			t.Fatalf("%v is not permanent", err)
		}
	})
	t.Run("read-only directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("permissions do not stop root")
		}
		s, dir := newTestFileSink(t)
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		err := s.Preflight(ctx)
		testkit.WantPreflightError(t, err, "file://"+dir, sinkapi.CheckDirectoryWritable)
		if !errors.Is(err, syscall.EACCES) || !sinkapi.IsPermanent(err) {
			t.Fatalf("%v, want a permanent EACCES", err)
		}
	})
}
