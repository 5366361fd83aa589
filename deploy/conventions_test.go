package deploy

import (
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// tfVariableDefault returns the default of variable name in
// terraform/variables.tf, unquoted.
func tfVariableDefault(t *testing.T, name string) string {
	t.Helper()
	block := tfBlock(readFile(t, "terraform/variables.tf"), `variable "`+name+`"`)
	m := regexp.MustCompile(`(?m)^\s*default\s*=\s*(.+?)\s*$`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("variable %s has no default", name)
	}
	return strings.Trim(m[1], `"`)
}

// oneLine is s with every run of white space one space, so that a
// sentence wrapped in Markdown is found whole.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestDeployConventions holds every place that shows a deployment to the
// conventions the Terraform sets (deploy/README.md, section 6): the
// metrics the ECS tasks publish are the Terraform's default (emf, for the
// alarms), in the Terraform's archiver and sweeper tasks, the example
// task definitions and archiver.example.yaml, while archiver run's own
// default, which may differ, is said to differ.
func TestDeployConventions(t *testing.T) {
	t.Run("metrics", func(t *testing.T) {
		metrics := tfVariableDefault(t, "metrics")
		if metrics != "emf" {
			t.Errorf("the Terraform's metrics default is %q: the alarms (alarms.tf) need emf", metrics)
		}
		for _, f := range []string{"terraform/main.tf", "terraform/sweep.tf"} {
			if got := tfEnv(readFile(t, f))["ARCHIVER_METRICS"]; got != "var.metrics" {
				t.Errorf("%s: ARCHIVER_METRICS = %s, want var.metrics", f, got)
			}
		}
		for _, f := range []string{"ecs-task-definition.json", "ecs-task-definition-sweep.json"} {
			if got := loadTaskDefinition(t, f).env()["ARCHIVER_METRICS"]; got != metrics {
				t.Errorf("%s: ARCHIVER_METRICS = %q, the Terraform's default %q", f, got, metrics)
			}
		}
		var example struct{ Metrics string }
		if err := yaml.Unmarshal([]byte(readFile(t, "archiver.example.yaml")), &example); err != nil {
			t.Fatal(err)
		}
		if example.Metrics != metrics {
			t.Errorf("archiver.example.yaml: metrics %q, the Terraform's default %q", example.Metrics, metrics)
		}
		deployREADME := oneLine(readFile(t, "README.md"))
		for _, want := range []string{
			"`archiver run` (and `sweep`) on its own defaults to `prometheus`",
			"the Terraform's `metrics` variable defaults to `" + metrics + "`",
		} {
			if !strings.Contains(deployREADME, want) {
				t.Errorf("deploy/README.md does not say %q", want)
			}
		}
		if !strings.Contains(readFile(t, "../cmd/archiver/config.go"), `{name: "metrics", def: "prometheus",`) {
			t.Error("archiver run's --metrics default is no longer prometheus, which deploy/README.md says it is")
		}
	})
}
