package sinks

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
)

// flakySink is a Preflighter whose check fails with a plain error.
type flakySink struct{ Sink }

func (flakySink) Name() string                        { return "flaky://" }
func (flakySink) Preflight(ctx context.Context) error { return errors.New("no\nway") }

func TestPreflightDispatch(t *testing.T) {
	ctx := testkit.Ctx(t)
	stdout := NewWriterSink("stdout://", &syncBuffer{}, false, Options{})
	defer stdout.Close(ctx)
	if err := Preflight(ctx, stdout); err != nil {
		t.Fatalf("stdout:// has no checks, got %v", err)
	}
	err := Preflight(ctx, flakySink{})
	pe := testkit.WantPreflightError(t, err, "flaky://", "preflight", "no way")
	if pe.Err.Error() != "no\nway" {
		t.Fatalf("cause %q lost", pe.Err)
	}
	secret := &PreflightError{Sink: "nats://h:4222", Check: CheckConnected, Err: errors.New("dial nats://h:4222?token=s3cr3t failed")}
	if msg := secret.Error(); strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, "token=REDACTED") {
		t.Fatalf("secret not masked: %q", msg)
	}
}
