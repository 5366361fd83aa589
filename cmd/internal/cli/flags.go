package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ttl-archiver/archiver/internal/suggest"
)

// TypedString is a flag that keeps its value as text (for cmd/archiver's
// option tables to layer with the environment and the config file), while
// help shows the type the value is read as (duration, int, bytes, url,
// time).
type TypedString struct {
	// Text is the value: the default until Set.
	Text string
	// TypeName names the value in help: "-retry-for duration".
	TypeName string
}

func (v *TypedString) String() string     { return v.Text }
func (v *TypedString) Set(s string) error { v.Text = s; return nil }

// Type names the value in help: "-retry-for duration".
func (v *TypedString) Type() string { return v.TypeName }

// typed is a flag.Value that names its type for help (TypedString, the
// engine's --ttl-interval).
type typed interface{ Type() string }

// ParseFlags parses args into fs; on -h it writes usage (a header, then the
// flags) to stdout and returns ErrHelp. A flag fs does not define is a
// usage error that suggests the nearest one and names fs's help (fs's name
// is the program: "archiver engine").
func ParseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, usage string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		PrintFlags(stdout, fs)
		return ErrHelp
	}
	// The flag package reports an unknown flag by this message alone (it
	// has no error type for it); TestSuggestions fails if it changes.
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		msg := fmt.Sprintf("%s: unknown flag --%s", fs.Name(), name)
		if s := suggest.Nearest(name, names); s != "" {
			msg += "; did you mean --" + s + "?"
		}
		return Usagef("%s (see %s -h)", msg, fs.Name())
	}
	return Usagef("%s: %v", fs.Name(), err)
}

// PrintFlags writes fs's flags as flag.PrintDefaults does, but names a
// typed value's type (duration, int, bytes) where PrintDefaults says
// "value", and quotes a default only when it is text.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		name, usage := flag.UnquoteUsage(f)
		quote := name == "string"
		if t, ok := f.Value.(typed); ok {
			name = t.Type()
			quote = name == "string" || name == "url"
		}
		fmt.Fprintf(&b, "  -%s", f.Name)
		if name != "" {
			b.WriteString(" " + name)
		}
		if b.Len() <= 4 {
			b.WriteString("\t")
		} else {
			b.WriteString("\n    \t")
		}
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch d := f.DefValue; {
		case d == "" || d == "false" || d == "0" || d == "0s":
		case quote:
			fmt.Fprintf(&b, " (default %q)", d)
		default:
			fmt.Fprintf(&b, " (default %s)", d)
		}
		fmt.Fprintln(w, b.String())
	})
}
