package filesink

import (
	"context"
	"fmt"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// open opens a file:// or stdout:// URL as package sinks' Open does, but
// for its manifests=false wrapper (package sinks' tests hold that one).
func open(_ context.Context, raw string, o sinkapi.Options) (sinkapi.Sink, []event.Kind, error) {
	p, err := sinkurl.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	kinds, err := p.Kinds()
	if err != nil {
		return nil, nil, err
	}
	switch p.URL.Scheme {
	case "file":
		c, err := sinkurl.ParseFile(p)
		if err != nil {
			return nil, nil, err
		}
		s, err := NewWith(c, o)
		if err != nil {
			return nil, nil, fmt.Errorf("sink %q: %w", p.Redacted, err)
		}
		return s, kinds, nil
	case "stdout":
		item, err := ParseStdout(p)
		if err != nil {
			return nil, nil, err
		}
		return NewWriter("stdout://", o.Stdout, item, o), kinds, nil
	}
	return nil, nil, fmt.Errorf("%s: not a file or stdout URL", raw)
}
