// Command archiver archives DynamoDB items that TTL expired, from the table's
// stream to S3 and NATS.
//
//	archiver run          the long-lived consumer (an ECS task, or several)
//	archiver sweep        deletes a table's expired items within seconds of their TTL
//	archiver engine       a local DynamoDB + Streams server whose TTL really deletes
//	archiver demo         everything in one process: engine, NATS, archive folder
//	archiver restore      write archived items back into a DynamoDB table
//	archiver replay       send archived events to a sink under their original IDs
//	archiver verify       read an archive and report what is in it and what is wrong
//	archiver tail         print the expiries arriving on a NATS JetStream stream
//	archiver conformance  measure a DynamoDB-compatible endpoint's TTL and Streams
//	archiver health       the container health check: exit 0 when /readyz says ready
//	archiver version      print the version
//
// Exit codes: 0 success (also after SIGINT/SIGTERM), 1 runtime failure,
// 2 bad flags, environment variables or configuration file.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/cmd/internal/enginecmd"
	"github.com/ttl-archiver/archiver/internal/suggest"
)

// version is set by release builds: -ldflags "-X main.version=v1.2.3".
var version = ""

// env is the process environment as the commands see it (tests pass their own).
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// stop is the process's signal handling (nil in tests that call
	// dispatch): a command says through it what a forced stop abandons.
	stop *cli.Stopper
}

const topUsage = `usage: archiver <command> [flags]

commands:
  run          archive TTL-expired items from DynamoDB streams to sinks
  sweep        delete a table's expired items within seconds of their TTL (one sweeper per table)
  engine       serve a local DynamoDB + DynamoDB Streams engine with a real TTL sweeper
  demo         run engine, NATS and archiver in one process and show expiries live
  restore      write archived items back into a DynamoDB table (never clobbering, TTL extended)
  replay       send archived events to a sink (nats://, s3://, ...) under their original IDs
  verify       read an archive (s3:// or file://) and report its contents, duplicates, unreadable lines and gaps
  tail         print the expiries arriving on a NATS JetStream stream, or from --since back
  conformance  measure how closely a DynamoDB-compatible endpoint follows DynamoDB's TTL and Streams: checks, a grade
  health       exit 0 when the archiver's /readyz endpoint reports ready
  version      print the version

Run 'archiver <command> -h' for a command's flags.
`

func main() {
	// The first signal starts a graceful stop; a second one (not the
	// same stop delivered twice) stops at once, saying what it abandons.
	ctx, stop := cli.WatchSignals(os.Stderr, stopping(os.Args[1:]))
	os.Exit(dispatch(ctx, os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, stop: stop}))
}

// stopping is what the command of args says on a signal: `archiver
// engine` stops as archiver-engine does; the others flush their sinks and
// checkpoints.
func stopping(args []string) cli.Stopping {
	if len(args) > 0 && args[0] == "engine" {
		return enginecmd.Stopping("archiver")
	}
	return cli.Stopping{Prog: "archiver",
		Graceful: "flushing sinks, writing final checkpoints, releasing leases", Forced: "the flush is abandoned"}
}

// dispatch runs the subcommand named by args[0] and returns the exit code.
func dispatch(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, topUsage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		err = runCmd(ctx, rest, e)
	case "sweep":
		err = sweepCmd(ctx, rest, e)
	case "engine":
		err = engineCmd(ctx, rest, e)
	case "demo":
		err = demoCmd(ctx, rest, e)
	case "verify":
		err = verifyCmd(ctx, rest, e)
	case "restore":
		err = restoreCmd(ctx, rest, e)
	case "replay":
		err = replayCmd(ctx, rest, e)
	case "tail":
		err = tailCmd(ctx, rest, e)
	case "conformance":
		err = conformanceCmd(ctx, rest, e)
	case "health":
		err = healthCmd(ctx, rest, e)
	case "version", "--version", "-version":
		err = versionCmd(rest, e)
	case "help", "-h", "--help":
		if len(rest) > 0 && rest[0] != "help" && !strings.HasPrefix(rest[0], "-") {
			return dispatch(ctx, []string{rest[0], "-h"}, e) // archiver help run
		}
		fmt.Fprint(e.stdout, topUsage)
	default:
		msg := fmt.Sprintf("archiver: unknown command %q", cmd)
		if s := suggest.Nearest(strings.TrimLeft(cmd, "-"), commandNames()); s != "" {
			msg += "; did you mean " + s + "?"
		}
		fmt.Fprintf(e.stderr, "%s\n%s", msg, topUsage)
		return 2
	}
	return cli.ExitCode("archiver "+args[0], err, e.stderr)
}

// versionCmd prints the version; -h prints its usage.
func versionCmd(args []string, e env) error {
	fs := flag.NewFlagSet("archiver version", flag.ContinueOnError)
	if err := cli.ParseFlags(fs, args, e.stdout, "usage: archiver version\n\nPrint the version (archiver v1.2.3) on stdout.\n"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("archiver version: unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintf(e.stdout, "archiver %s\n", appVersion())
	return nil
}

// commandNames lists the commands topUsage names, for suggestions.
func commandNames() []string {
	_, list, _ := strings.Cut(topUsage, "commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	var out []string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

func appVersion() string {
	if version != "" {
		return version
	}
	return "dev"
}
