package sinks

import (
	"context"
	"errors"
)

// Preflight runs s's checks when s is a [Preflighter] and returns nil for
// other sinks. Every failure is a *PreflightError. Each check is bounded
// by [PreflightTimeout] (or ctx, if it ends sooner). A caller runs it on
// every sink, the dead-letter sink included, after opening them and
// before reading; a role that may write but not list (HeadBucket) cannot
// pass it and must skip it.
func Preflight(ctx context.Context, s Sink) error {
	p, ok := s.(Preflighter)
	if !ok {
		return nil
	}
	err := p.Preflight(ctx)
	if err == nil {
		return nil
	}
	var pe *PreflightError
	if !errors.As(err, &pe) {
		return &PreflightError{Sink: s.Name(), Check: "preflight", Err: err}
	}
	return err
}
