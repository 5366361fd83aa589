package demo

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ReadArchiveDir reads every archive line (*.jsonl) under dir, the file
// sink's layout, and returns how often each event ID occurs, per kind. A
// missing dir is empty; a torn last line (being written) is skipped.
func ReadArchiveDir(dir string) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Metadata struct {
					Kind    string `json:"kind"`
					EventID string `json:"eventID"`
				}
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				continue
			}
			if out[line.Metadata.Kind] == nil {
				out[line.Metadata.Kind] = map[string]int{}
			}
			out[line.Metadata.Kind][line.Metadata.EventID]++
		}
		return sc.Err()
	})
	return out, err
}
