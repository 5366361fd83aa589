package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/help/*.golden from the commands' help")

// TestHelpGolden keeps every command's -h text (and the top-level usage) in
// testdata/help: a change to a flag shows in review as a change to its
// help. go test ./cmd/archiver/ -run TestHelpGolden -update rewrites them.
func TestHelpGolden(t *testing.T) {
	cmds := append([]string{"help"}, commandNames()...)
	for _, cmd := range cmds {
		t.Run(cmd, func(t *testing.T) {
			args := []string{cmd, "-h"}
			if cmd == "help" {
				args = []string{"help"}
			}
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), args, env{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
			if code != 0 || stderr.Len() > 0 {
				t.Fatalf("archiver %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, stderr.String())
			}
			path := filepath.Join("testdata", "help", cmd+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (a new command? run go test ./cmd/archiver/ -run TestHelpGolden -update)", err)
			}
			if got := stdout.String(); got != string(want) {
				t.Errorf("archiver %s -h differs from %s (rewrite it with -update if the change is meant):\n%s", cmd, path, got)
			}
		})
	}
}

// TestHelpShowsTypes: no option reads as a plain string in help when its
// value is a duration, a number, a size, a time or a URL.
func TestHelpShowsTypes(t *testing.T) {
	cases := []struct{ cmd, line string }{
		{"run", "  -retry-for duration\n"},
		{"run", "  -max-in-flight-bytes bytes\n"},
		{"run", "  -sink url\n"},
		{"sweep", "  -window-shards int\n"},
		{"restore", "  -parallel int\n"},
		{"restore", "(default 8)\n"},
		{"restore", "  -since time\n"},
		{"verify", "  -since time\n"},
		{"verify", "  -max-buffer-bytes bytes\n"},
		{"replay", "  -batch int\n"},
		{"engine", "  -stream-retention duration\n"},
		{"demo", "  -precise\n"},
		{"version", "usage: archiver version\n"},
	}
	var viaHelp, viaFlag bytes.Buffer
	quiet := env{stderr: io.Discard, getenv: func(string) string { return "" }}
	quiet.stdout = &viaHelp
	dispatch(context.Background(), []string{"help", "sweep"}, quiet)
	quiet.stdout = &viaFlag
	dispatch(context.Background(), []string{"sweep", "-h"}, quiet)
	if viaHelp.String() != viaFlag.String() || viaHelp.Len() == 0 {
		t.Errorf("archiver help sweep printed\n%s\nwant what archiver sweep -h prints", viaHelp.String())
	}
	for _, c := range cases {
		var stdout bytes.Buffer
		dispatch(context.Background(), []string{c.cmd, "--help"}, env{stdout: &stdout, stderr: &stdout, getenv: func(string) string { return "" }})
		if !strings.Contains(stdout.String(), c.line) {
			t.Errorf("archiver %s --help lacks %q:\n%s", c.cmd, c.line, stdout.String())
		}
	}
}

// TestSuggestions: a mistyped flag or command is refused (exit 2) with the
// nearest name, if one is at most two edits away.
func TestSuggestions(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "-tabel", "x"}, "archiver run: unknown flag --tabel; did you mean --table?"},
		{[]string{"restore", "--form", "file:///a"}, "unknown flag --form; did you mean --from?"},
		{[]string{"sweep", "--windw", "1m"}, "did you mean --window?"},
		{[]string{"engine", "--listn", "x"}, "did you mean --listen?"},
		{[]string{"health", "--quite"}, "did you mean --quiet?"},
		{[]string{"verify", "--nothing-like-it"}, "unknown flag --nothing-like-it (see archiver verify -h)"},
		{[]string{"rnu"}, `unknown command "rnu"; did you mean run?`},
		{[]string{"verfy"}, "did you mean verify?"},
		{[]string{"frobnicate"}, "unknown command \"frobnicate\"\n"},
		{[]string{"help", "rnu"}, `unknown command "rnu"; did you mean run?`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), c.args, env{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
		if code != 2 || !strings.Contains(stderr.String(), c.want) || stdout.Len() > 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing and %q", c.args, code, stdout.String(), stderr.String(), c.want)
		}
	}
}
