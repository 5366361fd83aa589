package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tfBlock returns the block of src that starts with header (up to its
// matching brace), or "" when there is none. Braces are counted without
// regard to strings: the deploy Terraform's strings hold balanced ones
// only ("${...}").
func tfBlock(src, header string) string {
	i := strings.Index(src, header)
	if i < 0 {
		return ""
	}
	depth := 0
	for j := i; j < len(src); j++ {
		switch src[j] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return src[i : j+1]
			}
		}
	}
	return ""
}

var tfEnvEntry = regexp.MustCompile(`\{\s*name\s*=\s*"(ARCHIVER_[A-Z0-9_]+)"\s*,\s*value\s*=\s*(.+?)\s*\}`)

// tfEnv returns a container's environment in a Terraform block: each
// ARCHIVER_* variable and its value expression as written.
func tfEnv(block string) map[string]string {
	out := map[string]string{}
	for _, m := range tfEnvEntry.FindAllStringSubmatch(block, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tfLocal returns the expression of local name, as written.
func tfLocal(t *testing.T, src, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + name + `\s*=\s*(.+)$`).FindStringSubmatch(tfBlock(src, "locals {"))
	if m == nil {
		t.Fatalf("no local %s", name)
	}
	return m[1]
}

// TestTerraformExpiredWhen: whenever the Terraform deploys the sweeper
// (sweeper_count > 0), the archiver's task runs with
// ARCHIVER_EXPIRED_WHEN=past-ttl, and a plan that sets service beside the
// sweeper is refused: the sweeper's deletes carry no TTL identity, and
// under service every one of them would be archived as deleted, leaving
// an expired-only archive empty. Each task sets only variables its
// command reads.
func TestTerraformExpiredWhen(t *testing.T) {
	main := readFile(t, "terraform/main.tf")
	sweep := readFile(t, "terraform/sweep.tf")
	archiver := tfBlock(main, `resource "aws_ecs_task_definition" "archiver"`)
	sweeper := tfBlock(sweep, `resource "aws_ecs_task_definition" "sweeper"`)
	if archiver == "" || sweeper == "" {
		t.Fatal("the archiver's or the sweeper's task definition is missing")
	}
	if got := tfEnv(archiver)["ARCHIVER_EXPIRED_WHEN"]; got != "local.expired_when" {
		t.Errorf("the archiver's ARCHIVER_EXPIRED_WHEN is %q, want local.expired_when", got)
	}
	// The sweeper runs exactly when sweeper_count > 0 ...
	if got := tfLocal(t, sweep, "sweeper"); got != "var.sweeper_count > 0 ? 1 : 0" || !regexp.MustCompile(`\bcount\s*=\s*local\.sweeper\b`).MatchString(sweeper) {
		t.Errorf("the sweeper's count no longer follows var.sweeper_count > 0 (local.sweeper = %q): check that the archiver's expired_when still follows it", got)
	}
	// ... and then the archiver's default is past-ttl, and service refused.
	if got := tfLocal(t, main, "expired_when"); !strings.Contains(got, `var.sweeper_count > 0 ? "past-ttl"`) {
		t.Errorf("local.expired_when = %q does not make past-ttl the default with the sweeper", got)
	}
	if _, ok := tfPreconditions(t, archiver)[`!(var.sweeper_count > 0 && local.expired_when == "service")`]; !ok {
		t.Error("the archiver's task definition does not refuse service beside the sweeper")
	}
	for _, tc := range []struct {
		name, block, file, options string
	}{
		{"archiver", archiver, "cmd/archiver/config.go", "runOptions"},
		{"sweeper", sweeper, "cmd/archiver/sweep_config.go", "sweepOptions"},
	} {
		known := envNames(t, "..", tc.file, tc.options)
		for name := range tfEnv(tc.block) {
			if !known[name] {
				t.Errorf("the %s's task sets %s, which is no setting of its command", tc.name, name)
			}
		}
	}
}

// TestTerraformExpiredWhenEvaluates evaluates local.expired_when with
// `terraform console` (no provider needed) for each combination of
// sweeper_count and expired_when, and the variable's validation.
func TestTerraformExpiredWhenEvaluates(t *testing.T) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not installed; TestTerraformExpiredWhen checks the text")
	}
	main := readFile(t, "terraform/main.tf")
	vars := readFile(t, "terraform/variables.tf")
	module := tfBlock(vars, `variable "expired_when"`) + "\n" +
		tfBlock(readFile(t, "terraform/sweep.tf"), `variable "sweeper_count"`) + "\n" +
		"locals {\n  expired_when = " + tfLocal(t, main, "expired_when") + "\n}\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		vars []string
		want string // "" when the plan must be refused
	}{
		{nil, "service"},
		{[]string{"sweeper_count=2"}, "past-ttl"},
		{[]string{"expired_when=past-ttl"}, "past-ttl"},
		{[]string{"sweeper_count=2", "expired_when=service"}, "service"}, // the precondition refuses it
		{[]string{"expired_when=always"}, ""},
	} {
		args := []string{"console"}
		for _, v := range tc.vars {
			args = append(args, "-var", v)
		}
		cmd := exec.Command(tf, args...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader("local.expired_when\n")
		cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+os.DevNull)
		out, err := cmd.Output()
		got := strings.Trim(strings.TrimSpace(string(out)), `"`)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%v: accepted (%q), want a validation error", tc.vars, got)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%v: local.expired_when = %q, %v; want %q", tc.vars, got, err, tc.want)
		}
	}
}

// TestArchiverTaskDefinition: the archiver's example task definition sets
// only variables `archiver run` reads, and says which REMOVEs are
// expiries (ARCHIVER_EXPIRED_WHEN), the line a sweeper's deployment
// changes to past-ttl (README section 8).
func TestArchiverTaskDefinition(t *testing.T) {
	var td struct {
		ContainerDefinitions []struct {
			Command     []string
			Environment []struct{ Name, Value string }
		}
	}
	if err := json.Unmarshal([]byte(readFile(t, "ecs-task-definition.json")), &td); err != nil {
		t.Fatalf("ecs-task-definition.json: %v", err)
	}
	if len(td.ContainerDefinitions) != 1 || strings.Join(td.ContainerDefinitions[0].Command, " ") != "run" {
		t.Fatalf("want one container running archiver run: %+v", td.ContainerDefinitions)
	}
	known := envNames(t, "..", "cmd/archiver/config.go", "runOptions")
	env := map[string]string{}
	for _, e := range td.ContainerDefinitions[0].Environment {
		if !known[e.Name] {
			t.Errorf("variable %s is no setting of archiver run", e.Name)
		}
		env[e.Name] = e.Value
	}
	if w := env["ARCHIVER_EXPIRED_WHEN"]; w != "service" && w != "past-ttl" {
		t.Errorf("ARCHIVER_EXPIRED_WHEN = %q, want service or past-ttl", w)
	}
}
