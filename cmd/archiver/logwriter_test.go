package main

import (
	"bytes"
	"io"
	"testing"
)

func TestLogWriter(t *testing.T) {
	var stdout, stderr bytes.Buffer
	e := env{stdout: &stdout, stderr: &stderr}
	tests := []struct {
		name       string
		sinks      []string
		deadLetter string
		want       io.Writer
	}{
		{"no sinks", nil, "", &stdout},
		{"file and s3", []string{"file:///tmp/a", "s3://b/p"}, "file:///tmp/dl", &stdout},
		{"stdout sink", []string{"file:///tmp/a", "stdout://"}, "", &stderr},
		{"stdout sink with events", []string{"STDOUT://?events=expired,deleted"}, "", &stderr},
		{"stdout dead-letter sink", []string{"file:///tmp/a"}, "stdout://", &stderr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := logWriter(&runConfig{Sinks: tc.sinks, DeadLetter: tc.deadLetter}, e); got != tc.want {
				t.Errorf("logs go to %p, want %p", got, tc.want)
			}
		})
	}
}
