package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"gopkg.in/yaml.v3"
)

// secretShapes are URLs whose secret has leaked through configuration
// errors, --print-config or logs: passwords that url.Parse rejects or
// misreads, endpoint credentials nested in a query parameter, an
// --endpoint with credentials and a NATS token. bad fails validation; good
// (when set) loads, so --print-config and the log can be checked too.
var secretShapes = []struct {
	name      string
	option    string // the option that takes the URL
	bad, good string
	secret    string // must never be shown
	host      string // must be shown
}{
	{"sink password with /", "sink", "nats://user:pa/ss1x@nats.internal:4222", "", "ss1x", "nats.internal"},
	{"sink password with #", "sink", "nats://user:pa#ss2x@nats.internal:4222", "", "ss2x", "nats.internal"},
	{"sink password with ?", "sink", "nats://user:pa?ss3x@nats.internal:4222", "", "ss3x", "nats.internal"},
	{"sink password with space", "sink", "nats://user:pa ss4x@nats.internal:4222", "", "ss4x", "nats.internal"},
	{"sink password misread as a port", "sink", "nats://user:1234/ss5x@nats.internal:4222", "", "ss5x", "nats.internal"},
	{"dead-letter password with /", "dead-letter", "nats://user:pa/ss6x@dlq.internal:4222", "", "ss6x", "dlq.internal"},
	{"nats token", "sink", "nats://t0k3nss7x@nats.internal:4222?bogus=1", "nats://t0k3nss7x@nats.internal:4222", "t0k3nss7x", "nats.internal"},
	{"nats token parameter", "sink", "nats://nats.internal:4222?token=t0k3nss8x&bogus=1", "nats://nats.internal:4222?token=t0k3nss8x", "t0k3nss8x", "nats.internal"},
	{"nested checkpoint endpoint", "checkpoint", "dynamodb://leases?endpoint=http://AKID:SECRET9x@ddb.internal:8000&create=maybe",
		"dynamodb://leases?endpoint=http://AKID:SECRET9x@ddb.internal:8000", "SECRET9x", "ddb.internal"},
	{"nested checkpoint endpoint with /", "checkpoint", "dynamodb://leases?endpoint=http://AKID:SEC/RET10x@ddb.internal:8000",
		"", "RET10x", "ddb.internal"},
	{"nested s3 endpoint", "sink", "s3://bucket/p?endpoint=http://AKID:SEC/RET11x@minio.internal:9000&compression=lz4",
		"s3://bucket/p?endpoint=http://AKID:SECRET11x@minio.internal:9000", "RET11x", "minio.internal"},
	{"endpoint with credentials", "endpoint", "http://AKID:SEC/RET12x@127.0.0.1:8000", "http://AKID:SECRET12x@127.0.0.1:8000", "RET12x", "127.0.0.1"},
	{"endpoint with a bad scheme", "endpoint", "ftp://AKID:SECRET13x@127.0.0.1:8000", "", "SECRET13x", "127.0.0.1"},
}

// configFrom returns the arguments and environment that give option the
// value val from source (flag, env or file), with valid values for the
// other required options.
func configFrom(t *testing.T, source, option, val string) ([]string, map[string]string) {
	base := map[string]string{"table": "Sessions", "checkpoint": "file://./cp.json", "sink": "stdout://"}
	delete(base, option)
	var args []string
	for k, v := range base {
		args = append(args, "--"+k, v)
	}
	env := map[string]string{}
	switch source {
	case "flag":
		args = append(args, "--"+option, val)
	case "env":
		env[runOption(option).env()] = val
	case "file":
		b, err := yaml.Marshal(map[string]string{option: val})
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", writeFile(t, string(b)))
	}
	return args, env
}

// TestConfigNeverShowsSecrets: for every source and every leaking shape,
// the configuration error names the option and the host but not the
// secret; and where the URL is valid, neither --print-config nor the
// placeholder-credentials log shows it.
func TestConfigNeverShowsSecrets(t *testing.T) {
	isolateAWS(t)
	for _, source := range []string{"flag", "env", "file"} {
		for _, sh := range secretShapes {
			t.Run(source+"/"+sh.name, func(t *testing.T) {
				args, env := configFrom(t, source, sh.option, sh.bad)
				_, err := loadRunConfig(args, envMap(env), io.Discard)
				if err == nil {
					t.Fatalf("%s %q loaded", sh.option, sh.bad)
				}
				assertRedacted(t, "error", err.Error(), sh.secret, "--"+sh.option, sh.host)
				if sh.good == "" {
					return
				}
				args, env = configFrom(t, source, sh.option, sh.good)
				cfg, err := loadRunConfig(append(args, "--print-config"), envMap(env), io.Discard)
				if err != nil {
					t.Fatalf("%s %q: %v", sh.option, sh.good, err)
				}
				var out bytes.Buffer
				if err := printConfig(&out, cfg); err != nil {
					t.Fatal(err)
				}
				assertRedacted(t, "--print-config", out.String(), sh.secret, sh.option+":", sh.host)
				if sh.option == "endpoint" {
					assertRedacted(t, "log", placeholderLog(t, cfg), sh.secret, "placeholder credentials", sh.host)
				}
			})
		}
	}
}

// placeholderLog is what loadAWSConfig logs for cfg's endpoint when there
// are no AWS credentials.
func placeholderLog(t *testing.T, cfg *runConfig) string {
	core, logs := observer.New(zap.InfoLevel)
	if _, err := loadAWSConfig(context.Background(), "run", cfg.Region, cfg.Endpoint, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range logs.All() {
		b.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			b.WriteString(" " + k + "=" + v.(string))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func assertRedacted(t *testing.T, what, text, secret string, wants ...string) {
	t.Helper()
	if strings.Contains(text, secret) {
		t.Errorf("%s shows the secret %q:\n%s", what, secret, text)
	}
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}
