package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
)

func TestSweepConfigSources(t *testing.T) {
	file := writeFile(t, `
table: FromFile
window: 5m
window-shards: 4
max-deletes-per-second: 200
checkpoint: dynamodb://leases
lease-duration: 30s
`)
	ok := []string{"--table", "Sessions", "--checkpoint", "file://./cp.json"}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c *sweepConfig)
	}{
		{"defaults", ok, nil, func(t *testing.T, c *sweepConfig) {
			if c.Index != "expirationWindowIndex" || c.WindowAttribute != "expirationWindow" || c.Window != time.Minute ||
				c.WindowShards != 1 || c.TTLAttribute != "" || c.Interval != time.Second || c.MaxDeletesPerSecond != 0 ||
				c.shared.LeaseDuration != 20*time.Second || c.shared.ShutdownTimeout != 25*time.Second || c.shared.MetricsAddr != ":9090" {
				t.Fatalf("defaults = %+v", c)
			}
			if c.source["table"] != "flag" || c.source["window"] != "default" {
				t.Fatalf("sources = %v", c.source)
			}
		}},
		{"file", []string{"--config", file}, nil, func(t *testing.T, c *sweepConfig) {
			if c.Table != "FromFile" || c.Window != 5*time.Minute || c.WindowShards != 4 || c.MaxDeletesPerSecond != 200 ||
				c.shared.Checkpoint != "dynamodb://leases" || c.shared.LeaseDuration != 30*time.Second {
				t.Fatalf("cfg = %+v", c)
			}
		}},
		{"env over file, flag over env", []string{"--config", file, "--window-shards", "2"}, map[string]string{
			"ARCHIVER_TABLE": "FromEnv", "ARCHIVER_WINDOW_SHARDS": "8", "ARCHIVER_TTL_ATTRIBUTE": "expiresAt", "ARCHIVER_INTERVAL": "250ms",
		}, func(t *testing.T, c *sweepConfig) {
			if c.Table != "FromEnv" || c.WindowShards != 2 || c.TTLAttribute != "expiresAt" || c.Interval != 250*time.Millisecond || c.Window != 5*time.Minute {
				t.Fatalf("cfg = %+v", c)
			}
			if c.source["table"] != "env" || c.source["window-shards"] != "flag" || c.source["window"] != "file" {
				t.Fatalf("sources = %v", c.source)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadSweepConfig(tc.args, envMap(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestSweepConfigValidation(t *testing.T) {
	ok := []string{"--table", "Sessions", "--checkpoint", "file://./cp.json"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want []string // every line must be present
	}{
		{"nothing", nil, nil, "", []string{"--table: required", "--checkpoint: required"}},
		{"bad table", []string{"--table", "a b", "--checkpoint", "file://./c"}, nil, "", []string{`--table: table name "a b"`}},
		{"bad window", append(ok, "--window", "1500us"), nil, "", []string{"--window: 1.5ms must be a positive whole number of milliseconds"}},
		{"negative window", append(ok, "--window", "-1m"), nil, "", []string{"--window: -1m0s must be a positive"}},
		{"window not a duration", append(ok, "--window", "minute"), nil, "", []string{`--window: "minute" is not a duration`}},
		{"window shards", append(ok, "--window-shards", "0"), nil, "", []string{"--window-shards: 0 must be from 1 to 1000"}},
		{"window shards not a number", ok, map[string]string{"ARCHIVER_WINDOW_SHARDS": "four"}, "",
			[]string{`--window-shards (from ARCHIVER_WINDOW_SHARDS): "four" is not a whole number`}},
		{"max deletes", append(ok, "--max-deletes-per-second", "-5"), nil, "", []string{"--max-deletes-per-second: -5 must be 0 (no cap) or positive"}},
		{"interval", append(ok, "--interval", "0s"), nil, "", []string{"--interval: 0s must be positive"}},
		{"index", append(ok, "--index", "ix"), nil, "", []string{`--index: index name "ix"`}},
		{"window attribute", append(ok, "--window-attribute", ""), nil, "", []string{`--window-attribute: "" is not an attribute name`}},
		{"window attribute of 255 characters, 765 bytes", append(ok, "--window-attribute", strings.Repeat("期", 255)), nil, "", []string{`is not an attribute name (1 to 255 bytes of UTF-8)`}},
		{"TTL attribute not UTF-8", append(ok, "--ttl-attribute", "exp\xff"), nil, "", []string{`--ttl-attribute: "exp\xff" is not an attribute name`}},
		{"shared options checked as run checks them", append(ok, "--checkpoint", "redis://x", "--region", "Mars", "--metrics", "statsd",
			"--lease-duration", "10s", "--lease-renew", "5s", "--shutdown-timeout", "0s"), nil, "", []string{
			`--checkpoint: "redis://x": scheme must be file or dynamodb`, `--region: "Mars"`, `--metrics: "statsd"`,
			"--lease-renew: 5s must be at most a third of --lease-duration 10s", "--shutdown-timeout: 0s must be positive"}},
		{"namespace with a file checkpoint", append(ok, "--checkpoint-namespace", "blue"), nil, "", []string{"--checkpoint-namespace: applies to a dynamodb:// lease table"}},
		{"bad namespace", []string{"--table", "Sessions", "--checkpoint", "dynamodb://leases", "--checkpoint-namespace", "no#pe"}, nil, "", []string{"--checkpoint-namespace: "}},
		{"run's options are not sweep's", append(ok, "--sink", "stdout://"), nil, "", []string{"unknown flag --sink (see archiver sweep -h)"}},
		{"run's keys are not sweep's", ok, nil, "sinks: [stdout://]\n", []string{`unknown key "sinks" (line 1)`}},
		{"bad value from file", ok, nil, "window-shards: [1, 2]\n", []string{`--window-shards (from `, `key "window-shards"): want a single value`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, tc.file)}, args...)
			}
			_, err := loadSweepConfig(args, envMap(tc.env), io.Discard)
			checkUsageError(t, err, "sweep", tc.want)
		})
	}
}

// checkUsageError fails unless err is a usage error of the command whose
// every line names it and which holds every string of want.
func checkUsageError(t *testing.T, err error, cmd string, want []string) {
	t.Helper()
	var ue *cli.UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want a usage error", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%s", w, err)
		}
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "archiver "+cmd+": ") {
			t.Errorf("line %q does not start with the command", line)
		}
	}
}

// The printed configuration names sources, holds sweep's options only,
// and loads back.
func TestSweepPrintConfig(t *testing.T) {
	var out bytes.Buffer
	code := dispatch(t.Context(), []string{"sweep", "--print-config", "--table", "Sessions", "--window", "30s",
		"--checkpoint", "dynamodb://leases?region=eu-west-1"},
		env{stdout: &out, stderr: io.Discard, getenv: envMap(map[string]string{"ARCHIVER_WINDOW_SHARDS": "3"})})
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	s := out.String()
	for _, want := range []string{"archiver sweep", "table: Sessions # flag", "window: 30s # flag", "window-shards: 3 # env",
		"index: expirationWindowIndex # default", "max-deletes-per-second: 0 # default"} {
		if !strings.Contains(s, want) {
			t.Errorf("print-config lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "sink") || strings.Contains(s, "start:") {
		t.Errorf("print-config shows run's options:\n%s", s)
	}
	c, err := loadSweepConfig([]string{"--config", writeFile(t, s)}, envMap(nil), io.Discard)
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, s)
	}
	if c.Table != "Sessions" || c.Window != 30*time.Second || c.WindowShards != 3 {
		t.Fatalf("reloaded = %+v", c)
	}
}

func TestSweepHelpAndExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	e := env{stdout: &out, stderr: &errb, getenv: envMap(nil)}
	if code := dispatch(t.Context(), []string{"sweep", "-h"}, e); code != 0 || !strings.Contains(out.String(), "usage: archiver sweep") ||
		!strings.Contains(out.String(), "ARCHIVER_MAX_DELETES_PER_SECOND") {
		t.Fatalf("sweep -h: exit %d\n%s", code, out.String())
	}
	if code := dispatch(t.Context(), []string{"sweep", "--window", "x"}, e); code != 2 || !strings.Contains(errb.String(), "--window") {
		t.Fatalf("bad flag: exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	if code := dispatch(t.Context(), []string{"help"}, e); code != 0 || !strings.Contains(out.String(), "sweep ") {
		t.Fatalf("top usage lacks sweep:\n%s", out.String())
	}
}

// TestValidAttrName: DynamoDB counts an attribute name's bytes, not its
// characters, and wants UTF-8.
func TestValidAttrName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", false},
		{"e", true},
		{strings.Repeat("x", 255), true},
		{strings.Repeat("x", 256), false},
		{strings.Repeat("期", 85), true},  // 255 bytes
		{strings.Repeat("期", 86), false}, // 258 bytes
		{"exp\xff", false},
		{"line\nbreak", true}, // DynamoDB allows any UTF-8
	} {
		if got := validAttrName(tc.name); got != tc.ok {
			t.Errorf("validAttrName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
