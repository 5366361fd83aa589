package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/internal/s3test"
)

// TestSectionsTiny runs every section of the bench once at its tiny size
// (-tiny), so that a change elsewhere cannot leave `make bench` broken
// until its next run: the figures mean nothing at that size, but every
// section must run to its end and print them. A baseline the machine does
// not have (moto, dynalite, Dynoxide: the tiny run installs none) prints
// n/a, as in the full bench; versitygw comes from .tools/bin (`make
// tools`), and without it the test skips. A section marked named
// (engine-cpu) is a part of another (engine) and runs inside it.
func TestSectionsTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPING the bench's tiny run in -short mode")
	}
	// The bench finds versitygw on $PATH or in .tools/bin; s3test finds
	// or builds it, or skips the test.
	bin := s3test.Binary(t)
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, s := range sections() {
		if s.named {
			continue // runs inside the section it is a part of
		}
		t.Run(s.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := s.run(ctx, &out, true); err != nil {
				t.Fatalf("%s -tiny: %v\noutput so far:\n%s", s.name, err, out.String())
			}
			if strings.TrimSpace(out.String()) == "" {
				t.Fatalf("%s -tiny printed nothing", s.name)
			}
			t.Logf("%s -tiny:\n%s", s.name, out.String())
		})
	}
}

// TestChoose holds -only to its meaning: the sections it names, or every
// section not marked named.
func TestChoose(t *testing.T) {
	names := func(ss []section) string {
		var n []string
		for _, s := range ss {
			n = append(n, s.name)
		}
		return strings.Join(n, ",")
	}
	for _, tc := range []struct{ only, want string }{
		{"", "engine,engine-mem,consumer,sinks,pipeline,manifests,nats-formats,sweep,archive,restore"},
		{"engine-cpu", "engine-cpu"},
		{"restore,sinks", "sinks,restore"},
		{"nosuch", ""},
	} {
		if got := names(choose(sections(), tc.only)); got != tc.want {
			t.Errorf("choose(%q) = %s, want %s", tc.only, got, tc.want)
		}
	}
}
