package housetest

import (
	"os/exec"
	"strings"
	"testing"
)

// goListDeps lists the packages pkg's build links (go list -deps: pkg
// itself and everything it imports, the standard library included, no
// test files).
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, msg)
	}
	return strings.Fields(string(out))
}

// slimEngineForbidden are the libraries cmd/archiver-engine must not
// link: their inits are what makes `archiver engine` idle at 25 MiB.
var slimEngineForbidden = []string{
	"github.com/aws/", // aws-sdk-go-v2 and smithy-go
	"github.com/nats-io/",
	"github.com/prometheus/",
	"google.golang.org/protobuf/",
	"github.com/golang/protobuf/",
	"github.com/parquet-go/",
}

// slimEngineOurs are the packages of this module cmd/archiver-engine may
// link (a path ending in / allows the packages under it).
var slimEngineOurs = []string{"cmd/archiver-engine", "cmd/internal/enginecmd", "cmd/internal/cli", "engine", "engine/internal/",
	"internal/logging", "internal/suggest"}

// TestSlimEngineLinksNoArchiver: cmd/archiver-engine, the engine as a
// binary of its own, links neither the AWS SDK, NATS, Prometheus,
// protobuf nor Parquet, and of this module only the engine and its
// command line (docs/DESIGN.md, "The engine", Memory: the binary exists
// to idle in half the memory of `archiver engine`).
func TestSlimEngineLinksNoArchiver(t *testing.T) {
	deps := goListDeps(t, "./cmd/archiver-engine")
	engine := false
	for _, p := range deps {
		engine = engine || p == module+"/engine"
		for _, no := range slimEngineForbidden {
			if strings.HasPrefix(p+"/", no) {
				t.Errorf("cmd/archiver-engine links %s: the slim engine must not link %s (whose inits cost its idle memory); find the import with go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/archiver-engine", p, strings.TrimSuffix(no, "/"))
			}
		}
		if rel, ok := strings.CutPrefix(p, module+"/"); ok && !ours(rel) {
			t.Errorf("cmd/archiver-engine links %s: of this module it links only %v", p, slimEngineOurs)
		}
	}
	if !engine {
		t.Fatalf("go list -deps ./cmd/archiver-engine does not list the engine; the check is broken:\n%v", deps)
	}
}

// ours reports whether rel (a package path relative to the module) is
// among slimEngineOurs.
func ours(rel string) bool {
	for _, a := range slimEngineOurs {
		if rel == a || strings.HasSuffix(a, "/") && strings.HasPrefix(rel, a) {
			return true
		}
	}
	return false
}
