// Package cli is the command-line machinery our binaries share
// (cmd/archiver and cmd/archiver-engine): flags parsed and printed the
// same way (a mistyped flag suggests the nearest one, help names a
// value's type), configuration problems collected and reported at once,
// the exit codes (0 success, also after SIGINT/SIGTERM or -h; 1 runtime
// failure; 2 bad flags, environment variables or configuration file), the
// signal handling of a graceful stop, the hidden developer flags
// (--cpuprofile) and the checks of values several commands take (a
// Region's name, a loopback host).
//
// It imports nothing of ours but internal/suggest, so a binary built on
// it links no more than the command it runs (cmd/archiver-engine: the
// engine alone).
package cli

import (
	"errors"
	"fmt"
	"io"
)

// UsageError is a problem with flags, environment variables or a
// configuration file: the command prints it and exits 2.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef is a *UsageError with the formatted message.
func Usagef(format string, a ...any) error { return &UsageError{msg: fmt.Sprintf(format, a...)} }

// ErrHelp ends a command after it printed its usage for -h (exit 0).
var ErrHelp = errors.New("help requested")

// ExitCode reports a command's outcome on stderr and returns the process's
// exit code: 0 for nil or ErrHelp, 2 for a *UsageError (printed as it
// is), 1 for anything else (printed after prog, "archiver run").
func ExitCode(prog string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, ErrHelp) {
		return 0
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, ue.msg)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	return 1
}
