// Command archiver-engine serves the local DynamoDB + DynamoDB Streams
// engine whose TTL really deletes items: `archiver engine` in a binary of
// its own, with the same flags, help and behaviour (both run
// cmd/internal/enginecmd).
//
//	archiver-engine [flags]   serve until SIGINT or SIGTERM (-h lists the flags)
//	archiver-engine version   print the version
//
// Why a second binary: Go runs the init functions of every package a
// binary links, whatever the subcommand. The archiver links the AWS SDK,
// nats-server, Prometheus, protobuf and Parquet, whose inits touch about
// 19 MiB of the binary's pages at start-up, so `archiver engine` idles at
// about 25 MiB of resident memory where this binary, which links the
// engine alone, idles at about 8 (docs/DESIGN.md, "The engine", Memory).
// Teams start one engine per test job, and that difference is most of an
// idle engine's memory. internal/housetest keeps those packages out of
// its build (TestSlimEngineLinksNoArchiver).
//
// Exit codes, as the archiver's: 0 success (also after SIGINT/SIGTERM or
// -h), 1 runtime failure (the port taken, a locked --data-dir), 2 bad
// flags. A second signal, a second or more after the first, stops at once
// with exit 1.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/cmd/internal/enginecmd"
)

// prog is the program's name in help, errors and signal lines.
const prog = "archiver-engine"

// version is set by release builds: -ldflags "-X main.version=v1.2.3".
var version = ""

func main() {
	ctx, _ := cli.WatchSignals(os.Stderr, enginecmd.Stopping(prog))
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var err error
	if len(args) > 0 && (args[0] == "version" || args[0] == "--version" || args[0] == "-version") {
		err = versionCmd(args[1:], stdout)
	} else {
		err = enginecmd.Run(ctx, prog, args, stdout)
	}
	return cli.ExitCode(prog, err, stderr)
}

// versionCmd prints the version ("archiver-engine v1.2.3", "dev" when the
// build stamped none).
func versionCmd(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return cli.Usagef("%s version: unexpected argument %q", prog, args[0])
	}
	v := version
	if v == "" {
		v = "dev"
	}
	fmt.Fprintf(stdout, "%s %s\n", prog, v)
	return nil
}
