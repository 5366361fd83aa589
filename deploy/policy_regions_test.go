package deploy

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// runPackages hold every function `archiver run` can run that talks to
// DynamoDB or DynamoDB Streams; the scan follows calls from runCmd
// through them.
var runPackages = []string{"cmd/archiver", "shard", "consumer", "checkpoint", "lease", "internal/leasetable", "sinks", "event",
	"internal/ops", "internal/backoff", "internal/budget", "internal/promreg", "internal/redact", "internal/sdkhttp"}

// runResource says what a DynamoDB or Streams call of `archiver run`
// reaches: the lease table's packages and openCheckpoint the lease table, in
// --region (or the checkpoint URL's Region) only; every other call the
// source, with the clients of whichever Region it is read in
// (cmd/archiver/regions.go hands each Region's clients to the source
// check, the walker and the readiness check): its stream for a Streams
// operation, the table otherwise.
func runResource(f *fn, op string, streamsOps map[string]bool) string {
	switch {
	case onLeaseTable(f):
		return "lease"
	case streamsOps[op]:
		return "stream"
	case tagDiscoveryOps[op]:
		return "account"
	}
	return "table"
}

// tagDiscoveryOps are the calls of --tables-tagged that look at every
// table of the account and Region (statement FindTaggedTables): ListTables
// takes no resource, so they are granted on "*", not per source table.
var tagDiscoveryOps = map[string]bool{"ListTables": true, "ListTagsOfResource": true}

// runCodeActions returns the DynamoDB actions `archiver run` can call,
// per resource (lease, table, stream), each with one call site.
func runCodeActions(t *testing.T) (map[string]*fn, map[string]map[string]string, map[*fn]bool) {
	t.Helper()
	ddb := sdkOperations(&dynamodb.Client{})
	streams := sdkOperations(&dynamodbstreams.Client{})
	leaves := map[string]bool{}
	for op := range ddb {
		leaves[op] = true
	}
	for op := range streams {
		leaves[op] = true
	}
	funcs := typeCheck(t, "..", runPackages)
	reach := reachable(funcs, leaves, "github.com/ttl-archiver/archiver/cmd/archiver.runCmd")
	out := map[string]map[string]string{}
	methodCalls(reach, func(f *fn, op string) {
		if !leaves[op] {
			return
		}
		res := runResource(f, op, streams)
		if out[res] == nil {
			out[res] = map[string]string{}
		}
		firstSite(out[res], "dynamodb:"+op, f)
	})
	return funcs, out, reach
}

// sourceRegions is main.tf's local.source_regions: region, and the
// Regions of regions (["all"]: replica_regions), each once.
func sourceRegions(region string, regions, replicaRegions []string) []string {
	read := regions
	if slices.Contains(regions, "all") {
		read = replicaRegions
	}
	out := []string{region}
	for _, r := range read {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// regionPolicy is main.tf's local.task_policy for region reading read
// (sourceRegions) and the tables named by source_tables (source_table,
// then tagged_table_prefix*): iam-policy.json filled in for region and the
// first table, the statements of sids with the Resource of iam-policy.json
// filled in for each pair of setproduct(read, tables), in order.
func regionPolicy(t *testing.T, region string, read, tables, sids []string) policy {
	t.Helper()
	vars := map[string]string{"bucket": "b", "prefix": "ttl-archive/", "dead_letter_prefix": "dead-letter/", "source_table": tables[0]}
	home := filledPolicy(t, with(vars, "region", region))
	for _, r := range read {
		for _, table := range tables {
			if r == region && table == tables[0] {
				continue
			}
			p := filledPolicy(t, with(with(vars, "region", r), "source_table", table))
			for i := range home.Statement {
				if home.Statement[i].Sid != p.Statement[i].Sid {
					t.Fatalf("iam-policy.json's statements are not in one order for two Regions")
				}
				if slices.Contains(sids, home.Statement[i].Sid) {
					home.Statement[i].Resource = append(home.Statement[i].Resource, p.Statement[i].Resource...)
				}
			}
		}
	}
	return home
}

// with is a copy of m with k set to v.
func with(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	out[k] = v
	return out
}

var tfStringItem = regexp.MustCompile(`"([^"]*)"`)

// TestPolicyPerRegion holds the task role's policy for a deployment that
// reads a global table's replicas in several Regions (regions, or
// ["all"] with replica_regions): main.tf fills iam-policy.json in once per
// Region and gives the statements on the source table and its stream the
// Resource of each. Every DynamoDB and Streams action `archiver run` can
// call on the source (followed from runCmd, each call placed on the lease
// table, the source table or its stream) must be granted on the table or
// stream of every Region read, and on no other Region's; the lease
// table's actions on region's lease table alone.
func TestPolicyPerRegion(t *testing.T) {
	main := readFile(t, "terraform/main.tf")
	for _, tc := range []struct{ local, want string }{
		{"source_regions", `distinct(concat([var.region], contains(var.regions, "all") ? var.replica_regions : var.regions))`},
		{"source_tables", `compact([var.source_table, local.tagged ? "${var.tagged_table_prefix}*" : ""])`},
		{"policy_by_region", `[for p in setproduct(local.source_regions, local.source_tables) : jsondecode(templatefile("${path.module}/../iam-policy.json", merge(local.policy_vars, { region = p[0], source_table = p[1] })))]`},
		{"policy_template", `jsondecode(templatefile("${path.module}/../iam-policy.json", local.policy_vars))`},
	} {
		if got := tfLocal(t, main, tc.local); got != tc.want {
			t.Errorf("local.%s = %s, want %s (the expansion this test computes)", tc.local, got, tc.want)
		}
	}
	const resource = `Resource = contains(local.source_sids, s.Sid) ? flatten([for p in local.policy_by_region : p.Statement[i].Resource]) : flatten([s.Resource])`
	if !strings.Contains(main, resource) || !strings.Contains(main, "for i, s in local.policy_template.Statement : merge(s, {") {
		t.Errorf("local.task_policy no longer takes each statement of source_sids with the Resource of every Region read (%s)", resource)
	}
	var sids []string
	for _, m := range tfStringItem.FindAllStringSubmatch(tfLocal(t, main, "source_sids"), -1) {
		sids = append(sids, m[1])
	}
	// The statements on the source table or its stream are exactly those
	// expanded: one added later is read in every Region too.
	var onSource []string
	for _, st := range loadPolicy(t).Statement {
		if strings.Contains(strings.Join(st.Resource, " "), ":table/${source_table}") {
			onSource = append(onSource, st.Sid)
			if !strings.Contains(strings.Join(st.Resource, " "), ":${region}:") {
				t.Errorf("statement %s: its Resource does not name ${region}, so it cannot be filled in per Region", st.Sid)
			}
		}
	}
	sort.Strings(onSource)
	sort.Strings(sids)
	if !slices.Equal(onSource, sids) {
		t.Errorf("local.source_sids = %v, but the statements of iam-policy.json on the source table and its stream are %v", sids, onSource)
	}

	funcs, want, reach := runCodeActions(t)
	mustName(t, funcs, "describeRegions", "checkRunSources", "openCheckpoint", "SourceCheck.table", "SourceCheck.stream",
		"walk.discoverTable", "walk.listStreams", "reader.fetch", "reader.iteratorAt", "ttlCache.lookup", "Table.ensure")
	names := map[string]bool{}
	for f := range reach {
		names[f.String()] = true
	}
	for _, n := range []string{"describeRegions", "checkRunSources", "SourceCheck.table", "walk.listStreams", "reader.fetch", "openCheckpoint"} {
		if !names[n] {
			t.Errorf("%s not reached from runCmd: the scan misses what run calls in each Region", n)
		}
	}
	if len(want["table"]) == 0 || len(want["stream"]) == 0 || len(want["lease"]) == 0 {
		t.Fatalf("the scan found no calls on the source table, its stream or the lease table: %v", want)
	}
	const account = "123456789012"
	arn := func(region, kind, table string) string {
		switch kind {
		case "table":
			return "arn:aws:dynamodb:" + region + ":" + account + ":table/" + table
		case "stream":
			return "arn:aws:dynamodb:" + region + ":" + account + ":table/" + table + "/stream/2026-01-02T03:04:05.678"
		}
		return "arn:aws:dynamodb:" + region + ":" + account + ":table/L"
	}
	for _, tc := range []struct {
		name                    string
		regions, replicaRegions []string
		read                    []string
		// tables is local.source_tables; readTables the tables it must
		// grant, otherTables tables it must not.
		tables, readTables, otherTables []string
	}{
		{"one Region", nil, nil, []string{"eu-west-1"}, []string{"T"}, []string{"T"}, []string{"U"}},
		{"a list", []string{"eu-west-1", "us-east-1", "ap-southeast-2"}, nil, []string{"eu-west-1", "us-east-1", "ap-southeast-2"}, []string{"T"}, []string{"T"}, []string{"U"}},
		{"a list without region", []string{"us-east-1"}, nil, []string{"eu-west-1", "us-east-1"}, []string{"T"}, []string{"T"}, []string{"U"}},
		{"all", []string{"all"}, []string{"us-east-1", "eu-west-1"}, []string{"eu-west-1", "us-east-1"}, []string{"T"}, []string{"T"}, []string{"U"}},
		{"tagged tables", nil, nil, []string{"eu-west-1"}, []string{"T", "app-*"}, []string{"T", "app-orders", "app-carts"}, []string{"U", "other-app"}},
		{"tagged tables only", nil, nil, []string{"eu-west-1"}, []string{"app-*"}, []string{"app-orders"}, []string{"T"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := sourceRegions("eu-west-1", tc.regions, tc.replicaRegions)
			if !slices.Equal(read, tc.read) {
				t.Fatalf("source_regions = %v, want %v", read, tc.read)
			}
			p := regionPolicy(t, "eu-west-1", read, tc.tables, sids)
			var missing, extra []string
			for _, r := range append(slices.Clone(read), "sa-east-1") {
				granted := r != "sa-east-1"
				for _, table := range append(slices.Clone(tc.readTables), tc.otherTables...) {
					granted := granted && slices.Contains(tc.readTables, table)
					for _, kind := range []string{"table", "stream"} {
						for a, where := range want[kind] {
							switch ok := p.allows(a, arn(r, kind, table)); {
							case granted && !ok:
								missing = append(missing, a+" on the "+kind+" of "+table+" in "+r+" (called in "+where+")")
							case !granted && ok:
								extra = append(extra, a+" on the "+kind+" of "+table+" in "+r+", which is not read")
							}
						}
					}
				}
				for a, where := range want["lease"] {
					switch ok := p.allows(a, arn(r, "lease", "")); {
					case r == "eu-west-1" && !ok:
						missing = append(missing, a+" on the lease table (called in "+where+")")
					case r != "eu-west-1" && ok:
						extra = append(extra, a+" on a lease table in "+r+": the lease table is region's")
					}
				}
			}
			reportPolicyDiff(t, "iam-policy.json, filled in per Region as main.tf does,", "archiver run", missing, extra)
			if t.Failed() {
				b, _ := json.MarshalIndent(p, "", "  ")
				t.Logf("the policy:\n%s", b)
			}
		})
	}
}
