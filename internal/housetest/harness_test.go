package housetest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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

// natsStarters are the files that may start a nats-server. Tests start
// one only through internal/natstest (at most maxTestNATSStarters files of
// test code do); the programs below run one for a user.
var natsStarters = map[string]string{
	"internal/natstest/natstest.go": "the tests' one nats-server starter",
	"demo/demo.go":                  "a program: `archiver demo` runs NATS for its subscriber",
	"cmd/bench/internal/benchkit/":  "a program: `make bench` measures the NATS sink against its own server",
}

// maxTestNATSStarters is how many files of test code (_test.go files and
// test-support packages) may start a nats-server: issue 28's bound.
const maxTestNATSStarters = 2

// startsNATS matches what starts a nats-server: the server package's
// NewServer or its test package's Run…Server (under any import name), or
// running the nats-server binary.
var startsNATS = regexp.MustCompile(`\b(server|natsserver|natstest|test)\.(NewServer|Run\w*Server)\(|exec\.Command(Context)?\([^)]*"nats-server"`)

// TestNATSServerStarters: a test that needs a nats-server asks
// internal/natstest for one, so how a test's server is configured
// (JetStream, its store, its port, restarts) is written once.
func TestNATSServerStarters(t *testing.T) {
	var starters []string
	eachGoFile(t, func(rel string, src []byte) {
		if !strings.Contains(string(src), "nats-server") || !startsNATS.Match(src) {
			return
		}
		starters = append(starters, rel)
		_, file := natsStarters[rel]
		_, dir := natsStarters[filepath.Dir(rel)+"/"]
		if !file && !dir {
			t.Errorf("%s starts a nats-server: use internal/natstest.Start", rel)
		}
	})
	tests := 0
	for _, rel := range starters {
		if strings.HasSuffix(rel, "_test.go") || strings.HasSuffix(filepath.Base(filepath.Dir(rel)), "test") {
			tests++
		}
	}
	if tests > maxTestNATSStarters {
		t.Errorf("%d files of test code start a nats-server, at most %d: %s", tests, maxTestNATSStarters, strings.Join(starters, ", "))
	}
	if len(starters) == 0 {
		t.Fatal("no file starts a nats-server; the match is broken")
	}
}
