package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTakeHiddenFlag(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		wantRest  []string
		wantValue string
		wantErr   string
	}{
		{"absent", []string{"--listen", "x"}, []string{"--listen", "x"}, "", ""},
		{"two dashes, separate value", []string{"--listen", "x", "--cpuprofile", "p.out"}, []string{"--listen", "x"}, "p.out", ""},
		{"one dash, equals", []string{"-cpuprofile=p.out", "--listen", "x"}, []string{"--listen", "x"}, "p.out", ""},
		{"last one wins", []string{"--cpuprofile=a", "--cpuprofile", "b"}, nil, "b", ""},
		{"a value that looks like the flag stays", []string{"--region", "cpuprofile"}, []string{"--region", "cpuprofile"}, "", ""},
		{"after -- is left alone", []string{"--", "--cpuprofile", "p"}, []string{"--", "--cpuprofile", "p"}, "", ""},
		{"missing value", []string{"--cpuprofile"}, nil, "", "flag needs an argument: --cpuprofile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rest, value, err := takeHiddenFlag(tc.args, "cpuprofile")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || value != tc.wantValue || !slices.Equal(rest, tc.wantRest) {
				t.Fatalf("got %q, %q, %v; want %q, %q", rest, value, err, tc.wantRest, tc.wantValue)
			}
		})
	}
}

// The hidden --cpuprofile flag is not in --help, and a profile is written
// when the engine stops.
func TestEngineCmdCPUProfile(t *testing.T) {
	var out strings.Builder
	if err := engineCmd(t.Context(), []string{"--help"}, env{stdout: &out, stderr: &out, getenv: envMap(nil)}); err != errHelp {
		t.Fatalf("--help: %v", err)
	}
	if strings.Contains(out.String(), "cpuprofile") {
		t.Fatalf("--help lists the hidden flag:\n%s", out.String())
	}
	file := filepath.Join(t.TempDir(), "cpu.out")
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the engine starts, finds ctx done and stops
	err := engineCmd(ctx, []string{"--listen", "127.0.0.1:0", "--cpuprofile", file, "--log-level", "error"}, env{stdout: io.Discard, stderr: io.Discard, getenv: envMap(nil)})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Fatalf("profile not written: %v", err)
	}
}
