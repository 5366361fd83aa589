package subscribe_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestHowToDepend holds what the package doc, docs/MESSAGES.md
// ("Depending on subscribe") and README.md tell a subscriber to the
// module: its import path (go.mod's module path plus /subscribe) in the
// go get line, the Go version (go.mod's go line, which
// testdata/subscriber's go.mod repeats), and, in MESSAGES.md's table,
// exactly the modules a build of the package compiles.
func TestHowToDepend(t *testing.T) {
	gomod := readText(t, "../go.mod")
	module := goModLine(t, "../go.mod", gomod, "module")
	goLine := goModLine(t, "../go.mod", gomod, "go")
	if got := goModLine(t, "testdata/subscriber/go.mod", readText(t, "testdata/subscriber/go.mod"), "go"); got != goLine {
		t.Errorf("testdata/subscriber/go.mod says go %s, the archiver's go.mod go %s", got, goLine)
	}

	// The package doc: the comment lines above the package clause.
	var doc []string
	for line := range strings.Lines(readText(t, "subscribe.go")) {
		if strings.HasPrefix(line, "package ") {
			break
		}
		doc = append(doc, strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(line), "//"), " "))
	}
	_, section, ok := strings.Cut(readText(t, "../docs/MESSAGES.md"), "\n## Depending on `subscribe`\n")
	if !ok {
		t.Fatal("docs/MESSAGES.md has no section \"Depending on `subscribe`\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for name, text := range map[string]string{"the package doc": strings.Join(doc, "\n"), "docs/MESSAGES.md": section} {
		flat := strings.Join(strings.Fields(strings.ReplaceAll(text, "`", "")), " ")
		for _, want := range []string{
			"go get " + module + "/subscribe@latest",
			module + "/subscribe, in the archiver's module " + module,
			"Go " + goLine + " or later",
		} {
			if !strings.Contains(flat, want) {
				t.Errorf("%s does not say %q", name, want)
			}
		}
	}

	readme := strings.Join(strings.Fields(strings.ReplaceAll(readText(t, "../README.md"), "`", "")), " ")
	if want := "go get " + module + "/subscribe@latest, Go " + goLine + " or later"; !strings.Contains(readme, want) {
		t.Errorf("README.md's \"Subscribe on NATS\" does not say %q", want)
	}

	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var built []string
	for _, m := range strings.Fields(string(out)) {
		if !slices.Contains(built, m) {
			built = append(built, m)
		}
	}
	var listed []string
	for _, row := range regexp.MustCompile("(?m)^\\| (`[^|]+) \\| .* \\|$").FindAllStringSubmatch(section, -1) {
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(row[1], -1) {
			listed = append(listed, m[1])
		}
	}
	slices.Sort(built)
	slices.Sort(listed)
	if !slices.Equal(built, listed) {
		t.Errorf("docs/MESSAGES.md lists the modules %v; a build of subscribe compiles %v", listed, built)
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goModLine is the argument of a go.mod directive (module, go).
func goModLine(t *testing.T, name, gomod, directive string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + directive + `\s+(\S+)\s*$`).FindStringSubmatch(gomod)
	if m == nil {
		t.Fatalf("%s has no %s line", name, directive)
	}
	return m[1]
}
