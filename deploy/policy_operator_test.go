package deploy

import (
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// operatorPackages hold every function the operator commands (restore,
// replay, verify) can run that talks to AWS.
var operatorPackages = []string{"cmd/archiver", "restore", "archive", "sinks", "sinks/s3sink", "sinks/natssink", "sinks/filesink",
	"sinks/sinkapi", "sinks/internal/recorder", "sinks/internal/serial", "objstore", "sinkurl", "parquetline", "shard", "consumer", "checkpoint", "lease", "internal/leasetable",
	"internal/ops", "internal/backoff", "internal/budget", "internal/progress", "internal/promreg", "internal/redact", "internal/sdkhttp"}

// operatorCommands maps each operator command's function to the prefix of
// the Sids of its own statements in iam-policy-operator.json. Statements
// with none of these prefixes (reading the archive) serve every command.
var operatorCommands = map[string]string{"restoreCmd": "Restore", "replayCmd": "Replay", "verifyCmd": "Verify"}

// commandActions returns the IAM actions the code reachable from the
// command function cmd can call, each with one call site.
func commandActions(funcs map[string]*fn, cmd string) (map[string]string, map[*fn]bool) {
	ops := map[string][]string{}
	for _, svc := range []map[string]bool{sdkOperations(&dynamodb.Client{}), sdkOperations(&dynamodbstreams.Client{})} {
		for op := range svc {
			ops[op] = []string{"dynamodb:" + op}
		}
	}
	for op := range sdkOperations(&s3.Client{}) {
		ops[op] = s3Actions[op]
		if ops[op] == nil {
			ops[op] = []string{"s3:" + op}
		}
	}
	leaves := map[string]bool{}
	for op := range ops {
		leaves[op] = true
	}
	reach := reachable(funcs, leaves, "github.com/ttl-archiver/archiver/cmd/archiver."+cmd)
	out := map[string]string{}
	methodCalls(reach, func(f *fn, op string) {
		for _, a := range ops[op] {
			firstSite(out, a, f)
		}
	})
	return out, reach
}

// kmsActions adds the KMS actions S3 calls on the command's behalf for
// SSE-KMS objects: reading needs kms:Decrypt, writing kms:GenerateDataKey.
func kmsActions(acts map[string]string) {
	if _, ok := acts["s3:GetObject"]; ok {
		acts["kms:Decrypt"] = "S3 GetObject of an SSE-KMS object"
	}
	if _, ok := acts["s3:PutObject"]; ok {
		acts["kms:GenerateDataKey"] = "S3 PutObject with sse=aws:kms"
	}
}

// TestOperatorPolicyMatchesCode fails when iam-policy-operator.json misses
// an action restore, replay or verify can call (followed from the command
// through the packages it uses), or grants a command an action it never
// calls.
func TestOperatorPolicyMatchesCode(t *testing.T) {
	p := loadPolicyFile(t, "iam-policy-operator.json")
	funcs := typeCheck(t, "..", operatorPackages)
	usedShared := map[string]string{} // shared action -> a command calling it
	var missing, extra, called []string
	for cmd, prefix := range operatorCommands {
		want, _ := commandActions(funcs, cmd)
		kmsActions(want)
		granted := map[string]string{}
		for _, st := range p.Statement {
			own := strings.HasPrefix(st.Sid, prefix)
			shared := !own && !hasCommandPrefix(st.Sid)
			for _, a := range st.Action {
				if own || shared {
					granted[a] = st.Sid
				}
				if _, calls := want[a]; own && !calls {
					extra = append(extra, a+" for "+cmd+" (statement "+st.Sid+")")
				}
				if _, calls := want[a]; shared && calls {
					usedShared[a] = cmd
				}
			}
		}
		for a, where := range want {
			called = append(called, cmd+": "+a+" <- "+where)
			if _, ok := granted[a]; !ok {
				missing = append(missing, a+" for "+cmd+" (called in "+where+")")
			}
		}
	}
	for _, st := range p.Statement {
		if hasCommandPrefix(st.Sid) {
			continue
		}
		for _, a := range st.Action {
			if _, ok := usedShared[a]; !ok {
				extra = append(extra, a+" (statement "+st.Sid+", no command calls it)")
			}
		}
	}
	reportPolicyDiff(t, "iam-policy-operator.json", "restore, replay and verify", missing, extra)
	sort.Strings(called)
	t.Logf("actions called:\n  %s", strings.Join(called, "\n  "))
}

func hasCommandPrefix(sid string) bool {
	for _, prefix := range operatorCommands {
		if strings.HasPrefix(sid, prefix) {
			return true
		}
	}
	return false
}

// TestOperatorReachability guards the scan: each command reaches its own
// work, and not the archiver's leases or sinks it never opens.
func TestOperatorReachability(t *testing.T) {
	funcs := typeCheck(t, "..", operatorPackages)
	for _, tc := range []struct {
		cmd       string
		want, not []string
	}{
		{"restoreCmd", []string{"restorer.put", "restorer.describe", "s3Store.get", "s3Store.list"}, []string{"Sink.put", "runPipeline"}},
		{"replayCmd", []string{"Sink.put", "s3Store.get"}, []string{"restorer.put", "leases.heartbeat"}},
		{"verifyCmd", []string{"reader.fetch", "walk.describe", "s3Store.list"}, []string{"leases.heartbeat", "leases.prune", "Sink.put"}},
	} {
		mustName(t, funcs, append(append([]string{}, tc.want...), tc.not...)...)
		_, reach := commandActions(funcs, tc.cmd)
		names := map[string]bool{}
		for f := range reach {
			names[f.String()] = true
		}
		for _, n := range tc.want {
			if !names[n] {
				t.Errorf("%s not reached from %s", n, tc.cmd)
			}
		}
		for _, n := range tc.not {
			if names[n] {
				t.Errorf("%s reached from %s; the scan over-reaches", n, tc.cmd)
			}
		}
	}
}
