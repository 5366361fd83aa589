package deploy

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// sweepPackages hold every function `archiver sweep` can run that talks
// to AWS; the scan follows calls from sweepCmd through them.
var sweepPackages = []string{"cmd/archiver", "sweep", "sweep/state", "checkpoint", "lease", "internal/leasetable",
	"internal/ops", "internal/backoff", "internal/promreg"}

// fn is one function or method of the scanned code.
type fn struct {
	file string // relative to the module root
	obj  *types.Func
	decl *ast.FuncDecl
	info *types.Info
}

// String is the function's name, with its receiver's type name.
func (f *fn) String() string {
	if r := f.obj.Type().(*types.Signature).Recv(); r != nil {
		t := r.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			return n.Obj().Name() + "." + f.obj.Name()
		}
	}
	return f.obj.Name()
}

// listPackage is what `go list -json` says of a package.
type listPackage struct {
	ImportPath, Dir, Export string
	GoFiles                 []string
}

// typeCheck type-checks the packages dirs (module-relative folders) from
// source (their imports from the build cache's export data, as `go list
// -export` gives them) and returns their functions by full name
// (types.Func.FullName).
func typeCheck(t *testing.T, root string, dirs []string) map[string]*fn {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", "./cmd/archiver")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	pkgs := map[string]listPackage{}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p listPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(pkgs[path].Export) })
	funcs := map[string]*fn{}
	for _, dir := range dirs {
		p, ok := pkgs["github.com/ttl-archiver/archiver/"+dir]
		if !ok {
			t.Fatalf("go list does not show %s among cmd/archiver's packages", dir)
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{},
			Types: map[ast.Expr]types.TypeAndValue{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", dir, err)
		}
		for i, f := range files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					obj := info.Defs[fd.Name].(*types.Func)
					funcs[obj.FullName()] = &fn{file: dir + "/" + p.GoFiles[i], obj: obj, decl: fd, info: info}
				}
			}
		}
	}
	return funcs
}

// reachable returns the functions reachable from root: every function or
// method a reached body names (calls, and values such as a func passed in
// a struct) is reached. A call of an interface method reaches that method
// of every type the reached code makes (a composite literal or new), as
// rapid type analysis does, unless it is named like an AWS operation:
// those calls are where the scan stops. An over-approximation, never an
// under-approximation within the scanned packages.
func reachable(funcs map[string]*fn, leaves map[string]bool, root string) map[*fn]bool {
	seen := map[*fn]bool{}
	var queue []*fn
	add := func(f *fn) {
		if f != nil && !seen[f] {
			seen[f] = true
			queue = append(queue, f)
		}
	}
	made := map[*types.Named]bool{} // types the reached code makes
	called := map[string]bool{}     // interface methods the reached code calls
	dispatch := func(t *types.Named, name string) {
		if m := methodOf(t, name); m != nil {
			add(funcs[m.FullName()])
		}
	}
	var makeType func(t *types.Named)
	makeType = func(t *types.Named) {
		if t == nil || made[t] {
			return
		}
		made[t] = true
		for name := range called {
			dispatch(t, name)
		}
		// A struct makes the values of its fields too.
		if st, ok := t.Underlying().(*types.Struct); ok {
			for i := 0; i < st.NumFields(); i++ {
				makeType(named(st.Field(i).Type()))
			}
		}
	}
	add(funcs[root])
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		ast.Inspect(f.decl.Body, func(n ast.Node) bool {
			makeType(madeType(f.info, n))
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj, ok := f.info.Uses[id].(*types.Func)
			if !ok {
				return true
			}
			obj = obj.Origin()
			recv := obj.Type().(*types.Signature).Recv()
			switch {
			case recv != nil && types.IsInterface(recv.Type()):
				if name := obj.Name(); !leaves[name] && !called[name] {
					called[name] = true
					for t := range made {
						dispatch(t, name)
					}
				}
			default:
				add(funcs[obj.FullName()])
			}
			return true
		})
	}
	return seen
}

// madeType is the named type n makes, if n is a composite literal, a
// call of new or a variable declared with its type.
func madeType(info *types.Info, n ast.Node) *types.Named {
	switch x := n.(type) {
	case *ast.CompositeLit:
		return named(info.Types[x].Type)
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 {
			return named(info.Types[x.Args[0]].Type)
		}
	case *ast.ValueSpec:
		if x.Type != nil {
			return named(info.Types[x.Type].Type)
		}
	}
	return nil
}

// named is t's named type (through one pointer), its generic origin.
func named(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if nt, ok := t.(*types.Named); ok {
		return nt.Origin()
	}
	return nil
}

// methodOf returns the method name of t or *t, its generic origin for a
// generic type.
func methodOf(t *types.Named, name string) *types.Func {
	ms := types.NewMethodSet(types.NewPointer(t))
	for i := 0; i < ms.Len(); i++ {
		if m := ms.At(i).Obj().(*types.Func); m.Name() == name {
			return m.Origin()
		}
	}
	return nil
}

// methodCalls calls visit with each method call (x.Name(ctx, in, ...))
// in the bodies of the reached functions.
func methodCalls(reach map[*fn]bool, visit func(f *fn, name string)) {
	for f := range reach {
		ast.Inspect(f.decl.Body, func(n ast.Node) bool {
			if ce, ok := n.(*ast.CallExpr); ok && len(ce.Args) >= 2 {
				if sel, ok := ce.Fun.(*ast.SelectorExpr); ok {
					visit(f, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// firstSite records f as where action is called, keeping the least
// site, so that a report names the same one every run.
func firstSite(sites map[string]string, action string, f *fn) {
	where := f.file + " (" + f.String() + ")"
	if old, ok := sites[action]; !ok || where < old {
		sites[action] = where
	}
}

// leaseTablePackages are the packages whose every DynamoDB call is on the
// lease table (--checkpoint dynamodb://).
var leaseTablePackages = []string{"checkpoint/", "lease/", "internal/leasetable/", "sweep/state/"}

// onLeaseTable reports whether f's DynamoDB calls reach the lease table:
// f is in one of leaseTablePackages, or is openCheckpoint.
func onLeaseTable(f *fn) bool {
	for _, dir := range leaseTablePackages {
		if strings.HasPrefix(f.file, dir) {
			return true
		}
	}
	return f.decl.Name.Name == "openCheckpoint"
}

// sweepResource says which table a call of `archiver sweep` reaches: the
// lease table's packages and openCheckpoint use the lease table,
// everything else the swept table (its Query the window index).
func sweepResource(f *fn, op string) string {
	switch {
	case onLeaseTable(f):
		return "lease"
	case op == "Query":
		return "index"
	}
	return "table"
}

// sweepCodeActions returns the DynamoDB actions `archiver sweep` can call,
// per resource, each with one call site.
func sweepCodeActions(t *testing.T, root string) (map[string]map[string]string, map[*fn]bool) {
	_, out, reach := sweepScan(t, root)
	return out, reach
}

// sweepScan is sweepCodeActions with every function it type-checked.
func sweepScan(t *testing.T, root string) (map[string]*fn, map[string]map[string]string, map[*fn]bool) {
	ops := sdkOperations(&dynamodb.Client{})
	funcs := typeCheck(t, root, sweepPackages)
	reach := reachable(funcs, ops, "github.com/ttl-archiver/archiver/cmd/archiver.sweepCmd")
	out := map[string]map[string]string{}
	methodCalls(reach, func(f *fn, op string) {
		if !ops[op] {
			return
		}
		res := sweepResource(f, op)
		if out[res] == nil {
			out[res] = map[string]string{}
		}
		firstSite(out[res], "dynamodb:"+op, f)
	})
	return funcs, out, reach
}

// policyResource names the resource kind of a sweep policy resource.
func policyResource(r string) string {
	switch {
	case strings.HasSuffix(r, ":table/${source_table}/index/${sweep_index}"):
		return "index"
	case strings.HasSuffix(r, ":table/${source_table}"):
		return "table"
	case strings.HasSuffix(r, ":table/${lease_table}"):
		return "lease"
	}
	return ""
}

// TestSweepPolicyMatchesCode fails when iam-policy-sweep.json, the role of
// `archiver sweep`, misses an action its code can call on a resource, or
// grants one it never calls there: the code is followed from sweepCmd
// through the packages it uses, and each call is placed on the swept
// table, its window index or the lease table.
func TestSweepPolicyMatchesCode(t *testing.T) {
	want, reach := sweepCodeActions(t, "..")
	granted := map[string]map[string]string{}
	for _, st := range loadPolicyFile(t, "iam-policy-sweep.json").Statement {
		for _, r := range st.Resource {
			kind := policyResource(r)
			if kind == "" {
				t.Errorf("statement %s: resource %q is not the swept table, its index or the lease table", st.Sid, r)
				continue
			}
			if granted[kind] == nil {
				granted[kind] = map[string]string{}
			}
			for _, a := range st.Action {
				granted[kind][a] = st.Sid
			}
		}
	}
	var missing, extra, called []string
	for kind, acts := range want {
		for a, where := range acts {
			called = append(called, kind+": "+a+" <- "+where)
			if _, ok := granted[kind][a]; !ok {
				missing = append(missing, a+" on the "+kind+" (called in "+where+")")
			}
		}
	}
	for kind, acts := range granted {
		for a, sid := range acts {
			if _, ok := want[kind][a]; !ok {
				extra = append(extra, a+" on the "+kind+" (statement "+sid+")")
			}
		}
	}
	reportPolicyDiff(t, "iam-policy-sweep.json", "archiver sweep", missing, extra)
	sort.Strings(called)
	t.Logf("actions called (%d functions reachable):\n  %s", len(reach), strings.Join(called, "\n  "))
}

// mustName fails unless every name is a function the scan type-checked:
// a guard naming a function that was renamed or moved would pass for
// ever without checking anything.
func mustName(t *testing.T, funcs map[string]*fn, names ...string) {
	t.Helper()
	have := make(map[string]bool, len(funcs))
	for _, f := range funcs {
		have[f.String()] = true
	}
	for _, n := range names {
		if !have[n] {
			t.Errorf("%s: no such function in the scanned code (renamed or moved? update the guard)", n)
		}
	}
}

// TestSweepReachability guards the scan: what `archiver sweep` runs is
// reached, the consumer's lease balancing and pruning are not.
func TestSweepReachability(t *testing.T) {
	funcs, _, reach := sweepScan(t, "..")
	names := map[string]bool{}
	for f := range reach {
		names[f.String()] = true
	}
	mustName(t, funcs, "runSweep", "openCheckpoint", "Table.ensure", "Dynamo.AcquireSweep", "Dynamo.SaveSweepCursor",
		"leases.renew", "leases.release", "CheckpointStore.SaveCursor", "Sweeper.Run", "pass.delete", "Sweeper.describe",
		"leases.assign", "leases.prune", "Store.ReleaseAll", "runPipeline", "describeRegions")
	for _, n := range []string{"runSweep", "openCheckpoint", "Table.ensure", "Dynamo.AcquireSweep", "Dynamo.SaveSweepCursor",
		"leases.renew", "leases.release", "CheckpointStore.SaveCursor", "Sweeper.Run", "pass.delete", "Sweeper.describe"} {
		if !names[n] {
			t.Errorf("%s not reached from sweepCmd", n)
		}
	}
	for _, n := range []string{"leases.assign", "leases.prune", "Store.ReleaseAll", "runPipeline", "describeRegions"} {
		if names[n] {
			t.Errorf("%s reached from sweepCmd; the scan over-reaches", n)
		}
	}
}

// TestSweepTaskDefinition: the sweeper's task definition runs `archiver
// sweep` and sets only variables it reads.
func TestSweepTaskDefinition(t *testing.T) {
	var td struct {
		ContainerDefinitions []struct {
			Command     []string
			Environment []struct{ Name, Value string }
			HealthCheck struct{ Command []string }
			StopTimeout int
		}
	}
	b, err := os.ReadFile("ecs-task-definition-sweep.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &td); err != nil {
		t.Fatalf("ecs-task-definition-sweep.json: %v", err)
	}
	known := envNames(t, "..", "cmd/archiver/sweep_config.go", "sweepOptions")
	if len(td.ContainerDefinitions) != 1 {
		t.Fatalf("%d containers, want 1", len(td.ContainerDefinitions))
	}
	c := td.ContainerDefinitions[0]
	if strings.Join(c.Command, " ") != "sweep" || !strings.Contains(strings.Join(c.HealthCheck.Command, " "), "health") {
		t.Errorf("command %v, health check %v; want sweep and archiver health", c.Command, c.HealthCheck.Command)
	}
	for _, e := range c.Environment {
		if !known[e.Name] {
			t.Errorf("variable %s is no setting of archiver sweep", e.Name)
		}
	}
	if c.StopTimeout == 0 {
		t.Error("no stopTimeout: ECS's 30 s default must exceed --shutdown-timeout, say so")
	}
}

// envNames reads the ARCHIVER_* variables of a command from its options,
// the variable options in file: its own options (name: "...") and those it
// takes from run (fromRun("...", ...)); `archiver sweep`'s are
// sweepOptions in cmd/archiver/sweep_config.go, `archiver run`'s
// runOptions in cmd/archiver/config.go.
func envNames(t *testing.T, root, file, options string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, file), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != options || len(vs.Values) != 1 {
			return true
		}
		for _, el := range vs.Values[0].(*ast.CompositeLit).Elts {
			ast.Inspect(el, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.KeyValueExpr:
					if k, ok := x.Key.(*ast.Ident); ok && k.Name == "name" {
						names[envName(x.Value)] = true
					}
				case *ast.CallExpr:
					if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "fromRun" && len(x.Args) > 0 {
						names[envName(x.Args[0])] = true
					}
				}
				return true
			})
		}
		return false
	})
	if len(names) < 10 {
		t.Fatalf("found only %v in %s", names, options)
	}
	return names
}

func envName(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok {
		return ""
	}
	return "ARCHIVER_" + strings.ToUpper(strings.ReplaceAll(strings.Trim(lit.Value, `"`), "-", "_"))
}
