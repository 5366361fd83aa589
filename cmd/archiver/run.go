package main

import (
	"context"
	"errors"
)

// runCmd is `archiver run`.
func runCmd(ctx context.Context, args []string, e env) error {
	cfg, err := loadRunConfig(args, e.getenv, e.stdout)
	if err != nil {
		return err
	}
	if cfg.PrintConfig {
		return printConfig(e.stdout, cfg)
	}
	return errors.New("not wired yet")
}
