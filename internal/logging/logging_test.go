package logging

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
)

func TestNew(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "warn", FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	log.Named("consumer").Info("hidden")
	log.Named("consumer").Warn("sink failing")
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not one JSON line: %q", buf.String())
	}
	if doc["logger"] != "consumer" || doc["msg"] != "sink failing" || doc["level"] != "warn" || doc["ts"] == nil {
		t.Fatalf("log line = %v", doc)
	}
	if _, err := New(&buf, "loud", FormatAuto); err == nil {
		t.Fatal("want error for level loud")
	}
}

func TestNewConsole(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "info", FormatConsole)
	if err != nil {
		t.Fatal(err)
	}
	log.Named("engine").Info("listening")
	if s := buf.String(); strings.HasPrefix(s, "{") || !strings.Contains(s, "engine\tlistening") {
		t.Fatalf("console line = %q", s)
	}
}

func TestParseLevel(t *testing.T) {
	for _, c := range []struct {
		in   string
		want zapcore.Level
		err  bool
	}{
		{"debug", zapcore.DebugLevel, false},
		{"", zapcore.InfoLevel, false},
		{" INFO ", zapcore.InfoLevel, false},
		{"warning", zapcore.WarnLevel, false},
		{"error", zapcore.ErrorLevel, false},
		{"loud", zapcore.InfoLevel, true},
	} {
		got, err := ParseLevel(c.in)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

// TestIsTerminal: a regular file and a pipe are no terminal.
func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, f := range []*os.File{f, w} {
		if IsTerminal(f) {
			t.Errorf("%s: a terminal", f.Name())
		}
	}
}
