package deploy

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// localOnly lists code that never talks to AWS: the engine is a server, the
// bench and the demo drive the in-process engine, tools build test servers.
// Paths are relative to the module root; a trailing slash means the folder.
var localOnly = []string{
	"engine/",
	"cmd/bench/",
	"tools/",
	".tools/",
	"deploy/",
	"cmd/archiver/demo", // demo*.go: runs the demo
	"demo/",             // creates and fills the demo table in the local engine
	// archiver conformance measures a DynamoDB-compatible endpoint (a
	// local engine, a test account) with tables of its own; it is never
	// run by the archiver's task and needs its own permissions.
	"conformance/",
	"cmd/archiver/conformance", // conformance*.go
	// Helpers for other packages' tests: they create buckets and tables
	// in versitygw and the engine.
	"internal/s3test/",
	"restore/restoretest/",
}

// operatorOnly is the code of the commands an operator runs by hand, never
// in the archiver's task: restore, replay and verify over the archive.
// Their role is iam-policy-operator.json, checked by
// TestOperatorPolicyMatchesCode.
var operatorOnly = []string{
	"archive/",
	"restore/",
	"cmd/archiver/restore", // restore*.go
	"cmd/archiver/replay",  // replay*.go
	"cmd/archiver/verify",  // verify*.go
}

// sweepOnly is the code of `archiver sweep`, which runs with its own role
// (iam-policy-sweep.json, checked by TestSweepPolicyMatchesCode): the
// archiver's policy does not cover it.
var sweepOnly = []string{
	"sweep/",
	"cmd/archiver/sweep", // sweep*.go
}

// s3Actions maps S3 API operations to the IAM action that authorizes them
// where the names differ.
var s3Actions = map[string][]string{
	"HeadObject":              {"s3:GetObject"},
	"ListObjectsV2":           {"s3:ListBucket"},
	"ListObjects":             {"s3:ListBucket"},
	"HeadBucket":              {"s3:ListBucket"},
	"CreateMultipartUpload":   {"s3:PutObject"},
	"UploadPart":              {"s3:PutObject"},
	"CompleteMultipartUpload": {"s3:PutObject"},
	"CopyObject":              {"s3:GetObject", "s3:PutObject"},
}

// sdkOperations returns the API operation names of an SDK client: methods
// shaped func(ctx, *XInput, ...func(*Options)) (*XOutput, error).
func sdkOperations(client any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(client)
	for i := 0; i < t.NumMethod(); i++ {
		m := t.Method(i)
		ft := m.Type // includes the receiver
		if ft.NumIn() == 4 && ft.NumOut() == 2 && ft.IsVariadic() &&
			strings.HasSuffix(ft.In(2).String(), "."+m.Name+"Input") {
			out[m.Name] = true
		}
	}
	return out
}

type call struct {
	action string
	where  string
}

// codeActions scans the module's non-test Go code (outside localOnly) for
// calls of DynamoDB, DynamoDB Streams and S3 operations (directly, through
// the small interfaces our packages define, or via paginators and waiters)
// and returns the IAM actions they need, with one call site each.
func codeActions(t *testing.T, root string) map[string]call {
	acts, _ := codeCalls(t, root, localOnly)
	return acts
}

// codeCalls is codeActions, leaving out the code skip names (paths as in
// localOnly), that also returns the S3 operation names called.
func codeCalls(t *testing.T, root string, skip []string) (map[string]call, map[string]bool) {
	ddb := sdkOperations(&dynamodb.Client{})
	streams := sdkOperations(&dynamodbstreams.Client{})
	s3ops := sdkOperations(&s3.Client{})
	if len(ddb) < 20 || len(streams) != 4 || len(s3ops) < 50 {
		t.Fatalf("SDK operation discovery broke: %d dynamodb, %d streams, %d s3", len(ddb), len(streams), len(s3ops))
	}
	for op := range s3ops {
		if ddb[op] || streams[op] {
			t.Fatalf("operation %s exists in S3 and DynamoDB; the scan cannot attribute it", op)
		}
	}
	actionsOf := func(op string) []string {
		switch {
		case ddb[op], streams[op]:
			return []string{"dynamodb:" + op}
		case s3ops[op]:
			if a, ok := s3Actions[op]; ok {
				return a
			}
			return []string{"s3:" + op}
		}
		return nil
	}
	found := map[string]call{}
	s3Called := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			for _, p := range skip {
				if strings.HasSuffix(p, "/") && rel+"/" == p {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, p := range skip {
			if !strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p) {
				return nil
			}
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ce, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := ce.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			name := sel.Sel.Name
			var acts []string
			switch {
			case len(ce.Args) >= 2 && actionsOf(name) != nil:
				acts = actionsOf(name)
				if s3ops[name] {
					s3Called[name] = true
				}
			case strings.HasPrefix(name, "New") && strings.HasSuffix(name, "Paginator"):
				acts = actionsOf(strings.TrimSuffix(strings.TrimPrefix(name, "New"), "Paginator"))
			case name == "NewTableExistsWaiter" || name == "NewTableNotExistsWaiter":
				acts = actionsOf("DescribeTable")
			}
			for _, a := range acts {
				if _, seen := found[a]; !seen {
					pos := fset.Position(ce.Pos())
					where, _ := filepath.Rel(root, pos.Filename)
					found[a] = call{action: a, where: filepath.ToSlash(where) + ":" + itoa(pos.Line)}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, s3Called
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// codeMentions reports whether any scanned non-test Go file under dir
// contains s.
func codeMentions(t *testing.T, dir, s string) bool {
	hit := false
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), s) {
			hit = true
		}
		return nil
	})
	return hit
}

type policy struct {
	Version   string
	Statement []struct {
		Sid      string
		Effect   string
		Action   stringList
		Resource stringList
	}
}

// stringList is an IAM field that may be a string or a list of strings.
type stringList []string

func (s *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

func loadPolicy(t *testing.T) policy { return loadPolicyFile(t, "iam-policy.json") }

func loadPolicyFile(t *testing.T, name string) policy {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var p policy
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// TestPolicyMatchesCode fails when iam-policy.json misses an action the code
// calls, or grants one nothing calls.
func TestPolicyMatchesCode(t *testing.T) {
	skip := slices.Concat(localOnly, sweepOnly, operatorOnly)
	want, s3Called := codeCalls(t, "..", skip)
	// SSE-KMS: S3 calls KMS on the archiver's behalf when the S3 sink is
	// configured with sse=aws:kms: writing an object needs
	// kms:GenerateDataKey, reading one back (GetObject, multipart uploads)
	// needs kms:Decrypt.
	if codeMentions(t, "../sinks", "aws:kms") || codeMentions(t, "../sinks", "ServerSideEncryptionAwsKms") {
		if s3Called["PutObject"] || s3Called["CreateMultipartUpload"] {
			want["kms:GenerateDataKey"] = call{action: "kms:GenerateDataKey", where: "sinks (sse=aws:kms, writes)"}
		}
		if s3Called["GetObject"] || s3Called["CreateMultipartUpload"] {
			want["kms:Decrypt"] = call{action: "kms:Decrypt", where: "sinks (sse=aws:kms, GetObject)"}
		}
	}
	granted := map[string]string{}
	for _, st := range loadPolicy(t).Statement {
		if st.Effect != "Allow" {
			t.Errorf("statement %s: Effect %q; the policy only allows", st.Sid, st.Effect)
		}
		for _, a := range st.Action {
			granted[a] = st.Sid
		}
	}
	var missing, extra []string
	for a, c := range want {
		if _, ok := granted[a]; !ok {
			missing = append(missing, a+" (called at "+c.where+")")
		}
	}
	for a, sid := range granted {
		if _, ok := want[a]; !ok {
			extra = append(extra, a+" (statement "+sid+")")
		}
	}
	reportPolicyDiff(t, "iam-policy.json", "the code", missing, extra)
	if t.Failed() {
		return
	}
	var names []string
	for a, c := range want {
		names = append(names, a+" <- "+c.where)
	}
	sort.Strings(names)
	t.Logf("actions called:\n  %s", strings.Join(names, "\n  "))
}

// reportPolicyDiff fails the test with the actions the policy file misses
// and those it grants that who never calls.
func reportPolicyDiff(t *testing.T, file, who string, missing, extra []string) {
	t.Helper()
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("deploy/%s misses actions %s calls:\n  %s", file, who, strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("deploy/%s grants actions %s never calls:\n  %s", file, who, strings.Join(extra, "\n  "))
	}
}

// TestPolicyIsScoped fails on wildcard actions and on unscoped resources.
func TestPolicyIsScoped(t *testing.T) {
	for _, name := range []string{"iam-policy.json", "iam-policy-sweep.json", "iam-policy-operator.json"} {
		t.Run(name, func(t *testing.T) { checkScoped(t, loadPolicyFile(t, name)) })
	}
}

func checkScoped(t *testing.T, p policy) {
	for _, st := range p.Statement {
		for _, a := range st.Action {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s: wildcard action %q", st.Sid, a)
			}
		}
		if len(st.Resource) == 0 {
			t.Errorf("statement %s: no Resource", st.Sid)
		}
		for _, r := range st.Resource {
			if r == "*" && tagDiscovery(st.Action) {
				continue // ListTables takes no resource; both only list names and tags
			}
			if r == "*" || strings.HasSuffix(r, ":*") || strings.HasSuffix(r, ":table/*") {
				t.Errorf("statement %s: resource %q is not scoped to the archiver's table, stream, bucket or key", st.Sid, r)
			}
		}
	}
}

// tagDiscovery reports whether actions are only those of --tables-tagged's
// discovery (tagDiscoveryOps), which may be granted on "*".
func tagDiscovery(actions []string) bool {
	for _, a := range actions {
		if !tagDiscoveryOps[strings.TrimPrefix(a, "dynamodb:")] {
			return false
		}
	}
	return len(actions) > 0
}

// TestScannerSeesCalls guards the scanner itself: a known call site must be
// found, and local-only code must be ignored.
func TestScannerSeesCalls(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("shard/a.go", "package shard\nfunc f(c api) { c.GetRecords(ctx, in); p := dynamodb.NewScanPaginator(c, in); _ = p }\n")
	write("sinks/b.go", "package sinks\nfunc g(c api) { c.HeadObject(ctx, in); c.Write(x) }\n")
	write("sinks/b_test.go", "package sinks\nfunc h(c api) { c.DeleteObject(ctx, in) }\n")
	write("engine/e.go", "package engine\nfunc h(c api) { c.PutItem(ctx, in) }\n")
	write("cmd/archiver/demo.go", "package main\nfunc h(c api) { c.CreateTable(ctx, in) }\n")
	got := codeActions(t, dir)
	var names []string
	for a := range got {
		names = append(names, a)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "dynamodb:GetRecords,dynamodb:Scan,s3:GetObject" {
		t.Fatalf("scanner found %v", names)
	}
}
