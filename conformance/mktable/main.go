// Command mktable writes the conformance table of several endpoints into
// a Markdown file, in place of what stands between the lines
// "<!-- conformance-table -->" and "<!-- /conformance-table -->".
// tools/conformance-peers.sh runs it once `archiver conformance --json`
// has measured each endpoint:
//
//	go run ./conformance/mktable -o docs/CONFORMANCE.md -note "Measured ..." \
//	    'engine=.tools/conformance/engine.json' 'moto 5.2.1=.tools/conformance/moto.json'
//
// Each argument is NAME=FILE: FILE is the endpoint's JSON report, or, when
// it ends in .err, why the endpoint was not measured.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/ttl-archiver/archiver/conformance"
)

const (
	begin = "<!-- conformance-table -->\n"
	end   = "<!-- /conformance-table -->"
)

func main() {
	out := flag.String("o", "docs/CONFORMANCE.md", "the Markdown file to write the table into")
	note := flag.String("note", "", "a line to write above the table (when and how it was measured)")
	flag.Parse()
	if err := run(*out, *note, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mktable:", err)
		os.Exit(1)
	}
}

func run(path, note string, args []string) error {
	var cols []conformance.Column
	for _, a := range args {
		c, err := column(a)
		if err != nil {
			return err
		}
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		return errors.New("no NAME=FILE arguments")
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q section to replace", path, strings.TrimSpace(begin), end)
	}
	table := conformance.Markdown(cols)
	if note != "" {
		table = note + "\n\n" + table
	}
	updated := append(append(append([]byte{}, doc[:i+len(begin)]...), table...), doc[j:]...)
	return os.WriteFile(path, updated, 0o644)
}

// column reads one NAME=FILE argument.
func column(arg string) (conformance.Column, error) {
	name, file, ok := strings.Cut(arg, "=")
	if !ok || name == "" || file == "" {
		return conformance.Column{}, fmt.Errorf("%q: want NAME=FILE", arg)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return conformance.Column{}, err
	}
	if strings.HasSuffix(file, ".err") {
		return conformance.Column{Name: name, Missing: strings.TrimSpace(string(data))}, nil
	}
	var rep conformance.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return conformance.Column{}, fmt.Errorf("%s: %w", file, err)
	}
	return conformance.Column{Name: name, Report: &rep}, nil
}
