package main

import (
	"bytes"
	"context"
	"testing"
)

// TestEngineCmdIsEnginecmd: `archiver engine` runs the engine command of
// cmd/internal/enginecmd under its own name (its flags are tested there):
// a bad flag is refused with exit 2, naming `archiver engine`.
func TestEngineCmdIsEnginecmd(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"engine", "--listen", "nowhere"}, env{stdout: &stdout, stderr: &stderr, getenv: envMap(nil)})
	want := "archiver engine: --listen: \"nowhere\" is not HOST:PORT (e.g. 127.0.0.1:8000)\n"
	if code != 2 || stderr.String() != want || stdout.Len() > 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing and %q", code, stdout.String(), stderr.String(), want)
	}
}
