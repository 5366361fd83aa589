package cli

import (
	"fmt"
	"strings"
)

// Problems collects every configuration problem of a command, so that
// they are reported at once instead of one per run.
type Problems []string

// Add records one problem, naming the flag it is about
// ("--listen: ... is not HOST:PORT").
func (p *Problems) Add(format string, a ...any) { *p = append(*p, fmt.Sprintf(format, a...)) }

// Err is nil without problems, else one *UsageError holding every
// problem on a line of its own after prog ("archiver engine: --listen: ...").
func (p Problems) Err(prog string) error {
	if len(p) == 0 {
		return nil
	}
	lines := make([]string, len(p))
	for i, s := range p {
		lines[i] = prog + ": " + s
	}
	return &UsageError{msg: strings.Join(lines, "\n")}
}
