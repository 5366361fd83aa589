package deploy

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// tfModuleCall is one module block of an example that calls the module
// in deploy/terraform.
type tfModuleCall struct {
	file, name string
	args       map[string]string // argument => its expression (first line), as written
}

var (
	tfModuleHeader = regexp.MustCompile(`(?m)^module "([a-z0-9_]+)" \{`)
	tfArgument     = regexp.MustCompile(`^\s*([a-z_]+)\s*=\s*(.*?)\s*$`)
	tfVarDefault   = regexp.MustCompile(`(?m)^\s*default\s*=`)
)

// tfArguments returns the arguments of a block at its top level: name to
// the expression's first line.
func tfArguments(block string) map[string]string {
	out := map[string]string{}
	depth := 0
	for _, line := range strings.Split(block, "\n") {
		if depth == 1 {
			if m := tfArgument.FindStringSubmatch(line); m != nil {
				out[m[1]] = m[2]
			}
		}
		depth += strings.Count(line, "{") - strings.Count(line, "}")
	}
	return out
}

// exampleModuleCalls returns, per example directory under
// terraform/examples, the module blocks whose source is deploy/terraform.
func exampleModuleCalls(t *testing.T) map[string][]tfModuleCall {
	t.Helper()
	module, err := filepath.Abs("terraform")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]tfModuleCall{}
	err = filepath.WalkDir("terraform/examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".tf") {
			return err
		}
		src := readFile(t, path)
		for _, m := range tfModuleHeader.FindAllStringSubmatch(src, -1) {
			c := tfModuleCall{file: path, name: m[1], args: tfArguments(tfBlock(src, m[0]))}
			source, _ := strings.CutPrefix(c.args["source"], `"`)
			source, _ = strings.CutSuffix(source, `"`)
			if abs, _ := filepath.Abs(filepath.Join(filepath.Dir(path), source)); abs != module {
				continue
			}
			out[filepath.Dir(path)] = append(out[filepath.Dir(path)], c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// moduleVariables returns the variables of deploy/terraform, each with
// whether it has a default.
func moduleVariables(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("terraform/*.tf")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, f := range files {
		src := readFile(t, f)
		for _, m := range tfVariableDecl.FindAllStringSubmatch(src, -1) {
			vars[m[1]] = tfVarDefault.MatchString(tfBlock(src, m[0]))
		}
	}
	return vars
}

// TestTerraformExamples holds the examples of terraform/examples to the
// module they call: every argument is a variable of the module, every
// variable without a default is given; no call passes providers, count,
// for_each or depends_on, which a module holding its own provider block
// (main.tf's, configured from region) refuses; instances of one example
// have names of their own (the IAM roles' names are global) and Regions
// of their own. And the global-table examples deploy what README section
// 9 says: one archiver per Region, all but one writing to the bucket the
// first created, in its Region, under one KMS key; or one deployment
// reading every replica.
func TestTerraformExamples(t *testing.T) {
	vars := moduleVariables(t)
	calls := exampleModuleCalls(t)
	var dirs []string
	for d := range calls {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	if !slices.Equal(dirs, []string{"terraform/examples/global-table/all-regions", "terraform/examples/global-table/per-region"}) {
		t.Fatalf("examples calling the module: %v", dirs)
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			names, regions := map[string]bool{}, map[string]bool{}
			for _, c := range calls[dir] {
				for a := range c.args {
					switch {
					case a == "source":
					case a == "providers" || a == "count" || a == "for_each" || a == "depends_on":
						t.Errorf("%s: module %s passes %s, which a module with its own provider block refuses", c.file, c.name, a)
					case !isVariable(vars, a):
						t.Errorf("%s: module %s passes %s, which is no variable of deploy/terraform", c.file, c.name, a)
					}
				}
				for v, hasDefault := range vars {
					if _, ok := c.args[v]; !ok && !hasDefault {
						t.Errorf("%s: module %s does not give %s, which has no default", c.file, c.name, v)
					}
				}
				if len(calls[dir]) > 1 {
					if names[c.args["name"]] || c.args["name"] == "" {
						t.Errorf("%s: module %s: name %q is not its own (IAM role names are global)", c.file, c.name, c.args["name"])
					}
					names[c.args["name"]] = true
				}
				if regions[c.args["region"]] {
					t.Errorf("%s: module %s: region %s twice", c.file, c.name, c.args["region"])
				}
				regions[c.args["region"]] = true
			}
		})
	}

	t.Run("per-region", func(t *testing.T) {
		cs := calls["terraform/examples/global-table/per-region"]
		if len(cs) < 2 {
			t.Fatalf("%d instances, want one per Region", len(cs))
		}
		creators := 0
		for _, c := range cs {
			if c.args["per_region"] != "true" {
				t.Errorf("module %s: per_region = %q, want true", c.name, c.args["per_region"])
			}
			if c.args["regions"] != "" || c.args["expired_when"] != "" || c.args["sweeper_count"] != "" {
				t.Errorf("module %s: a per-Region archiver sets regions, expired_when or sweeper_count", c.name)
			}
			if c.args["kms_key_arn"] != cs[0].args["kms_key_arn"] {
				t.Errorf("module %s: kms_key_arn %s, the others %s: one key, of the bucket's Region", c.name, c.args["kms_key_arn"], cs[0].args["kms_key_arn"])
			}
			if c.args["create_bucket"] == "false" {
				if c.args["bucket_region"] == "" || !strings.HasPrefix(c.args["bucket_name"], "module.") {
					t.Errorf("module %s: create_bucket = false without bucket_region, or with a bucket_name (%s) that is not the creating instance's output", c.name, c.args["bucket_name"])
				}
				continue
			}
			creators++
		}
		if creators != 1 {
			t.Errorf("%d instances create the bucket, want one", creators)
		}
	})
	t.Run("all-regions", func(t *testing.T) {
		cs := calls["terraform/examples/global-table/all-regions"]
		if len(cs) != 1 {
			t.Fatalf("%d instances, want one", len(cs))
		}
		if c := cs[0]; c.args["regions"] != `["all"]` || c.args["replica_regions"] == "" || c.args["per_region"] != "" {
			t.Errorf("module %s: regions = %s, replica_regions = %s, per_region = %s; want [\"all\"], the replicas' Regions, unset", c.name, c.args["regions"], c.args["replica_regions"], c.args["per_region"])
		}
	})
}

// isVariable reports whether name is a variable of vars.
func isVariable(vars map[string]bool, name string) bool {
	_, ok := vars[name]
	return ok
}

// TestTerraformExamplesValidate runs terraform validate on each example
// (without configuring a provider: nothing reaches AWS).
func TestTerraformExamplesValidate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform init and validate")
	}
	tf, plugins := terraformCLI(t)
	root := copyDeploy(t)
	dirs, err := filepath.Glob(filepath.Join(root, "terraform", "examples", "*", "*", "main.tf"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, main := range dirs {
		dir := filepath.Dir(main)
		rel, _ := filepath.Rel(root, dir)
		t.Run(rel, func(t *testing.T) {
			if out, err := terraformCmd(t, tf, dir, "init", "-backend=false", "-input=false", "-no-color", "-plugin-dir="+plugins); err != nil {
				t.Fatalf("terraform init: %v\n%s", err, out)
			}
			if out, err := terraformCmd(t, tf, dir, "validate", "-no-color"); err != nil {
				t.Errorf("terraform validate: %v\n%s", err, out)
			}
		})
	}
}
