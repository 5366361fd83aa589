//go:build unix

package filesink

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
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
	parent, err := r.openDirs(names[:len(names)-1], true)
	if err != nil {
		return nil, false, err
	}
	defer r.closeDir(parent)
	path := r.path(names)
	fd, created, err := r.openLeaf(parent, names[len(names)-1], path, flag)
	if err != nil {
		return nil, false, err
	}
	return os.NewFile(uintptr(fd), path), created, nil
}

// openDirs opens the folder DIR/names... one name at a time, creating
// the missing ones when create (else a missing one is an error matching
// fs.ErrNotExist). Release it with closeDir.
func (r *fileRoot) openDirs(names []string, create bool) (int, error) {
	root := int(r.d.Fd())
	parent := root
	for i, name := range names {
		fd, err := r.openDir(parent, name, r.path(names[:i+1]), create)
		r.closeDir(parent)
		if err != nil {
			return -1, err
		}
		parent = fd
	}
	return parent, nil
}

// closeDir closes a folder openDirs opened (DIR's own descriptor stays).
func (r *fileRoot) closeDir(fd int) {
	if fd != int(r.d.Fd()) {
		unix.Close(fd)
	}
}

// path is DIR/names..., for messages and the opened files' names.
func (r *fileRoot) path(names []string) string {
	return filepath.Join(append([]string{r.dir}, names...)...)
}

// openDir opens the folder name in parent, creating it when missing and
// create.
func (r *fileRoot) openDir(parent int, name, path string, create bool) (int, error) {
	const flag = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := openat(parent, name, flag, 0)
	if err == nil {
		return fd, nil
	}
	if !create || !errors.Is(err, unix.ENOENT) {
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

// list returns the names in the folder DIR/rel, sorted; a folder that
// does not exist holds none.
func (r *fileRoot) list(rel string) ([]string, error) {
	fd, err := r.openDirs(strings.Split(rel, "/"), false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), r.path(strings.Split(rel, "/")))
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

// readFile returns up to limit bytes of the regular file DIR/rel.
func (r *fileRoot) readFile(rel string, limit int64) ([]byte, error) {
	names := strings.Split(rel, "/")
	parent, err := r.openDirs(names[:len(names)-1], false)
	if err != nil {
		return nil, err
	}
	defer r.closeDir(parent)
	f, err := r.openExisting(parent, names)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	return data, nil
}

// openExisting opens the regular file names[len-1] in parent for reading.
func (r *fileRoot) openExisting(parent int, names []string) (*os.File, error) {
	path := r.path(names)
	fd, err := openat(parent, names[len(names)-1], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError("open", path, parent, names[len(names)-1], err)
	}
	if err := regular(fd, path); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// writeNew makes data durable at DIR/rel unless a file is there: it
// writes a temporary file beside it (.NAME.tmp, with the sink's file
// mode), fsyncs it, renames it to NAME and fsyncs the folder, creating
// the folders on the way. When NAME exists it writes nothing and returns
// up to limit of its bytes, found. The directory lock makes the check and
// the rename one step: no other sink writes below DIR.
func (r *fileRoot) writeNew(rel string, data []byte, limit int64) (existing []byte, found bool, err error) {
	names := strings.Split(rel, "/")
	parent, err := r.openDirs(names[:len(names)-1], true)
	if err != nil {
		return nil, false, err
	}
	defer r.closeDir(parent)
	if f, err := r.openExisting(parent, names); err == nil {
		defer f.Close()
		existing, err := io.ReadAll(io.LimitReader(f, limit))
		if err != nil {
			return nil, false, fmt.Errorf("file sink: %w", err)
		}
		return existing, true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	return nil, false, r.renameInto(parent, names, data)
}

// replace makes data durable at DIR/rel, whatever is there: written to a
// temporary file beside it, fsynced, renamed over NAME and the folder
// fsynced, creating the folders on the way (see [fileRoot.renameInto]).
func (r *fileRoot) replace(rel string, data []byte) error {
	names := strings.Split(rel, "/")
	parent, err := r.openDirs(names[:len(names)-1], true)
	if err != nil {
		return err
	}
	defer r.closeDir(parent)
	return r.renameInto(parent, names, data)
}

// renameInto writes data to .NAME.tmp in parent (the folder of
// DIR/names...), fsyncs it, renames it to NAME and fsyncs the folder. A
// symbolic link at NAME is replaced, never followed (rename replaces the
// name itself).
func (r *fileRoot) renameInto(parent int, names []string, data []byte) error {
	name := names[len(names)-1]
	tmp := "." + name + ".tmp"
	if err := r.writeTemp(parent, tmp, r.path(append(names[:len(names)-1:len(names)-1], tmp)), data); err != nil {
		return err
	}
	if err := unix.Renameat(parent, tmp, parent, name); err != nil {
		_ = unix.Unlinkat(parent, tmp, 0)
		return pathError("rename", r.path(names), parent, tmp, err)
	}
	if err := unix.Fsync(parent); err != nil {
		return fmt.Errorf("file sink: fsync of the folder of %s: %w", r.path(names), err)
	}
	return nil
}

// writeTemp writes data to the file name in parent (created with the
// sink's file mode, or emptied: a temporary file a crash left) and fsyncs
// it.
func (r *fileRoot) writeTemp(parent int, name, path string, data []byte) error {
	fd, err := openat(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, r.fileMode)
	if err != nil {
		return pathError("open", path, parent, name, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := regular(fd, path); err != nil {
		return err
	}
	// From here the file is the sink's own: one it could not fill is
	// removed, so that a full disk does not keep the space it took.
	if err := r.fillTemp(f, path, data); err != nil {
		_ = unix.Unlinkat(parent, name, 0)
		return err
	}
	return nil
}

// fillTemp sets the temporary file f's mode, writes data and fsyncs it.
func (r *fileRoot) fillTemp(f *os.File, path string, data []byte) error {
	if err := unix.Fchmod(int(f.Fd()), r.fileMode); err != nil {
		return fmt.Errorf("file sink: chmod %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("file sink: fsync %s: %w", path, err)
	}
	return nil
}
