//go:build unix

package filesink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// TestFileSinkURLModes: file-mode= and dir-mode= take octal permission
// bits that leave the owner what the sink needs; anything else is a
// sinkurl.ConfigError naming the option.
func TestFileSinkURLModes(t *testing.T) {
	for _, tc := range []struct {
		query      string
		file, dir  fs.FileMode
		badParam   string
		badMention string
	}{
		{query: "", file: 0o640, dir: 0o750},
		{query: "file-mode=0644&dir-mode=0755", file: 0o644, dir: 0o755},
		{query: "file-mode=600&dir-mode=0o700", file: 0o600, dir: 0o700},
		{query: "file-mode=rw-r-----", badParam: "file-mode", badMention: "not an octal mode"},
		{query: "file-mode=", badParam: "file-mode", badMention: "not an octal mode"},
		{query: "file-mode=0648", badParam: "file-mode", badMention: "not an octal mode"},
		{query: "file-mode=04640", badParam: "file-mode", badMention: "beyond 0777"},
		{query: "file-mode=0440", badParam: "file-mode", badMention: "owner"},
		{query: "dir-mode=0600", badParam: "dir-mode", badMention: "owner"},
		{query: "dir-mode=-0750", badParam: "dir-mode", badMention: "not an octal mode"},
		{query: "dir-mode=0750&dir-mode=0700", badParam: "dir-mode", badMention: "more than once"},
		{query: "mode=0640", badParam: "mode", badMention: "unknown parameter"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			url := "file:///srv/archive?" + tc.query
			p, err := sinkurl.Parse(url)
			if err != nil {
				t.Fatal(err)
			}
			c, err := sinkurl.ParseFile(p)
			_, parseErr := sinkurl.ParseFileURL(url)
			if tc.badParam == "" {
				if err != nil || parseErr != nil {
					t.Fatalf("%v / %v", err, parseErr)
				}
				if c.Dir != "/srv/archive" || c.FileMode != tc.file || c.DirMode != tc.dir {
					t.Fatalf("got %+v", c)
				}
				return
			}
			var ce *sinkurl.ConfigError
			if !errors.As(err, &ce) || ce.Param != tc.badParam || !strings.Contains(ce.Problem, tc.badMention) {
				t.Fatalf("error %v, want a sinkurl.ConfigError on %s mentioning %q", err, tc.badParam, tc.badMention)
			}
			if _, _, err := open(testkit.Ctx(t), url, sinkapi.Options{}); err == nil || parseErr == nil {
				t.Fatal("open or ParseFileURL accepted the URL")
			}
		})
	}
}

// TestFileSinkModes: what the sink creates gets the configured modes
// exactly (0640 and 0750 by default), whatever the umask.
func TestFileSinkModes(t *testing.T) {
	for _, tc := range []struct {
		query     string
		file, dir fs.FileMode
	}{
		{"?events=expired", 0o640, 0o750},
		{"?file-mode=0666&dir-mode=0777", 0o666, 0o777},
		{"?file-mode=0600&dir-mode=0700", 0o600, 0o700},
	} {
		t.Run(tc.query, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			dir := t.TempDir()
			s, _, err := open(ctx, "file://"+dir+tc.query, sinkapi.Options{})
			if err != nil {
				t.Fatal(err)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			if err := a.WaitAck(t, "b"); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				rel  string
				want fs.FileMode
			}{
				{"t", tc.dir}, {"t/2026-03-04", tc.dir}, {"t/2026-03-04/05.jsonl", tc.file},
				{"_archiver", tc.dir}, {"_archiver/lock", tc.file},
			} {
				fi, err := os.Lstat(filepath.Join(dir, c.rel))
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != c.want {
					t.Errorf("%s: mode %#o, want %#o", c.rel, got, c.want)
				}
			}
		})
	}
}

// TestFileSinkOneWriterPerDirectory: a second sink on a directory another
// sink holds is refused with an error naming the directory, through
// New and through Open; once the first is closed, it opens.
func TestFileSinkOneWriterPerDirectory(t *testing.T) {
	ctx := testkit.Ctx(t)
	first, dir := newTestFileSink(t)
	if _, err := New(dir, sinkapi.Options{}); !errors.Is(err, ErrDirectoryInUse) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second New: %v, want ErrDirectoryInUse naming %s", err, dir)
	}
	// The same directory by another name (a link to it) is the same lock.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	_, _, err := open(ctx, "file://"+link, sinkapi.Options{})
	if !errors.Is(err, ErrDirectoryInUse) || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "another archiver") {
		t.Fatalf("Open through a link: %v, want ErrDirectoryInUse naming %s", err, link)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second, _, err := open(ctx, "file://"+link, sinkapi.Options{})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	a := testkit.NewAcks()
	if err := second.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatalf("a sink on DIR through a link: %v", err)
	}
	second.Close(ctx)
}

// TestFileSinkRefusesLinksBelowDir: a symbolic link where the sink keeps
// its lock is refused at open, naming it; links where the archive's
// folders and files belong are refused per append (see
// TestFileSinkFailureClasses), and so is a FIFO where a file belongs.
func TestFileSinkRefusesLinksBelowDir(t *testing.T) {
	ctx := testkit.Ctx(t)
	t.Run("lock folder", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(t.TempDir(), filepath.Join(dir, "_archiver")); err != nil {
			t.Fatal(err)
		}
		_, err := New(dir, sinkapi.Options{})
		if !errors.Is(err, errSymlink) || !strings.Contains(err.Error(), filepath.Join(dir, "_archiver")) {
			t.Fatalf("%v, want a symbolic link error naming %s/_archiver", err, dir)
		}
	})
	t.Run("FIFO hour file", func(t *testing.T) {
		s, dir := newTestFileSink(t)
		hour := filepath.Join(dir, "t", "2026-03-04", "05.jsonl")
		mkdir(t, filepath.Dir(hour))
		if err := syscall.Mkfifo(hour, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		a := testkit.NewAcks()
		if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 1)}, a.Ack("b")); err != nil {
			t.Fatal(err)
		}
		if err := a.WaitAck(t, "b"); !errors.Is(err, errNotRegular) || !sinkapi.IsPermanent(err) || !strings.Contains(err.Error(), hour) {
			t.Fatalf("%v, want a permanent not-a-regular-file error naming %s", err, hour)
		}
	})
}

// TestFileSinkAppendsWithOAppend: the files the sink appends to are open
// with O_APPEND, so every write lands at the end of the file as it is then,
// never over bytes another writer put there after a seek.
func TestFileSinkAppendsWithOAppend(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, dir := newTestFileSink(t)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t", "s", 1, 2)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	// Flush waits for the worker, which is idle afterwards: its open files
	// may be looked at.
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f := s.files[filepath.Join(dir, "t", "2026-03-04", "05.jsonl")]
	if f == nil {
		t.Fatal("the hour file is not open")
	}
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.O_APPEND == 0 {
		t.Fatalf("file flags %#x lack O_APPEND", flags)
	}
}

// TestFileSinkCutsTornTail: a file whose last line was torn (a writer
// killed mid-append) is cut back to its last whole line before the next
// append; the cut bytes are kept, whole, in _archiver/torn/ (replacing what
// an interrupted cut left there), and every line in the file decodes.
func TestFileSinkCutsTornTail(t *testing.T) {
	evs := testkit.Events("t", "s", 0, 4)
	whole := event.AppendLine(nil, &evs[0])
	torn := event.MarshalLine(&evs[1])
	torn = torn[:len(torn)/2]
	for _, tc := range []struct {
		name     string
		file     []byte
		leftover []byte // in the kept file before the sink opens
		want     []event.Event
	}{
		{"after a whole line", append(append([]byte{}, whole...), torn...), nil, []event.Event{evs[0], evs[2], evs[3]}},
		{"the only line", torn, nil, evs[2:]},
		{"an interrupted cut", append(append([]byte{}, whole...), torn...), []byte("x"), []event.Event{evs[0], evs[2], evs[3]}},
		{"whole lines only", whole, nil, []event.Event{evs[0], evs[2], evs[3]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			dir := t.TempDir()
			hour := filepath.Join(dir, "t", "2026-03-04", "05.jsonl")
			mkdir(t, filepath.Dir(hour))
			if err := os.WriteFile(hour, tc.file, 0o640); err != nil {
				t.Fatal(err)
			}
			cut := int64(bytes.LastIndexByte(tc.file, '\n') + 1)
			kept := filepath.Join(dir, "_archiver", "torn", "t", "2026-03-04", fmt.Sprintf("05.jsonl.%d", cut))
			if tc.leftover != nil {
				mkdir(t, filepath.Dir(kept))
				if err := os.WriteFile(kept, tc.leftover, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			reg := prometheus.NewRegistry()
			s, err := New(dir, sinkapi.Options{Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: evs[2:]}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			if err := a.WaitAck(t, "b"); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(hour)
			if err != nil {
				t.Fatal(err)
			}
			if want := testkit.RenderLines(tc.want, nil); !bytes.Equal(data, want) {
				t.Fatalf("the file holds\n%s\nwant\n%s", data, want)
			}
			repaired := cut < int64(len(tc.file))
			if n := testkit.Counter(t, reg, "archiver_sink_repairs_total"); n != map[bool]float64{true: 1}[repaired] {
				t.Errorf("archiver_sink_repairs_total = %v after repairing: %v", n, repaired)
			}
			got, err := os.ReadFile(kept)
			if !repaired {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("a file of whole lines left a torn copy: %v", err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, torn) {
				t.Fatalf("kept %q (%v), want the torn bytes %q", got, err, torn)
			}
		})
	}
}

// TestFileSinkCloseReleasesTheLock: Close releases the directory even
// when nothing was written.
func TestFileSinkCloseReleasesTheLock(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		s, err := New(dir, sinkapi.Options{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
