package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"success", nil, 0, ""},
		{"help", fmt.Errorf("engine: %w", ErrHelp), 0, ""},
		{"usage", Usagef("archiver-engine: --listen: %q is not HOST:PORT", "x"), 2, "archiver-engine: --listen: \"x\" is not HOST:PORT\n"},
		{"runtime", errors.New("listen tcp: address in use"), 1, "archiver engine: listen tcp: address in use\n"},
	} {
		var stderr bytes.Buffer
		if code := ExitCode("archiver engine", c.err, &stderr); code != c.code || stderr.String() != c.stderr {
			t.Errorf("%s: exit %d, stderr %q; want %d, %q", c.name, code, stderr.String(), c.code, c.stderr)
		}
	}
}

// TestProblems: none is no error; several are one usage error, a line each.
func TestProblems(t *testing.T) {
	var p Problems
	if err := p.Err("archiver engine"); err != nil {
		t.Fatalf("no problems: %v", err)
	}
	p.Add("--listen: %q is not HOST:PORT", "x")
	p.Add("--max-conns: %d must be at least 1", 0)
	err := p.Err("archiver-engine")
	var ue *UsageError
	want := "archiver-engine: --listen: \"x\" is not HOST:PORT\narchiver-engine: --max-conns: 0 must be at least 1"
	if !errors.As(err, &ue) || err.Error() != want {
		t.Fatalf("Err = %v, want a *UsageError %q", err, want)
	}
}

// TestParseFlags: -h prints the header and the flags (a typed value names
// its type, a text default is quoted) and returns ErrHelp; an unknown flag
// is a usage error naming the nearest one and the program's help.
func TestParseFlags(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("archiver-engine", flag.ContinueOnError)
		fs.String("listen", "127.0.0.1:8000", "address to serve on")
		fs.Var(&TypedString{Text: "1m", TypeName: "duration"}, "body-timeout", "time to receive a body")
		fs.Bool("ui", true, "serve the console")
		return fs
	}
	var out bytes.Buffer
	if err := ParseFlags(newFS(), []string{"-h"}, &out, "usage: archiver-engine [flags]\n\nflags:\n"); err != ErrHelp {
		t.Fatalf("-h: %v, want ErrHelp", err)
	}
	for _, want := range []string{"usage: archiver-engine [flags]\n\nflags:\n", "  -body-timeout duration\n    \ttime to receive a body (default 1m)\n",
		"  -listen string\n    \taddress to serve on (default \"127.0.0.1:8000\")\n", "  -ui\n    \tserve the console (default true)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h printed\n%s\nwant it to contain %q", out.String(), want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listn", "x"}, "archiver-engine: unknown flag --listn; did you mean --listen? (see archiver-engine -h)"},
		{[]string{"--nothing-like-it"}, "archiver-engine: unknown flag --nothing-like-it (see archiver-engine -h)"},
		{[]string{"--ui=maybe"}, "archiver-engine: invalid boolean value"},
	} {
		err := ParseFlags(newFS(), c.args, io.Discard, "")
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want a usage error starting %q", c.args, err, c.want)
		}
	}
	fs := newFS()
	if err := ParseFlags(fs, []string{"--body-timeout", "5s", "rest"}, io.Discard, ""); err != nil || fs.Lookup("body-timeout").Value.String() != "5s" || fs.Arg(0) != "rest" {
		t.Errorf("parse: %v, body-timeout %s, args %q", err, fs.Lookup("body-timeout").Value, fs.Args())
	}
}
