package deploy

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ttl-archiver/archiver/sinks"
)

// taskDefinition is what the tests read of an ECS task definition file.
type taskDefinition struct {
	Memory               string
	ContainerDefinitions []struct {
		Command     []string
		Environment []struct{ Name, Value string }
		Secrets     []struct{ Name, ValueFrom string }
	}
}

func loadTaskDefinition(t *testing.T, name string) taskDefinition {
	t.Helper()
	var td taskDefinition
	if err := json.Unmarshal([]byte(readFile(t, name)), &td); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(td.ContainerDefinitions) != 1 {
		t.Fatalf("%s: want one container, got %d", name, len(td.ContainerDefinitions))
	}
	return td
}

// taskEnv is a task definition's environment, name to value.
func (td taskDefinition) env() map[string]string {
	out := map[string]string{}
	for _, e := range td.ContainerDefinitions[0].Environment {
		out[e.Name] = e.Value
	}
	return out
}

var archiverName = regexp.MustCompile(`\bARCHIVER_[A-Z0-9_]+\b`)

// TestTaskEnvironmentIsAccepted: every ARCHIVER_* variable a task sets,
// in the Terraform and in the JSON task definitions, is a setting of the
// command that task runs (a name the binary does not read would be
// ignored in silence), and every ARCHIVER_* name the deployment's files
// mention at all is a setting of archiver run or archiver sweep.
func TestTaskEnvironmentIsAccepted(t *testing.T) {
	run := envNames(t, "..", "cmd/archiver/config.go", "runOptions")
	sweep := envNames(t, "..", "cmd/archiver/sweep_config.go", "sweepOptions")
	names := func(m map[string]string) []string {
		var out []string
		for n := range m {
			out = append(out, n)
		}
		return out
	}
	archiverJSON := loadTaskDefinition(t, "ecs-task-definition.json")
	sweeperJSON := loadTaskDefinition(t, "ecs-task-definition-sweep.json")
	for _, tc := range []struct {
		task    string
		command string
		known   map[string]bool
		env     []string
	}{
		// main.tf holds the archiver's task alone, with the entries of
		// its environment's locals (the dead-letter sink's).
		{"terraform/main.tf", "run", run, names(tfEnv(readFile(t, "terraform/main.tf")))},
		{"terraform/sweep.tf", "sweep", sweep, names(tfEnv(readFile(t, "terraform/sweep.tf")))},
		{"ecs-task-definition.json", strings.Join(archiverJSON.ContainerDefinitions[0].Command, " "), run, names(archiverJSON.env())},
		{"ecs-task-definition-sweep.json", strings.Join(sweeperJSON.ContainerDefinitions[0].Command, " "), sweep, names(sweeperJSON.env())},
	} {
		t.Run(tc.task, func(t *testing.T) {
			if tc.command != "run" && tc.command != "sweep" {
				t.Fatalf("runs %q, want run or sweep", tc.command)
			}
			if len(tc.env) < 5 {
				t.Fatalf("found only %v", tc.env)
			}
			for _, n := range tc.env {
				if !tc.known[n] {
					t.Errorf("sets %s, which is no setting of archiver %s", n, tc.command)
				}
			}
		})
	}
	files, err := filepath.Glob("terraform/*.tf")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "ecs-task-definition.json", "ecs-task-definition-sweep.json", "archiver.example.yaml", "README.md")
	for _, f := range files {
		for _, n := range archiverName.FindAllString(readFile(t, f), -1) {
			if !run[n] && !sweep[n] {
				t.Errorf("%s names %s, which is no setting of archiver run or sweep", f, n)
			}
		}
	}
}

var (
	tfVariableDecl = regexp.MustCompile(`(?m)^variable "([a-z0-9_]+)"`)
	tfVariableUse  = regexp.MustCompile(`\bvar\.([a-z0-9_]+)\b`)
)

// TestTerraformVariablesUsed: every variable of the Terraform is used
// outside its own declaration (its validation does not count), so none is
// a setting that reaches nothing, and every var.X used is declared.
func TestTerraformVariablesUsed(t *testing.T) {
	files, err := filepath.Glob("terraform/*.tf")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{}
	used := map[string]bool{}
	for _, f := range files {
		src := readFile(t, f)
		for _, m := range tfVariableDecl.FindAllStringSubmatch(src, -1) {
			declared[m[1]] = f
			// Blank the declaration, so that its validation's var.X is
			// not counted as a use.
			src = strings.Replace(src, tfBlock(src, m[0]), "", 1)
		}
		for _, m := range tfVariableUse.FindAllStringSubmatch(src, -1) {
			used[m[1]] = true
		}
	}
	if len(declared) < 20 {
		t.Fatalf("found only %d variables", len(declared))
	}
	var unused, undeclared []string
	for v, f := range declared {
		if !used[v] {
			unused = append(unused, v+" ("+f+")")
		}
	}
	for v := range used {
		if declared[v] == "" {
			undeclared = append(undeclared, v)
		}
	}
	sort.Strings(unused)
	sort.Strings(undeclared)
	if len(unused) > 0 {
		t.Errorf("variables that nothing uses: %v", unused)
	}
	if len(undeclared) > 0 {
		t.Errorf("var.X used but never declared: %v", undeclared)
	}
}

// TestTerraformDeadLetter: the Terraform wires the dead-letter sink the
// alarms watch: ARCHIVER_DEAD_LETTER (and ARCHIVER_RETRY_FOR) in the
// archiver's environment, the S3 URL in the archive bucket under
// dead_letter_prefix, and the policy's dead-letter statements filled with
// that prefix, dropped when it is empty (they would grant the bucket).
func TestTerraformDeadLetter(t *testing.T) {
	main := readFile(t, "terraform/main.tf")
	env := tfEnv(main)
	if env["ARCHIVER_DEAD_LETTER"] != "local.dead_letter" || env["ARCHIVER_RETRY_FOR"] != "var.retry_for" {
		t.Errorf("archiver environment: ARCHIVER_DEAD_LETTER = %q, ARCHIVER_RETRY_FOR = %q", env["ARCHIVER_DEAD_LETTER"], env["ARCHIVER_RETRY_FOR"])
	}
	archiver := tfBlock(main, `resource "aws_ecs_task_definition" "archiver"`)
	if !strings.Contains(archiver, "local.dead_letter_env)") {
		t.Error("the archiver's environment does not take local.dead_letter_env")
	}
	if got := tfLocal(t, main, "dead_letter"); got != `local.use_dead_letter ? "s3://${var.bucket_name}/${var.dead_letter_prefix}?${local.s3_params}" : ""` {
		t.Errorf("local.dead_letter = %s", got)
	}
	if !strings.Contains(main, "dead_letter_prefix = var.dead_letter_prefix") {
		t.Error("iam-policy.json's ${dead_letter_prefix} is not filled with var.dead_letter_prefix")
	}
	if got := tfLocal(t, main, "use_dead_letter"); got != `var.dead_letter_prefix != ""` {
		t.Errorf("local.use_dead_letter = %s", got)
	}
	for _, st := range loadPolicy(t).Statement {
		usesPrefix := strings.Contains(strings.Join(st.Resource, " "), "${dead_letter_prefix}")
		dropped := regexp.MustCompile(`local\.use_dead_letter \? \[\] : \[[^\]]*"` + st.Sid + `"`).MatchString(main)
		if usesPrefix != dropped {
			t.Errorf("statement %s: uses ${dead_letter_prefix} %v, dropped without a dead-letter sink %v", st.Sid, usesPrefix, dropped)
		}
	}
}

// TestSinksAllowedByPolicy: every S3 URL of the example configuration and
// of the example task definition, and those the Terraform builds, writes
// where iam-policy.json, filled with the same bucket and prefixes, lets
// the task write: objects under the prefix (PutObject, GetObject), the
// preflight's HeadBucket and its marker's removal. The dead-letter sink is
// one of them.
func TestSinksAllowedByPolicy(t *testing.T) {
	var example struct {
		Sinks      []string `yaml:"sinks"`
		DeadLetter string   `yaml:"dead-letter"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "archiver.example.yaml")), &example); err != nil {
		t.Fatal(err)
	}
	td := loadTaskDefinition(t, "ecs-task-definition.json").env()
	for _, tc := range []struct {
		name   string
		bucket string
		urls   []string
	}{
		{"archiver.example.yaml", "example-ttl-archive", append(example.Sinks, example.DeadLetter)},
		{"ecs-task-definition.json", "my-archive-bucket", []string{td["ARCHIVER_SINK"], td["ARCHIVER_DEAD_LETTER"]}},
		// main.tf's local.s3_sink and local.dead_letter with the defaults,
		// and with kms_key_arn (TestTerraformS3Params holds the text).
		{"terraform", "example-bucket", []string{"s3://example-bucket/ttl-archive/?sse=AES256", "s3://example-bucket/dead-letter/?sse=AES256"}},
		{"terraform-kms", "example-bucket", []string{"s3://example-bucket/ttl-archive/?sse=aws:kms&kms-key-id=" + testKMSKey, "s3://example-bucket/dead-letter/?sse=aws:kms&kms-key-id=" + testKMSKey}},
		{"terraform-bucket-region", "example-bucket", []string{"s3://example-bucket/ttl-archive/?sse=aws:kms&kms-key-id=" + testKMSKey + "&region=eu-west-1", "s3://example-bucket/dead-letter/?sse=aws:kms&kms-key-id=" + testKMSKey + "&region=eu-west-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filledPolicy(t, map[string]string{"bucket": tc.bucket, "prefix": "ttl-archive/", "dead_letter_prefix": "dead-letter/"})
			s3urls := 0
			for _, u := range tc.urls {
				if !strings.HasPrefix(u, "s3://") {
					continue
				}
				s3urls++
				c, err := sinks.ParseS3URL(u)
				if err != nil {
					t.Fatalf("%s: %v", u, err)
				}
				if c.SSE == "aws:kms" && c.KMSKeyID != "" && !p.allows("kms:GenerateDataKey", c.KMSKeyID) {
					t.Errorf("%s: iam-policy.json does not allow kms:GenerateDataKey on the sink's key %s", u, c.KMSKeyID)
				}
				obj := "arn:aws:s3:::" + c.Bucket + "/" + c.Prefix + "/"
				for _, need := range [][2]string{
					{"s3:PutObject", obj + "table=T/2026/01/02/part.jsonl.gz"},
					{"s3:GetObject", obj + "table=T/2026/01/02/part.jsonl.gz"},
					{"s3:ListBucket", "arn:aws:s3:::" + c.Bucket},
					{"s3:DeleteObject", obj + "_archiver/preflight"},
				} {
					if !p.allows(need[0], need[1]) {
						t.Errorf("%s: iam-policy.json does not allow %s on %s", u, need[0], need[1])
					}
				}
			}
			if s3urls != 2 {
				t.Errorf("want the archive and the dead-letter sink on S3, found %d S3 URLs in %v", s3urls, tc.urls)
			}
		})
	}
}

// testKMSKey is the KMS key filledPolicy grants.
const testKMSKey = "arn:aws:kms:eu-west-1:123456789012:key/k"

// TestTerraformS3Params: the Terraform's S3 sinks (the archive and the
// dead-letter sink) name the KMS key with SSE-KMS (asked for aws:kms
// alone, S3 encrypts with the AWS managed key aws/s3, whatever the
// bucket's default key is), and the bucket's Region when it is not the
// task's (create_bucket = false, bucket_region).
func TestTerraformS3Params(t *testing.T) {
	main := readFile(t, "terraform/main.tf")
	if got, want := tfLocal(t, main, "s3_params"), `join("&", concat(["sse=${local.sse}"], local.use_kms ? ["kms-key-id=${var.kms_key_arn}"] : [], local.bucket_region != var.region ? ["region=${local.bucket_region}"] : []))`; got != want {
		t.Errorf("local.s3_params = %s, want %s", got, want)
	}
	if got := tfLocal(t, main, "s3_sink"); got != `"s3://${var.bucket_name}/${var.archive_prefix}?${local.s3_params}"` {
		t.Errorf("local.s3_sink = %s", got)
	}
}

// filledPolicy is iam-policy.json with its placeholders filled: vars, and
// aws, eu-west-1, an account, tables T and L and testKMSKey for the rest.
func filledPolicy(t *testing.T, vars map[string]string) policy {
	t.Helper()
	src := readFile(t, "iam-policy.json")
	fill := map[string]string{"partition": "aws", "region": "eu-west-1", "account_id": "123456789012", "source_table": "T", "lease_table": "L", "kms_key_arn": testKMSKey}
	maps.Copy(fill, vars)
	for k, v := range fill {
		src = strings.ReplaceAll(src, "${"+k+"}", v)
	}
	if i := strings.Index(src, "${"); i >= 0 {
		t.Fatalf("iam-policy.json: placeholder left unfilled at %q", src[i:min(len(src), i+30)])
	}
	var p policy
	if err := json.Unmarshal([]byte(src), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// allows reports whether a statement grants action on resource (IAM's *
// and ? wildcards in the resource).
func (p policy) allows(action, resource string) bool {
	for _, st := range p.Statement {
		for _, a := range st.Action {
			if a != action {
				continue
			}
			for _, r := range st.Resource {
				pat := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(r)) + "$"
				if regexp.MustCompile(pat).MatchString(resource) {
					return true
				}
			}
		}
	}
	return false
}

// TestMemorySizing holds the deployment to the one memory rule of
// deploy/README.md ("Memory"): the archiver peaks near 2.5 times
// ARCHIVER_MAX_IN_FLIGHT_BYTES plus 64 MiB, and that must fit under the
// soft memory limit it sets at 85 % of the task's memory. The Terraform's
// default memory with its budget (an eighth), the example task
// definition, and --max-in-flight-bytes' default in 1024 MiB follow it;
// both READMEs state the rule with those figures and no other.
func TestMemorySizing(t *testing.T) {
	fits := func(memoryMiB, budgetMiB float64) bool { return 2.5*budgetMiB+64 <= 0.85*memoryMiB }
	m := regexp.MustCompile(`(?s)variable "memory" \{.*?default\s*=\s*(\d+)`).FindStringSubmatch(readFile(t, "terraform/variables.tf"))
	if m == nil {
		t.Fatal("no default for variable memory")
	}
	memory, _ := strconv.ParseFloat(m[1], 64)
	if !strings.Contains(readFile(t, "terraform/main.tf"), `{ name = "ARCHIVER_MAX_IN_FLIGHT_BYTES", value = "${floor(var.memory / 8)}MiB" }`) {
		t.Fatal("the Terraform's ARCHIVER_MAX_IN_FLIGHT_BYTES is no longer an eighth of var.memory, which this test computes")
	}
	if !fits(memory, float64(int(memory)/8)) {
		t.Errorf("Terraform: %v MiB with a budget of an eighth breaks the rule", memory)
	}
	td := loadTaskDefinition(t, "ecs-task-definition.json")
	tdMemory, _ := strconv.ParseFloat(td.Memory, 64)
	budget, ok := sinks.ParseSize(td.env()["ARCHIVER_MAX_IN_FLIGHT_BYTES"])
	if !ok || !fits(tdMemory, float64(budget>>20)) {
		t.Errorf("ecs-task-definition.json: %v MiB with ARCHIVER_MAX_IN_FLIGHT_BYTES %q breaks the rule", tdMemory, td.env()["ARCHIVER_MAX_IN_FLIGHT_BYTES"])
	}
	if tdMemory != memory {
		t.Errorf("ecs-task-definition.json's memory %v differs from the Terraform's default %v", tdMemory, memory)
	}
	rule := "2.5 times `--max-in-flight-bytes` plus 64 MiB"
	deployREADME := strings.Join(strings.Fields(readFile(t, "README.md")), " ")
	if !strings.Contains(deployREADME, rule) {
		t.Errorf("deploy/README.md does not state the rule %q", rule)
	}
	rootREADME := readFile(t, "../README.md")
	if !regexp.MustCompile("(?m)^\\| `--max-in-flight-bytes` .*deploy/README.md.*2\\.5× plus 64 MiB").MatchString(rootREADME) {
		t.Error("README.md's --max-in-flight-bytes line does not give the rule (2.5× plus 64 MiB) and point to deploy/README.md")
	}
	for _, f := range []string{"README.md", "../README.md", "terraform/main.tf", "terraform/variables.tf"} {
		if regexp.MustCompile(`5× this plus 100 MiB|5x plus 100`).MatchString(readFile(t, f)) {
			t.Errorf("%s still gives the old sizing (5× plus 100 MiB)", f)
		}
	}
}

// TestTerraformSecrets evaluates, with `terraform console` (no provider
// needed), which resources the execution role may read for var.secrets:
// a Secrets Manager secret named with a JSON key and version is granted
// as the secret, an SSM parameter as itself; and the variable's
// validation refuses ARCHIVER_* names and other ARNs.
func TestTerraformSecrets(t *testing.T) {
	main := readFile(t, "terraform/main.tf")
	archiver := tfBlock(main, `resource "aws_ecs_task_definition" "archiver"`)
	if !strings.Contains(archiver, "}, local.container_secrets)])") || tfLocal(t, main, "container_secrets") != `length(var.secrets) > 0 ? { secrets = [for name, arn in var.secrets : { name = name, valueFrom = arn }] } : {}` {
		t.Error("the archiver's container has no secrets block from var.secrets")
	}
	policy := tfBlock(main, `resource "aws_iam_role_policy" "execution_secrets"`)
	if !strings.Contains(policy, "role  = aws_iam_role.execution.id") || !strings.Contains(policy, "local.secret_arns") || !strings.Contains(policy, "local.parameter_arns") {
		t.Errorf("the execution role is not granted the secrets: %q", policy)
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not installed")
	}
	module := tfBlock(readFile(t, "terraform/variables.tf"), `variable "secrets"`) + "\n" +
		"locals {\n  secret_arns = " + tfLocal(t, main, "secret_arns") + "\n  parameter_arns = " + tfLocal(t, main, "parameter_arns") + "\n}\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	const sm = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nats-AbCdEf"
	const ssm = "arn:aws:ssm:eu-west-1:123456789012:parameter/nats/token"
	for _, tc := range []struct {
		secrets string
		want    string // "" when the variable must be refused
	}{
		{`{}`, `[[],[]]`},
		{`{NATS_CREDS = "` + sm + `"}`, `[["` + sm + `"],[]]`},
		{`{NATS_CREDS = "` + sm + `:creds::", NATS_SEED = "` + sm + `:seed:AWSCURRENT:"}`, `[["` + sm + `"],[]]`},
		{`{NATS_TOKEN = "` + ssm + `"}`, `[[],["` + ssm + `"]]`},
		{`{ARCHIVER_SINK = "` + ssm + `"}`, ""},
		{`{NATS_TOKEN = "arn:aws:s3:::bucket/key"}`, ""},
		{`{NATS_TOKEN = "arn:aws:secretsmanager:eu-west-1:123456789012:nats"}`, ""},
		{`{"1X" = "` + ssm + `"}`, ""},
	} {
		cmd := exec.Command(tf, "console", "-var", "secrets="+tc.secrets)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader("jsonencode([local.secret_arns, local.parameter_arns])\n")
		cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+os.DevNull)
		out, err := cmd.Output()
		got, uerr := strconv.Unquote(strings.TrimSpace(string(out)))
		if uerr != nil {
			got = string(out)
		}
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("secrets = %s: accepted (%s), want a validation error", tc.secrets, got)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("secrets = %s: got %q, %v; want %s", tc.secrets, got, err, tc.want)
		}
	}
}
