package deploy

import (
	"encoding/json"
	"path/filepath"
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

// exampleImageTag is the tag every example image has: a release's version,
// as make image stamps it (git describe on a commit tagged v1.0.0).
const exampleImageTag = "v1.0.0"

// imageRef is a reference to the archiver's image and its tag (a full
// stop after it ends a sentence).
var imageRef = regexp.MustCompile(`ttl-archiver:([A-Za-z0-9_${}-](?:[A-Za-z0-9_.${}-]*[A-Za-z0-9_${}-])?)`)

// TestDeployConventions holds every place that shows a deployment to the
// conventions the Terraform sets. The metrics the ECS tasks publish are
// the Terraform's default (emf, for the alarms), in the Terraform's
// archiver and sweeper tasks, the example task definitions and
// archiver.example.yaml, while archiver run's own default, which may
// differ, is said to differ (deploy/README.md, section 6). The image's
// tag is its version (deploy/README.md, section 2): make image names the
// archive ttl-archiver:VERSION with the version it stamps, the push
// commands tag what they push with that same git describe, and every
// example image, in both READMEs, the task definitions and the
// Terraform, is ttl-archiver:v1.0.0; none is latest.
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
	t.Run("image tag", func(t *testing.T) {
		makefile := readFile(t, "../Makefile")
		recipe := regexp.MustCompile(`(?ms)^image:\n(.*?)\n\n`).FindStringSubmatch(makefile + "\n\n")
		if recipe == nil {
			t.Fatal("the Makefile has no image target")
		}
		for _, want := range []string{`v="$$(git describe --always --dirty`, `-version "$$v" -name "ttl-archiver:$$v"`} {
			if !strings.Contains(recipe[1], want) {
				t.Errorf("make image does not tag the image with the version it stamps: no %q in\n%s", want, recipe[1])
			}
		}
		deployREADME := readFile(t, "README.md")
		if !strings.Contains(deployREADME, "    TAG=$(git describe --always --dirty)\n") {
			t.Error("deploy/README.md's push does not set TAG as make image does: TAG=$(git describe --always --dirty)")
		}
		files := []string{"../README.md", "README.md", "../Makefile", "ecs-task-definition.json", "ecs-task-definition-sweep.json", "terraform/tests/module.tftest.hcl"}
		for _, pattern := range []string{"terraform/*.tf", "terraform/examples/*/*/*.tf"} {
			m, err := filepath.Glob(pattern)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, m...)
		}
		// What may follow ttl-archiver: the example release, the push's
		// shell variable, the Makefile's, and the placeholders of prose.
		allowed := map[string]bool{exampleImageTag: true, "$TAG": true, "$$v": true, "TAG": true, "VERSION": true}
		examples := map[string]int{}
		for _, f := range files {
			for _, m := range imageRef.FindAllStringSubmatch(readFile(t, f), -1) {
				if !allowed[m[1]] {
					t.Errorf("%s names the image %s: tag it with its version (%s in examples, $TAG in commands)", f, m[0], exampleImageTag)
				}
				if m[1] == exampleImageTag {
					examples[f]++
				}
			}
		}
		for _, f := range []string{"../README.md", "README.md", "ecs-task-definition.json", "ecs-task-definition-sweep.json", "terraform/variables.tf", "terraform/tests/module.tftest.hcl"} {
			if examples[f] == 0 {
				t.Errorf("%s does not show the example image ttl-archiver:%s", f, exampleImageTag)
			}
		}
		for _, f := range []string{"ecs-task-definition.json", "ecs-task-definition-sweep.json"} {
			var td struct{ ContainerDefinitions []struct{ Image string } }
			if err := json.Unmarshal([]byte(readFile(t, f)), &td); err != nil || len(td.ContainerDefinitions) != 1 {
				t.Fatalf("%s: %v", f, err)
			}
			if img := td.ContainerDefinitions[0].Image; !strings.HasSuffix(img, "/ttl-archiver:"+exampleImageTag) {
				t.Errorf("%s: image %s, want REGISTRY/ttl-archiver:%s", f, img, exampleImageTag)
			}
		}
	})
}
