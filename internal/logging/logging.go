// Package logging builds the process logger (zap) of our commands: the
// level names they take (--log-level), the encoder a terminal or a pipe
// gets, and IsTerminal, the one test for a terminal. It is a leaf: it
// imports zap and the standard library only, so a binary that links it
// links nothing else of ours (cmd/archiver-engine stays small).
package logging

import (
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ParseLevel reads a log level name: debug, info, warn (or warning) or error.
func ParseLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return zapcore.DebugLevel, nil
	case "", "info":
		return zapcore.InfoLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return zapcore.InfoLevel, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
}

// Format selects the encoder of New.
type Format int

// Log formats. FormatAuto picks console on a terminal and JSON otherwise
// (ECS, files, pipes).
const (
	FormatAuto Format = iota
	FormatJSON
	FormatConsole
)

// New builds the process logger writing to w at the given level. With
// FormatAuto, a terminal gets colourless human-readable console lines and
// anything else (awslogs, a pipe) gets one JSON object per line with an
// ISO-8601 "ts" field. Callers derive one named logger per component with
// logger.Named.
func New(w io.Writer, level string, format Format) (*zap.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	if format == FormatAuto {
		format = FormatJSON
		if f, ok := w.(*os.File); ok && IsTerminal(f) {
			format = FormatConsole
		}
	}
	var enc zapcore.Encoder
	if format == FormatConsole {
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(cfg)
	} else {
		cfg := zap.NewProductionEncoderConfig()
		cfg.TimeKey = "ts"
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		cfg.EncodeDuration = zapcore.StringDurationEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(os.Stderr)))), nil
}

// IsTerminal reports whether f is a character device (a terminal), without
// depending on a terminal library: the test for console log lines and for
// drawing a live progress bar on f.
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
