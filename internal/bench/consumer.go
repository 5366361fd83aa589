package main

import (
	"context"
	"fmt"
	"io"
)

// runConsumerBench is a placeholder until the consumer figures are measured.
func runConsumerBench(ctx context.Context, w io.Writer) error {
	_, err := fmt.Fprintln(w, "not measured yet")
	return err
}
