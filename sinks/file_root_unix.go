//go:build unix

package sinks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ttl-archiver/archiver/internal/flock"
)

// fileRoot is a file sink's directory, opened once and locked. Everything
// below it is reached from its descriptor one name at a time (openat,
// mkdirat) with O_NOFOLLOW, so no symbolic link below DIR is ever
// followed, whoever plants one and whenever. DIR itself may be a link.
type fileRoot struct {
	dir      string   // DIR as the sink was given it, for messages
	d        *os.File // DIR, opened as a directory
	lock     *os.File // DIR/_archiver/lock, flocked
	fileMode uint32
	dirMode  uint32
}

// lockName is the lock file below DIR: in _archiver/, which archive
// readers skip, so it is never taken for archive data.
const lockName = "_archiver/lock"

// openRoot creates dir (and its parents) when missing, opens it and takes
// its lock: a second sink on the same directory, in this process or
// another, gets an error matching [ErrDirectoryInUse].
func openRoot(dir string, fileMode, dirMode fs.FileMode) (*fileRoot, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		d.Close()
		return nil, fmt.Errorf("file sink: %s: %w", dir, errors.Join(err, unix.ENOTDIR))
	}
	r := &fileRoot{dir: dir, d: d, fileMode: uint32(fileMode.Perm()), dirMode: uint32(dirMode.Perm())}
	lockPath := filepath.Join(dir, lockName)
	lf, _, err := r.openFile(lockName, unix.O_RDWR)
	if err != nil {
		d.Close()
		return nil, err
	}
	if err := flock.TryLock(lf); err != nil {
		lf.Close()
		d.Close()
		if errors.Is(err, flock.ErrHeld) {
			return nil, fmt.Errorf("file sink: directory %s: %w (lock %s)", dir, ErrDirectoryInUse, lockPath)
		}
		return nil, fmt.Errorf("file sink: lock %s: %w", lockPath, err)
	}
	r.lock = lf
	return r, nil
}

// close releases the lock (closing its descriptor) and the directory.
func (r *fileRoot) close() error {
	return errors.Join(r.d.Close(), r.lock.Close())
}

// openFile opens DIR/rel (rel uses '/') with flag|O_NOFOLLOW, creating
// the missing folders on the way with the sink's folder mode and a missing
// file with its file mode (exactly: the umask does not narrow them). What
// it creates is durable when it returns (each new entry's folder is
// fsynced); created says whether the file is new. A symbolic link at any
// name below DIR is an error matching [errSymlink] naming the path; a
// file that is not a regular one, [errNotRegular].
func (r *fileRoot) openFile(rel string, flag int) (f *os.File, created bool, err error) {
	names := strings.Split(rel, "/")
	root := int(r.d.Fd())
	parent := root
	defer func() {
		if parent != root {
			unix.Close(parent)
		}
	}()
	for i, name := range names[:len(names)-1] {
		fd, err := r.openDir(parent, name, r.path(names[:i+1]))
		if err != nil {
			return nil, false, err
		}
		if parent != root {
			unix.Close(parent)
		}
		parent = fd
	}
	path := r.path(names)
	fd, created, err := r.openLeaf(parent, names[len(names)-1], path, flag)
	if err != nil {
		return nil, false, err
	}
	return os.NewFile(uintptr(fd), path), created, nil
}

// path is DIR/names..., for messages and the opened files' names.
func (r *fileRoot) path(names []string) string {
	return filepath.Join(append([]string{r.dir}, names...)...)
}

// openDir opens the folder name in parent, creating it when missing.
func (r *fileRoot) openDir(parent int, name, path string) (int, error) {
	const flag = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := openat(parent, name, flag, 0)
	if err == nil {
		return fd, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return -1, pathError("open", path, parent, name, err)
	}
	err = unix.Mkdirat(parent, name, r.dirMode)
	made := err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, pathError("mkdir", path, parent, name, err)
	}
	if fd, err = openat(parent, name, flag, 0); err != nil {
		return -1, pathError("open", path, parent, name, err)
	}
	if made {
		if err := settle(parent, fd, r.dirMode); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("file sink: %s: %w", path, err)
		}
	}
	return fd, nil
}

// openLeaf opens the file name in parent, creating it when missing.
func (r *fileRoot) openLeaf(parent int, name, path string, flag int) (int, bool, error) {
	flag |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := openat(parent, name, flag, 0)
	created := false
	if errors.Is(err, unix.ENOENT) {
		// O_EXCL never follows a link: a dangling one is EEXIST.
		fd, err = openat(parent, name, flag|unix.O_CREAT|unix.O_EXCL, r.fileMode)
		created = err == nil
		if errors.Is(err, unix.EEXIST) {
			fd, err = openat(parent, name, flag, 0)
		}
	}
	if err != nil {
		return -1, false, pathError("open", path, parent, name, err)
	}
	err = regular(fd, path)
	if err == nil && created {
		if err = settle(parent, fd, r.fileMode); err != nil {
			err = fmt.Errorf("file sink: %s: %w", path, err)
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, false, err
	}
	return fd, created, nil
}

// settle gives a new entry (fd) its exact mode and makes its name durable
// (fsyncs its folder, parent).
func settle(parent, fd int, mode uint32) error {
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if err := unix.Fsync(parent); err != nil {
		return fmt.Errorf("fsync of its folder: %w", err)
	}
	return nil
}

// openat is unix.Openat, retried on EINTR.
func openat(parent int, name string, flag int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(parent, name, flag, mode)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// pathError is err from op on name in parent, naming path; when name is a
// symbolic link (O_NOFOLLOW refused it: ELOOP on Linux, EMLINK or EFTYPE
// elsewhere), the error says so and matches errSymlink.
func pathError(op, path string, parent int, name string, err error) error {
	var st unix.Stat_t
	if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("file sink: %s: %w", path, errSymlink)
	}
	return fmt.Errorf("file sink: %w", &os.PathError{Op: op, Path: path, Err: err})
}

// regular refuses fd unless it is a regular file (not a FIFO, a device, a
// socket).
func regular(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("file sink: %w", &os.PathError{Op: "fstat", Path: path, Err: err})
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("file sink: %s: %w", path, errNotRegular)
	}
	return nil
}
