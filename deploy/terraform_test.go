package deploy

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// terraformCLI returns the terraform binary and a directory of providers
// (the layout of `terraform init -plugin-dir`, holding hashicorp/aws), or
// skips: the deploy tests run without them, and the checks that need a
// real Terraform say so by skipping. The directory is
// $TF_TEST_PLUGIN_DIR, else the first of the usual local mirrors that
// holds the AWS provider; nothing is downloaded.
func terraformCLI(t *testing.T) (tf, plugins string) {
	t.Helper()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not installed")
	}
	dirs := []string{os.Getenv("TF_TEST_PLUGIN_DIR"), "/opt/tf-plugins", "/usr/local/share/terraform/plugins", "/usr/share/terraform/plugins"}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".terraform.d", "plugins"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if m, _ := filepath.Glob(filepath.Join(d, "registry.terraform.io", "hashicorp", "aws", "*", "*")); len(m) > 0 {
			return tf, d
		}
	}
	t.Skip("no local copy of the hashicorp/aws provider (set TF_TEST_PLUGIN_DIR to a directory laid out for terraform init -plugin-dir)")
	return "", ""
}

// terraformCmd runs terraform in dir, offline: no CLI configuration, no
// update check, no prompt. It returns the combined output.
func terraformCmd(t *testing.T, tf, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(tf, args...)
	cmd.Dir = dir
	// No provider here may look for credentials: the module's tests mock
	// it, validate never configures it; and were one configured, it must
	// not ask the instance metadata service.
	cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+os.DevNull, "AWS_EC2_METADATA_DISABLED=true")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// copyDeploy copies what the Terraform reads of deploy/ (terraform/, the
// policies, athena/) into a new directory, so that init writes nothing
// into the work tree, and returns the copy of deploy/.
func copyDeploy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "deploy")
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		top := strings.Split(filepath.ToSlash(path), "/")[0]
		keep := path == "." || top == "terraform" || top == "athena" || strings.HasPrefix(top, "iam-policy")
		switch {
		case !keep && d.IsDir():
			return filepath.SkipDir
		case !keep, d.Name() == ".terraform", strings.HasPrefix(d.Name(), "terraform.tfstate"), d.Name() == ".terraform.lock.hcl":
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, path), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, path), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestTerraformFormat: every .tf and .tftest.hcl file of deploy/terraform,
// the examples included, is as `terraform fmt` writes it.
func TestTerraformFormat(t *testing.T) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not installed")
	}
	if out, err := terraformCmd(t, tf, "terraform", "fmt", "-check", "-recursive", "-diff"); err != nil {
		t.Errorf("terraform fmt -check -recursive deploy/terraform: %v\n%s", err, out)
	}
}

// TestTerraformModuleTests runs deploy/terraform/tests/*.tftest.hcl with
// `terraform test`: plans of the module against a mock AWS provider
// (nothing reaches AWS), asserting what the task runs with, the task
// role's policy, and the plans the module refuses.
func TestTerraformModuleTests(t *testing.T) {
	if testing.Short() {
		t.Skip("plans the module with terraform test")
	}
	tf, plugins := terraformCLI(t)
	dir := filepath.Join(copyDeploy(t), "terraform")
	if out, err := terraformCmd(t, tf, dir, "init", "-backend=false", "-input=false", "-no-color", "-plugin-dir="+plugins); err != nil {
		t.Fatalf("terraform init: %v\n%s", err, out)
	}
	out, err := terraformCmd(t, tf, dir, "test", "-no-color")
	if err != nil {
		t.Fatalf("terraform test: %v\n%s", err, out)
	}
	t.Logf("terraform test:\n%s", out)
}

// tfPreconditions returns the precondition blocks of a Terraform block:
// each condition's expression, as written, to its error message.
func tfPreconditions(t *testing.T, block string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rest := block; ; {
		i := strings.Index(rest, "precondition {")
		if i < 0 {
			return out
		}
		pre := tfBlock(rest[i:], "precondition {")
		rest = rest[i+len(pre):]
		cond := regexp.MustCompile(`(?m)^\s*condition\s*=\s*(.+)$`).FindStringSubmatch(pre)
		msg := regexp.MustCompile(`(?m)^\s*error_message\s*=\s*"(.+)"$`).FindStringSubmatch(pre)
		if cond == nil || msg == nil {
			t.Fatalf("precondition without a one-line condition and error_message: %s", pre)
		}
		out[cond[1]] = msg[1]
	}
}

// TestTerraformPreconditions: the archiver's task definition refuses the
// plans the archiver itself would refuse at start-up, or that would
// archive nothing where it should, each with a message that says why.
// The condition is held as written; deploy/terraform/tests evaluates them
// where terraform is at hand.
func TestTerraformPreconditions(t *testing.T) {
	archiver := tfBlock(readFile(t, "terraform/main.tf"), `resource "aws_ecs_task_definition" "archiver"`)
	got := tfPreconditions(t, archiver)
	for _, want := range []struct{ condition, says string }{
		{`!(var.sweeper_count > 0 && local.expired_when == "service")`, "sweeper"},
		{`!local.use_dead_letter || !(startswith(var.dead_letter_prefix, var.archive_prefix) || startswith(var.archive_prefix, var.dead_letter_prefix))`, "overlap"},
		{`!var.create_bucket || local.bucket_region == var.region`, "create_bucket = false"},
		{`!local.use_kms || try(split(":", var.kms_key_arn)[3], "") == local.bucket_region`, "bucket's Region"},
		{`!(local.expired_when == "past-ttl" && (length(var.regions) > 1 || contains(var.regions, "all")))`, "in one Region"},
		{`!(local.expired_when == "past-ttl" && var.per_region)`, "in one Region, without per_region"},
		{`!(length(var.regions) > 0 && var.per_region)`, "Give one of them"},
		{`!contains(var.regions, "all") || length(var.replica_regions) > 0`, "List them in replica_regions"},
		{`length(var.replica_regions) == 0 || contains(var.regions, "all")`, "that list is what the role may read"},
		{`var.source_table != "" || local.tagged`, "source_table, tables_tagged, or both"},
		{`!(local.tagged && (length(var.regions) > 0 || var.per_region))`, "region alone"},
	} {
		msg, ok := got[want.condition]
		switch {
		case !ok:
			t.Errorf("no precondition %s", want.condition)
		case !strings.Contains(msg, want.says):
			t.Errorf("precondition %s: its message %q does not say %q", want.condition, msg, want.says)
		}
		delete(got, want.condition)
	}
	for c := range got {
		t.Errorf("precondition %s: not held by this test; add it", c)
	}
}

// TestReferenceListsTerraformSettings: every ARCHIVER_* variable the
// Terraform can set on the archiver's task has its row in README.md's
// reference table of `archiver run` settings.
func TestReferenceListsTerraformSettings(t *testing.T) {
	readme := readFile(t, "README.md")
	_, ref, ok := strings.Cut(readme, "## Reference: `archiver run` settings")
	if !ok {
		t.Fatal("README.md has no section \"Reference: `archiver run` settings\"")
	}
	ref, _, _ = strings.Cut(ref, "\n## ")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--[a-z-]+` \\| `(ARCHIVER_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(ref, -1) {
		rows[m[1]] = true
	}
	env := tfEnv(readFile(t, "terraform/main.tf"))
	if len(env) < 10 {
		t.Fatalf("found only %v in terraform/main.tf", env)
	}
	for name := range env {
		if !rows[name] {
			t.Errorf("terraform/main.tf sets %s, which README.md's reference of archiver run settings has no row for", name)
		}
	}
}
