//go:build !unix

package engine

import (
	"fmt"
	"os"
)

// lockDir is only implemented where flock exists.
func lockDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("engine: data directory %s: persistence needs flock, which this platform lacks", dir)
}
