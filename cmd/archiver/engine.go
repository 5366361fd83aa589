package main

import (
	"context"

	"github.com/ttl-archiver/archiver/cmd/internal/enginecmd"
)

// engineCmd serves the local DynamoDB + Streams engine until ctx ends
// (SIGINT/SIGTERM), then shuts it down cleanly: the command that
// cmd/archiver-engine runs alone (enginecmd).
func engineCmd(ctx context.Context, args []string, e env) error {
	return enginecmd.Run(ctx, "archiver engine", args, e.stdout)
}
