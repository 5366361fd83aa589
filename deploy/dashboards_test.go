package deploy

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const dashboardPath = "grafana/archiver-dashboard.json"

// metricKinds returns the metrics the module's non-test Go code registers,
// by name: every Name: "archiver_..." in a prometheus CounterOpts, GaugeOpts,
// HistogramOpts or SummaryOpts literal, with the kind the literal names.
func metricKinds(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := cl.Type.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
				return true
			}
			kind := strings.TrimSuffix(sel.Sel.Name, "Opts")
			for _, el := range cl.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Name" {
					continue
				}
				lit, ok := kv.Value.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				if name, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(name, "archiver_") {
					out[name] = kind
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var metricRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(archiver_[a-z0-9_]+)`)

// metricRefs returns the archiver_* names in s.
func metricRefs(s string) []string {
	var out []string
	for _, m := range metricRef.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// resolve maps a name used in a query to the registered metric: itself, or
// for a histogram one of the series suffixes allowed.
func resolve(name string, kinds map[string]string, suffixes []string) (string, bool) {
	if _, ok := kinds[name]; ok {
		return name, true
	}
	for _, s := range suffixes {
		base := strings.TrimSuffix(name, s)
		if base != name && (kinds[base] == "Histogram" || kinds[base] == "Summary" && s != "_bucket") {
			return base, true
		}
	}
	return "", false
}

// checkRefs reports every name in refs that the code does not register.
func checkRefs(t *testing.T, what string, refs map[string]bool, kinds map[string]string, suffixes []string) {
	t.Helper()
	if len(refs) == 0 {
		t.Fatalf("%s: no archiver_* metric found; is the scan broken?", what)
	}
	var unknown []string
	for name := range refs {
		if _, ok := resolve(name, kinds, suffixes); !ok {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("%s uses metrics no code registers:\n  %s", what, strings.Join(unknown, "\n  "))
	}
}

type dashboard struct {
	Title      string
	Templating struct {
		List []struct {
			Name  string
			Type  string
			Query any
		}
	}
	Panels []panel
}

type panel struct {
	ID         int
	Type       string
	Title      string
	Datasource *struct{ Type, UID string }
	Targets    []struct {
		Expr       string
		Datasource *struct{ Type, UID string }
	}
	Panels []panel // a collapsed row's panels
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("%s is not valid JSON", dashboardPath)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// TestDashboard: the dashboard parses, every panel has a title and queries
// the ${datasource} variable, and every metric it queries is registered by
// the code (a histogram through its _bucket, _sum or _count series).
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		q, _ := json.Marshal(v.Query)
		vars[v.Name] = v.Type + " " + string(q)
	}
	if !strings.HasPrefix(vars["datasource"], "datasource ") || !strings.Contains(vars["datasource"], "prometheus") {
		t.Errorf("no Prometheus datasource variable: %q", vars["datasource"])
	}
	if !strings.Contains(vars["table"], "label_values(archiver_events_total, table)") {
		t.Errorf("table variable is %q, want label_values(archiver_events_total, table)", vars["table"])
	}
	kinds := metricKinds(t, "..")
	refs := map[string]bool{}
	ids := map[int]bool{}
	panels := allPanels(d.Panels)
	if len(panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, p := range panels {
		if strings.TrimSpace(p.Title) == "" {
			t.Errorf("panel %d (%s) has no title", p.ID, p.Type)
		}
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Datasource != nil && q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query does not use the ${datasource} variable", p.Title)
			}
			names := metricRefs(q.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no archiver_* metric", p.Title, q.Expr)
			}
			for _, n := range names {
				refs[n] = true
			}
		}
	}
	for _, v := range d.Templating.List {
		q, _ := json.Marshal(v.Query)
		for _, n := range metricRefs(string(q)) {
			refs[n] = true
		}
	}
	checkRefs(t, dashboardPath, refs, kinds, []string{"_bucket", "_sum", "_count"})
}

// TestAlarmMetrics: every metric the Terraform names exists in the code,
// and as CloudWatch receives it from internal/ops/emf.go: a histogram only
// through _count and _sum (EMF sends no buckets), never the build info.
// The alarms' namespace is the one EMF writes to.
func TestAlarmMetrics(t *testing.T) {
	files, err := filepath.Glob("terraform/*.tf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Terraform files: %v", err)
	}
	refs := map[string]bool{}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		for _, n := range metricRefs(string(b)) {
			refs[n] = true
		}
	}
	if refs["archiver_build_info"] {
		t.Error("the Terraform names archiver_build_info, which EMF does not publish")
	}
	checkRefs(t, "deploy/terraform", refs, metricKinds(t, ".."), []string{"_sum", "_count"})

	emf, err := os.ReadFile("../internal/ops/emf.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`ns = "([^"]+)"`).FindSubmatch(emf)
	if m == nil {
		t.Fatal("internal/ops/emf.go: default namespace not found")
	}
	if !strings.Contains(all.String(), `metrics_namespace = "`+string(m[1])+`"`) {
		t.Errorf("the Terraform's metrics_namespace is not EMF's namespace %q", m[1])
	}
}

// TestMetricScan guards the scan itself: it finds metrics of each kind in
// the repository, and a name with a histogram suffix resolves only for a
// histogram.
func TestMetricScan(t *testing.T) {
	kinds := metricKinds(t, "..")
	for name, kind := range map[string]string{
		"archiver_events_total":               "Counter",
		"archiver_shard_iterator_age_seconds": "Gauge",
		"archiver_ttl_lag_seconds":            "Histogram",
		"archiver_leases_held":                "Gauge",
		"archiver_build_info":                 "Gauge",
	} {
		if kinds[name] != kind {
			t.Errorf("scan found %s as %q, want %s", name, kinds[name], kind)
		}
	}
	all := []string{"_bucket", "_sum", "_count"}
	if _, ok := resolve("archiver_ttl_lag_seconds_bucket", kinds, all); !ok {
		t.Error("a histogram's _bucket series did not resolve")
	}
	if _, ok := resolve("archiver_ttl_lag_seconds_bucket", kinds, []string{"_sum", "_count"}); ok {
		t.Error("_bucket resolved where only _sum and _count are published")
	}
	if _, ok := resolve("archiver_events_total_count", kinds, all); ok {
		t.Error("a counter resolved with a histogram suffix")
	}
	if got := metricRefs(`sum(rate(archiver_a_total{x="archiver_b"}[5m])) / my_archiver_c`); strings.Join(got, ",") != "archiver_a_total,archiver_b" {
		t.Errorf("metricRefs = %v", got)
	}
}
