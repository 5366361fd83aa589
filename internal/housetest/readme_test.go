package housetest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README is for users: at most readmeMaxLines lines, with the two
// commands a newcomer needs in its first readmeFirstLines lines. Reference
// material goes to docs/ (ENGINE.md, RESTORE.md, BENCHMARKS.md) and
// deploy/README.md.
const (
	readmeMaxLines   = 450
	readmeFirstLines = 40
)

func readText(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadmeShape: README.md stays short, starts with `make run` and
// `make test`, and never starts a program with `go run … &` (killing the
// go command leaves its child, the real program, running).
func TestReadmeShape(t *testing.T) {
	readme := readText(t, "README.md")
	lines := strings.Split(strings.TrimSuffix(readme, "\n"), "\n")
	if len(lines) > readmeMaxLines {
		t.Errorf("README.md has %d lines; at most %d: move reference material to docs/ or deploy/README.md and link it", len(lines), readmeMaxLines)
	}
	first := strings.Join(lines[:min(len(lines), readmeFirstLines)], "\n")
	for _, cmd := range []string{"make run", "make test"} {
		if !regexp.MustCompile(`(?m)^` + cmd + `\s`).MatchString(first) {
			t.Errorf("README.md's first %d lines do not show %q at the start of a line", readmeFirstLines, cmd)
		}
	}
	background := regexp.MustCompile(`(?m)^\s*go run\b.*&\s*(#.*)?$`)
	if m := background.FindString(readme); m != "" {
		t.Errorf("README.md runs %q in the background: build the binary (make build) and run that", strings.TrimSpace(m))
	}
}

// mdLink is a Markdown inline link: its target, up to a space or ')'.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link in the user documentation names a file
// of the repository, and an anchor (#...) names one of that file's headings
// as GitHub spells it. Links to other sites are not followed.
func TestDocLinks(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "deploy/README.md", "deploy/athena/README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	checked := 0
	for _, f := range files {
		for _, m := range mdLink.FindAllStringSubmatch(readText(t, f), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			rel := f
			if path != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
			}
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, target)
				continue
			}
			if anchor != "" && !headingAnchors(readText(t, rel))[anchor] {
				t.Errorf("%s links to %s: %s has no heading with anchor #%s", f, target, rel, anchor)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d links; the link pattern is broken", checked)
	}
}

// headingAnchors returns the anchors GitHub gives the Markdown headings of
// text: lower case, spaces as '-', letters, digits, '-' and '_' kept, the
// rest dropped.
// Headings inside fenced code blocks are skipped.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

func TestHeadingAnchors(t *testing.T) {
	cases := []struct{ heading, anchor string }{
		{"# TTL Archiver", "ttl-archiver"},
		{"## 8. The sweeper: expiries within seconds", "8-the-sweeper-expiries-within-seconds"},
		{"## Precise expiry: `archiver sweep`", "precise-expiry-archiver-sweep"},
		{"### Control API: sweeps, time and faults over HTTP", "control-api-sweeps-time-and-faults-over-http"},
		{"## Reference: `archiver run` settings", "reference-archiver-run-settings"},
	}
	for _, c := range cases {
		if got := headingAnchors(c.heading + "\n"); !got[c.anchor] {
			t.Errorf("headingAnchors(%q) = %v; want %q", c.heading, got, c.anchor)
		}
	}
	if got := headingAnchors("```sh\n# a comment\n```\n"); len(got) != 0 {
		t.Errorf("a comment in a code block counts as a heading: %v", got)
	}
}
