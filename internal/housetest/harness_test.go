package housetest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// eachGoFile calls visit with the path (relative to the module root) and
// the source of every Go file of the repository, test files included;
// testdata, .git and .tools are skipped.
func eachGoFile(t *testing.T, visit func(rel string, src []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".git", ".tools":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		visit(filepath.ToSlash(rel), src)
		return nil
	})
	if err != nil {
		t.Fatalf("walking the repository: %v", err)
	}
}

// TestE2EIsTestOnly: e2e is a package of tests. Besides its doc.go it
// holds only _test.go files, and no package imports it, so nothing of it
// reaches a binary.
func TestE2EIsTestOnly(t *testing.T) {
	tests := 0
	eachGoFile(t, func(rel string, src []byte) {
		if dir, name := filepath.Split(rel); dir == "e2e/" {
			if strings.HasSuffix(name, "_test.go") {
				tests++
			} else if name != "doc.go" {
				t.Errorf("%s: e2e holds only doc.go and _test.go files; move shared code to a test-support package", rel)
			}
		}
		f, err := parser.ParseFile(token.NewFileSet(), rel, src, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == module+"/e2e" {
				t.Errorf("%s imports %s: e2e is tests only and nothing imports it", rel, path)
			}
		}
	})
	if tests < 5 {
		t.Fatalf("found %d test files in e2e/; moved? update the rule", tests)
	}
}
