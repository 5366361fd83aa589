package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "archiver.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, `
region: eu-west-1
tables: [FromFile]
checkpoint: file:///var/lib/archiver/cp.json
sinks:
  - s3://bucket/prefix
start: latest
shutdown-timeout: 20s
log-level: debug
metrics: emf
pprof: true
`)
	base := []string{"--config", file}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c *runConfig)
	}{
		{"defaults", []string{"--table", "Sessions", "--checkpoint", "file://./cp.json", "--sink", "stdout://"}, nil, func(t *testing.T, c *runConfig) {
			if c.Start != "trim-horizon" || c.ShutdownTimeout != 25*time.Second || c.LogLevel != "info" ||
				c.MetricsAddr != ":9090" || c.Metrics != "prometheus" || c.Region != "" || c.Endpoint != "" || c.Pprof || c.PrintConfig || c.SDKDecoding {
				t.Fatalf("defaults = %+v", c)
			}
			if c.source["start"] != "default" || c.source["table"] != "flag" {
				t.Fatalf("sources = %v", c.source)
			}
		}},
		{"file over default", base, nil, func(t *testing.T, c *runConfig) {
			if c.Region != "eu-west-1" || c.Start != "latest" || c.ShutdownTimeout != 20*time.Second ||
				c.LogLevel != "debug" || c.Metrics != "emf" || strings.Join(c.Tables, ",") != "FromFile" ||
				strings.Join(c.Sinks, ",") != "s3://bucket/prefix" || c.MetricsAddr != ":9090" || !c.Pprof {
				t.Fatalf("cfg = %+v", c)
			}
			if c.source["region"] != "file" || c.source["metrics-addr"] != "default" {
				t.Fatalf("sources = %v", c.source)
			}
		}},
		{"env over file", base, map[string]string{
			"ARCHIVER_REGION": "us-west-2", "ARCHIVER_TABLE": "Env1, Env2", "ARCHIVER_SHUTDOWN_TIMEOUT": "10s",
			"ARCHIVER_SINK": "nats://h1:4222,h2:4222?events=expired,deleted,file://./out", "ARCHIVER_PPROF": "false",
		}, func(t *testing.T, c *runConfig) {
			if c.Region != "us-west-2" || strings.Join(c.Tables, "|") != "Env1|Env2" || c.ShutdownTimeout != 10*time.Second ||
				c.Start != "latest" || c.Pprof {
				t.Fatalf("cfg = %+v", c)
			}
			if strings.Join(c.Sinks, "|") != "nats://h1:4222,h2:4222?events=expired,deleted|file://./out" {
				t.Fatalf("sinks = %q", c.Sinks)
			}
			if c.source["region"] != "env" || c.source["start"] != "file" {
				t.Fatalf("sources = %v", c.source)
			}
		}},
		{"flag over env", append(base, "--region", "ap-south-1", "--table", "Flag1", "--table", "Flag2", "--start", "trim-horizon", "--pprof", "--sdk-decoding"),
			map[string]string{"ARCHIVER_REGION": "us-west-2", "ARCHIVER_TABLE": "Env1", "ARCHIVER_PPROF": "false"}, func(t *testing.T, c *runConfig) {
				if c.Region != "ap-south-1" || strings.Join(c.Tables, "|") != "Flag1|Flag2" || c.Start != "trim-horizon" || !c.Pprof || c.PrintConfig || !c.SDKDecoding {
					t.Fatalf("cfg = %+v", c)
				}
			}},
		{"config path from env", nil, map[string]string{"ARCHIVER_CONFIG": file}, func(t *testing.T, c *runConfig) {
			if c.Region != "eu-west-1" {
				t.Fatalf("cfg = %+v", c)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadRunConfig(tc.args, envMap(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestConfigValidation(t *testing.T) {
	ok := []string{"--table", "Sessions", "--checkpoint", "file://./cp.json", "--sink", "stdout://"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want []string // every line must be present
	}{
		{"nothing", nil, nil, "", []string{
			"--checkpoint: required", "--sink: at least one sink", "--table, --stream-arn or --tables-tagged"}},
		{"bad tag", append(ok, "--tables-tagged", "archive", "--tables-tagged", "=yes"), nil, "", []string{
			`--tables-tagged: "archive" is not KEY=VALUE`, `--tables-tagged: "=yes": the key must be 1 to 128 characters`}},
		{"tags with regions", append(ok, "--tables-tagged", "archive=yes", "--regions", "all"), nil, "", []string{
			"--tables-tagged: reads the tagged tables of --region alone"}},
		{"bad tables-refresh", append(ok, "--tables-tagged", "archive=yes", "--tables-refresh", "0s"), nil, "", []string{
			"--tables-refresh: 0s must be positive"}},
		{"bad namespace", append(ok, "--checkpoint", "dynamodb://leases", "--checkpoint-namespace", "a#b"), nil, "", []string{
			`--checkpoint-namespace: namespace "a#b": want 1 to 32 letters`}},
		{"namespace with a file", append(ok, "--checkpoint-namespace", "blue"), nil, "", []string{
			"--checkpoint-namespace: applies to a dynamodb:// lease table"}},
		{"bad start", append(ok, "--start", "middle"), nil, "", []string{`--start: "middle" is not trim-horizon or latest`}},
		{"bad sink scheme", append(ok, "--sink", "ftp://x"), nil, "", []string{`--sink: `, `ftp://x`, `unknown scheme "ftp"`}},
		{"bad sink parameters listed with the rest", append(ok, "--sink", "s3://bucket/p?compression=lz4&token=hunter2", "--sink", "nats://h:4222?subject=a..b", "--start", "middle"), nil, "", []string{
			`compression: must be`, `subject`, `--start: "middle"`}},
		{"bad duration from env", ok, map[string]string{"ARCHIVER_SHUTDOWN_TIMEOUT": "soon"}, "",
			[]string{`--shutdown-timeout (from ARCHIVER_SHUTDOWN_TIMEOUT): "soon" is not a duration`}},
		{"many problems at once", append(ok, "--metrics", "statsd", "--metrics-addr", "9090", "--log-level", "loud",
			"--endpoint", "localhost:8000", "--region", "Mars", "--checkpoint", "redis://x"), nil, "", []string{
			`--metrics: "statsd"`, `--metrics-addr: "9090" is not HOST:PORT`, `--log-level: unknown log level "loud"`,
			`--endpoint: "localhost:8000" is not a URL: give the scheme, e.g. http://localhost:8000`, `--region: "Mars"`, `--checkpoint: "redis://x": scheme must be file or dynamodb`}},
		{"bad dynamodb checkpoint", append(ok, "--checkpoint", "dynamodb://x?create=maybe"), nil, "", []string{"--checkpoint: ", "x"}},
		{"lease renew too slow", append(ok, "--lease-duration", "10s", "--lease-renew", "5s"), nil, "",
			[]string{"--lease-renew: 5s must be at most a third of --lease-duration 10s"}},
		{"bad in-flight size", append(ok, "--max-in-flight-bytes", "lots"), nil, "",
			[]string{`--max-in-flight-bytes: "lots" is not a size from 1MiB to 1TiB`}},
		{"bad stream arn", []string{"--stream-arn", "arn:nope", "--checkpoint", "file://./c", "--sink", "stdout://"}, nil, "",
			[]string{`--stream-arn: "arn:nope" is not a DynamoDB stream ARN`}},
		{"unknown flag", []string{"--tabel", "x"}, nil, "", []string{"unknown flag --tabel; did you mean --table?"}},
		{"unknown file key", ok, nil, "tabel: [x]\nregion: eu-west-1\n", []string{`unknown key "tabel" (line 1)`}},
		{"file value of wrong shape", ok, nil, "region: [a, b]\n", []string{`--region (from `, `key "region"): want a single value`}},
		{"bad boolean from env", ok, map[string]string{"ARCHIVER_PPROF": "maybe"}, "",
			[]string{`--pprof (from ARCHIVER_PPROF): "maybe" is not true or false`}},
		{"bad boolean from file", ok, nil, "pprof: sometimes\n", []string{`--pprof (from `, `key "pprof"): "sometimes" is not true or false`}},
		{"not yaml", ok, nil, "region: [\n", []string{"not valid YAML"}},
		{"bad dead-letter sink", append(ok, "--dead-letter", "s3://bucket/p?compression=lz4"), nil, "", []string{`--dead-letter: `, `compression: must be`}},
		{"dead-letter with events", append(ok, "--dead-letter", "file://./dlq?events=all"), nil, "", []string{`--dead-letter: events= does not apply`}},
		{"dead-letter is a sink", append(ok, "--sink", "file://./arch", "--dead-letter", "file://./arch"), nil, "", []string{`--dead-letter: "file://./arch" is also a --sink`}},
		{"bad retry-for", append(ok, "--dead-letter", "file://./dlq", "--retry-for", "-1m"), nil, "", []string{`--retry-for: -1m0s must be positive`}},
		{"bad expired-when", append(ok, "--expired-when", "sweeper"), nil, "", []string{`--expired-when: "sweeper" is not service or past-ttl`}},
		{"bad expired-when from env", ok, map[string]string{"ARCHIVER_EXPIRED_WHEN": "PAST-TTL"}, "",
			[]string{`--expired-when (from ARCHIVER_EXPIRED_WHEN): "PAST-TTL" is not service or past-ttl`}},
		{"bad expired-when from file", ok, nil, "expired-when: always\n", []string{`key "expired-when"): "always" is not service or past-ttl`}},
		{"endpoint without scheme", append(ok, "--endpoint", "127.0.0.1:8000"), nil, "", []string{`--endpoint: "127.0.0.1:8000" is not a URL: give the scheme, e.g. http://127.0.0.1:8000`}},
		{"endpoint of another scheme", append(ok, "--endpoint", "ftp://127.0.0.1:8000"), nil, "", []string{`--endpoint: "ftp://127.0.0.1:8000": scheme must be http or https`}},
		{"bad regions", append(ok, "--regions", "eu-west-1,Mars,eu-west-1"), nil, "", []string{`--regions: "Mars" is not a region name`, `--regions: eu-west-1 is listed twice`}},
		{"regions all beside others", append(ok, "--regions", "all,eu-west-1"), nil, "", []string{`--regions: "all" reads every replica's Region: give it alone`}},
		{"regions without a table", []string{"--stream-arn", "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/1", "--checkpoint", "file://./c", "--sink", "stdout://", "--regions", "all"}, nil, "",
			[]string{"--regions: reads the replicas of each --table, and no --table is given"}},
		{"regions and per-region", append(ok, "--regions", "all", "--per-region"), nil, "", []string{"--per-region: says another archiver reads each other Region"}},
		{"regions from file", ok, nil, "regions: [eu-west-1, moon-1]\n", []string{`--regions (from `, `"moon-1" is not a region name`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, tc.file)}, args...)
			}
			_, err := loadRunConfig(args, envMap(tc.env), io.Discard)
			checkUsageError(t, err, "run", tc.want)
			if n := len(strings.Split(err.Error(), "\n")); n < len(tc.want) && tc.name == "many problems at once" {
				t.Errorf("want one line per problem, got %d", n)
			}
		})
	}
}

// TestExpiredWhenOption: --expired-when from each source and its default
// (bad values: TestConfigValidation).
func TestExpiredWhenOption(t *testing.T) {
	ok := []string{"--table", "Sessions", "--checkpoint", "file://./cp.json", "--sink", "stdout://"}
	cases := []struct {
		name, file string
		args       []string
		env        map[string]string
		want       string
	}{
		{"default", "", ok, nil, "service"},
		{"flag", "", append(ok, "--expired-when", "past-ttl"), nil, "past-ttl"},
		{"env", "", ok, map[string]string{"ARCHIVER_EXPIRED_WHEN": "past-ttl"}, "past-ttl"},
		{"file", "expired-when: past-ttl\n", ok, nil, "past-ttl"},
		{"flag over env", "", append(ok, "--expired-when", "service"), map[string]string{"ARCHIVER_EXPIRED_WHEN": "past-ttl"}, "service"},
	}
	for _, tc := range cases {
		args := tc.args
		if tc.file != "" {
			args = append([]string{"--config", writeFile(t, tc.file)}, args...)
		}
		c, err := loadRunConfig(args, envMap(tc.env), io.Discard)
		if err != nil || c.ExpiredWhen != tc.want {
			t.Errorf("%s: ExpiredWhen = %v, %v; want %q", tc.name, c, err, tc.want)
		}
	}
}

func TestExitCodeForBadFlag(t *testing.T) {
	var stderr bytes.Buffer
	code := dispatch(t.Context(), []string{"run", "--start", "x"}, env{stdout: io.Discard, stderr: &stderr, getenv: envMap(nil)})
	if code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "--start") {
		t.Fatalf("stderr = %q", stderr.String())
	}
}

func TestPrintConfigMasksSecrets(t *testing.T) {
	var out bytes.Buffer
	code := dispatch(t.Context(), []string{"run", "--print-config",
		"--table", "Sessions",
		"--checkpoint", "dynamodb://leases?region=eu-west-1",
		"--sink", "nats://alice:hunter2@127.0.0.1:4222?subject=a.{table}",
		"--sink", "nats://127.0.0.1:4222?token=s3cr3t",
		"--sink", "nats://127.0.0.1:4222?creds=/run/secrets/nats.creds",
		"--sink", "nats://127.0.0.1:4222?nkey=SUAXYZ",
		"--sink", "nats://tok123@127.0.0.1:4222",
		"--sink", "s3://bucket/prefix?sse=aws:kms&kms-key-id=alias/k",
	}, env{stdout: &out, stderr: io.Discard, getenv: envMap(map[string]string{"ARCHIVER_REGION": "eu-west-1"})})
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	s := out.String()
	for _, secret := range []string{"hunter2", "s3cr3t", "nats.creds", "SUAXYZ", "tok123"} {
		if strings.Contains(s, secret) {
			t.Errorf("print-config shows %q:\n%s", secret, s)
		}
	}
	for _, want := range []string{"alice:REDACTED@", "token=REDACTED", "subject=a.{table}", "kms-key-id=alias/k",
		"region: eu-west-1 # env", "start: trim-horizon # default", "dynamodb://leases?region=eu-west-1"} {
		if !strings.Contains(s, want) {
			t.Errorf("print-config lacks %q:\n%s", want, s)
		}
	}
	// The output is itself a valid config file.
	p := writeFile(t, s)
	c, err := loadRunConfig([]string{"--config", p}, envMap(nil), io.Discard)
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, s)
	}
	if c.Region != "eu-west-1" || len(c.Sinks) != 6 || c.Start != "trim-horizon" {
		t.Fatalf("reloaded = %+v", c)
	}
}

func TestSplitList(t *testing.T) {
	cases := []struct {
		in   string
		urls bool
		want string
	}{
		{"a,b, c ,", false, "a|b|c"},
		{"nats://h1:1,h2:2?events=expired,deleted,file://x,stdout://", true, "nats://h1:1,h2:2?events=expired,deleted|file://x|stdout://"},
		{"", true, ""},
	}
	for _, tc := range cases {
		if got := strings.Join(splitList(tc.in, tc.urls), "|"); got != tc.want {
			t.Errorf("splitList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzConfigFile(f *testing.F) {
	f.Add("region: eu-west-1\ntables: [a, b]\n")
	f.Add("sink:\n  - nats://x\n  - {a: b}\n")
	f.Add("- 1\n- 2\n")
	f.Add(": :\n")
	f.Fuzz(func(t *testing.T, body string) {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadRunConfig([]string{"--config", p, "--table", "Sessions", "--checkpoint", "file://./c", "--sink", "stdout://"}, envMap(nil), io.Discard)
		var ue *cli.UsageError
		if err != nil && !errors.As(err, &ue) {
			t.Fatalf("error is not a usage error: %v", err)
		}
	})
}

// TestExampleConfigLoads keeps deploy/archiver.example.yaml valid.
func TestExampleConfigLoads(t *testing.T) {
	c, err := loadRunConfig([]string{"--config", filepath.Join("..", "..", "deploy", "archiver.example.yaml")}, envMap(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Region != "eu-west-1" || len(c.Sinks) != 2 || c.Checkpoint != "dynamodb://ttl-archiver-leases" || c.LeaseRenew != 5*time.Second {
		t.Fatalf("example config = %+v", c)
	}
}
