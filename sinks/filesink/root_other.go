//go:build !unix

package filesink

import (
	"errors"
	"io/fs"
	"os"
)

// fileRoot needs openat with O_NOFOLLOW and flock: on this platform the
// file sink refuses to open rather than follow links or share its
// directory.
type fileRoot struct{}

func openRoot(dir string, fileMode, dirMode fs.FileMode) (*fileRoot, error) {
	return nil, errors.New("file sink: " + dir + ": needs openat and flock, which this platform lacks")
}

func (r *fileRoot) close() error { return nil }

func (r *fileRoot) openFile(rel string, flag int) (*os.File, bool, error) {
	return nil, false, errors.New("file sink: unsupported platform")
}

func (r *fileRoot) list(rel string) ([]string, error) {
	return nil, errors.New("file sink: unsupported platform")
}

func (r *fileRoot) readFile(rel string, limit int64) ([]byte, error) {
	return nil, errors.New("file sink: unsupported platform")
}

func (r *fileRoot) writeNew(rel string, data []byte, limit int64) ([]byte, bool, error) {
	return nil, false, errors.New("file sink: unsupported platform")
}

func (r *fileRoot) replace(rel string, data []byte) error {
	return errors.New("file sink: unsupported platform")
}
