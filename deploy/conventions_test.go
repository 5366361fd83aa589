package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
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

// TestTerraformECR holds terraform/ecr.tf to deploy/README.md, section 2:
// with create_ecr_repository (false by default) one repository, named
// like the rest, with immutable tags, scanned on push, whose lifecycle
// policy keeps the last ecr_keep_images tagged images, and its URL as an
// output; the execution role pulls from it with
// AmazonECSTaskExecutionRolePolicy. deploy/terraform/tests plans it.
func TestTerraformECR(t *testing.T) {
	if got := tfVariableDefault(t, "create_ecr_repository"); got != "false" {
		t.Errorf("create_ecr_repository defaults to %s, want false", got)
	}
	ecr := readFile(t, "terraform/ecr.tf")
	if got := tfLocal(t, ecr, "ecr_count"); got != "var.create_ecr_repository ? 1 : 0" {
		t.Errorf("local.ecr_count = %s", got)
	}
	repo := tfBlock(ecr, `resource "aws_ecr_repository" "archiver"`)
	policy := tfBlock(ecr, `resource "aws_ecr_lifecycle_policy" "archiver"`)
	for _, want := range []struct{ block, name, text string }{
		{repo, "repository", "count                = local.ecr_count"},
		{repo, "repository", "name                 = var.name"},
		{repo, "repository", `image_tag_mutability = "IMMUTABLE"`},
		{repo, "repository", "scan_on_push = true"},
		{policy, "lifecycle policy", "count      = local.ecr_count"},
		{policy, "lifecycle policy", `tagStatus      = "tagged"`},
		{policy, "lifecycle policy", `countType      = "imageCountMoreThan"`},
		{policy, "lifecycle policy", "countNumber    = var.ecr_keep_images"},
	} {
		if !strings.Contains(want.block, want.text) {
			t.Errorf("the ECR %s lacks %q", want.name, want.text)
		}
	}
	out := tfBlock(readFile(t, "terraform/outputs.tf"), `output "ecr_repository_url"`)
	if !strings.Contains(out, "var.create_ecr_repository ? aws_ecr_repository.archiver[0].repository_url : null") {
		t.Errorf("no ecr_repository_url output of the repository: %q", out)
	}
	execution := tfBlock(readFile(t, "terraform/main.tf"), `resource "aws_iam_role_policy_attachment" "execution"`)
	if !strings.Contains(execution, "policy/service-role/AmazonECSTaskExecutionRolePolicy") {
		t.Error("the execution role no longer has AmazonECSTaskExecutionRolePolicy, which grants its ECR pulls")
	}
}

// TestTerraformBackendExample: terraform/backend.tf is comments only (a
// backend is the root configuration's choice; examples/ call the module),
// and its commented S3 backend, uncommented, is a terraform block that
// terraform fmt leaves as it is, locking with use_lockfile and naming the
// DynamoDB table of older Terraform versions.
func TestTerraformBackendExample(t *testing.T) {
	src := readFile(t, "terraform/backend.tf")
	var block []string
	in := false
	for line := range strings.Lines(src) {
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
			t.Fatalf("terraform/backend.tf holds a line that is not a comment: %q", line)
		}
		in = in || strings.HasPrefix(line, "# terraform {")
		if in {
			block = append(block, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
		}
	}
	text := strings.Join(block, "")
	for _, want := range []string{`backend "s3" {`, "use_lockfile = true", `# dynamodb_table = "`, "encrypt      = true"} {
		if !strings.Contains(text, want) {
			t.Errorf("the commented backend lacks %q:\n%s", want, text)
		}
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not installed")
	}
	cmd := exec.Command(tf, "fmt", "-")
	cmd.Stdin = strings.NewReader(text)
	cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+os.DevNull)
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("terraform fmt of the uncommented backend: %v\n%s", err, text)
	}
	if string(got) != text {
		t.Errorf("terraform fmt changes the uncommented backend:\n%s\nto\n%s", text, got)
	}
}
