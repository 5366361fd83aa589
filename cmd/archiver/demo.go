package main

import (
	"context"
	"errors"
)

func demoCmd(ctx context.Context, args []string, e env) error {
	return errors.New("not wired yet")
}
