package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/sweep"
)

// The global-table tests (issue 26): a DynamoDB global table replicates
// every write, a TTL delete too, to every Region, and only the stream of
// the Region whose TTL deleted an item marks its REMOVE as DynamoDB's.
// Whichever way the archiver is deployed (one per Region, or one reading
// every replica), every expiry must be archived exactly once and no user
// delete at all, counted item by item at the far end (S3 and JetStream)
// and in the streams themselves.

// TestGlobalTablePerRegion is the first done-when: a table in us-east-1
// with a replica in eu-west-1, 150 items expiring in each Region and 20
// user deletes in each, one `archiver run --region R --per-region` per
// Region with default settings, one S3 bucket and prefix, own checkpoints.
func TestGlobalTablePerRegion(t *testing.T) {
	b := newGlobalBed(t, []string{"us-east-1", "eu-west-1"})
	us := b.run("us", "--region", "us-east-1", "--per-region")
	eu := b.run("eu", "--region", "eu-west-1", "--per-region")
	expiredIn := owners(nil, "us-east-1", b.expire("us-east-1", "us", 150))
	owners(expiredIn, "eu-west-1", b.expire("eu-west-1", "eu", 150))
	deleted := append(b.userDelete("us-east-1", "del-us", 20), b.userDelete("eu-west-1", "del-eu", 20)...)
	b.waitFarEnd(slices.Collect(maps.Keys(expiredIn)), us, eu)
	b.checkStreams(expiredIn, deleted)
	stopClean(t, us)
	stopClean(t, eu)
	b.checkFarEnd(expiredIn, deleted, false)
	for _, p := range []*proc{us, eu} {
		if !logSays(p, "is a global table", "us-east-1, eu-west-1") && !logSays(p, "is a global table", "eu-west-1, us-east-1") {
			t.Errorf("%s did not say at start-up that the table is global, with its Regions:\n%s", p.name, p.tail(20))
		}
		if !logSays(p, "archived by the archivers there") {
			t.Errorf("%s did not say whose expiries it leaves to the other archiver:\n%s", p.name, p.tail(20))
		}
	}
}

// TestGlobalTableOneDeployment is the second done-when: the same from one
// `archiver run --regions all`, with replication to eu-west-1 paused for
// 30 s mid-run (GLOBAL_PAUSE shortens it).
func TestGlobalTableOneDeployment(t *testing.T) {
	b := newGlobalBed(t, []string{"us-east-1", "eu-west-1"})
	all := b.run("all", "--region", "us-east-1", "--regions", "all")
	expiredIn := owners(nil, "us-east-1", b.expire("us-east-1", "us-a", 75))
	owners(expiredIn, "eu-west-1", b.expire("eu-west-1", "eu-a", 75))
	deleted := b.userDelete("eu-west-1", "del-eu", 20)

	b.control("/_engine/replication", `{"pause":"eu-west-1"}`)
	pausedAt := time.Now()
	owners(expiredIn, "us-east-1", b.expire("us-east-1", "us-b", 75))
	owners(expiredIn, "eu-west-1", b.expire("eu-west-1", "eu-b", 75))
	time.Sleep(time.Until(pausedAt.Add(envDuration(t, "GLOBAL_PAUSE", 30*time.Second))))
	b.control("/_engine/replication", `{"resume":"eu-west-1"}`)
	deleted = append(deleted, b.userDelete("us-east-1", "del-us", 20)...)

	b.waitFarEnd(slices.Collect(maps.Keys(expiredIn)), all)
	b.checkStreams(expiredIn, deleted)
	stopClean(t, all)
	b.checkFarEnd(expiredIn, deleted, false)
	if !logSays(all, "every replica of sessions is read") {
		t.Errorf("the archiver did not say that it reads every replica:\n%s", all.tail(20))
	}
}

// TestGlobalTableThreeRegionsKill: three Regions, an archiver per Region,
// and the eu-west-1 archiver killed with SIGKILL mid-run and started
// again: every expiry still once on JetStream, at least once in S3 (the
// re-read tail), none lost.
func TestGlobalTableThreeRegionsKill(t *testing.T) {
	regions := []string{"us-east-1", "eu-west-1", "ap-southeast-2"}
	b := newGlobalBed(t, regions)
	procs := map[string]*proc{}
	for _, r := range regions {
		procs[r] = b.run(r, "--region", r, "--per-region")
	}
	var expiredIn map[string]string
	for _, r := range regions {
		expiredIn = owners(expiredIn, r, b.expire(r, r+"-a", 100))
	}
	time.Sleep(500 * time.Millisecond) // mid-run: some of the first wave read, some not
	if !procs["eu-west-1"].kill() {
		t.Fatalf("the eu-west-1 archiver was not running when killed:\n%s", procs["eu-west-1"].tail(30))
	}
	for _, r := range regions {
		expiredIn = owners(expiredIn, r, b.expire(r, r+"-b", 100))
	}
	procs["eu-west-1"] = b.run("eu-west-1", "--region", "eu-west-1", "--per-region")
	deleted := b.userDelete("ap-southeast-2", "del", 20)
	b.waitFarEnd(slices.Collect(maps.Keys(expiredIn)), slices.Collect(maps.Values(procs))...)
	b.checkStreams(expiredIn, deleted)
	for _, p := range procs {
		stopClean(t, p)
	}
	b.checkFarEnd(expiredIn, deleted, true)
}

// TestGlobalTableBothRegionsExpire: AWS does not rule out that two
// Regions' TTL delete one item (each before the other's delete arrives):
// two service REMOVEs, so an archiver per Region archives it twice. The
// NATS message ID of an expiry is the same whichever Region publishes it,
// so JetStream keeps one, and `archiver verify` counts one.
func TestGlobalTableBothRegionsExpire(t *testing.T) {
	b := newGlobalBed(t, []string{"us-east-1", "eu-west-1"})
	b.control("/_engine/ttl/independent", `{"enabled":true}`)
	us := b.run("us", "--region", "us-east-1", "--per-region")
	eu := b.run("eu", "--region", "eu-west-1", "--per-region")
	const n = 50
	keys := keyRange("both", 0, n)
	if err := putItems(b.ctx, b.db["us-east-1"], globalTable, keys, time.Now().Add(3*time.Second).Unix()); err != nil {
		t.Fatal(err)
	}
	b.waitReplicated()
	b.control("/_engine/replication", `{"delay":"10s"}`) // each Region's TTL deletes its copy before the other's delete arrives
	b.waitFarEnd(keys, us, eu)
	b.control("/_engine/replication", `{"delay":"0s"}`)
	b.waitReplicated()
	for _, r := range b.regions {
		rm := b.readRemoves(r)
		for _, k := range keys {
			if rm.service[k] != 1 || rm.plain[k] != 0 {
				t.Fatalf("%s in %s: %d service and %d plain REMOVEs, want each Region's TTL to delete it (1 and 0): the race did not happen", k, r, rm.service[k], rm.plain[k])
			}
		}
	}
	stopClean(t, us)
	stopClean(t, eu)
	if err := b.s3.poll(t, b.ctx); err != nil {
		t.Fatal(err)
	}
	st, err := b.js.Stream(b.ctx, "EXPIRIES")
	if err != nil {
		t.Fatal(err)
	}
	js := readStream(t, b.ctx, st)
	for _, k := range keys {
		if b.s3.tally.byKey[k] != 2 || js.tally.byKey[k] != 1 {
			t.Errorf("%s: %d times in S3 (want 2, one per Region) and %d on JetStream (want 1)", k, b.s3.tally.byKey[k], js.tally.byKey[k])
		}
	}
	cmd := exec.CommandContext(b.ctx, b.bin, "verify", "--from", b.s3URL, "--json")
	cmd.Env = cleanEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("archiver verify: %v\n%s\n%s", err, out, stderr.String())
	}
	var rep struct {
		Events   int `json:"distinctEvents"`
		Coverage struct {
			Verdict string `json:"verdict"`
			Shards  []struct {
				Region string `json:"region"`
			} `json:"shards"`
		} `json:"coverage"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, out)
	}
	if rep.Events != n {
		t.Errorf("verify counts %d distinct events in the two Regions' archive, want %d (each expiry once)", rep.Events, n)
	}
	// Coverage manifests per Region (issue 27): each Region's archiver
	// proves its own stream's shards, and together they are complete.
	regions := map[string]int{}
	for _, s := range rep.Coverage.Shards {
		regions[s.Region]++
	}
	if rep.Coverage.Verdict != "complete" || regions["us-east-1"] == 0 || regions["eu-west-1"] == 0 || len(regions) != 2 {
		t.Errorf("coverage %q with shards by Region %v, want complete with both Regions' shards", rep.Coverage.Verdict, regions)
	}
}

// TestGlobalTableStartupChecks: what cannot archive every expiry exactly
// once is refused at start-up, naming the cause, and what archives only
// some Regions' says so loudly.
func TestGlobalTableStartupChecks(t *testing.T) {
	b := newGlobalBed(t, []string{"us-east-1", "eu-west-1"})
	strong := enginetest.Table{Name: "locks", Hash: keyAttr}
	enginetest.CreateTable(t, b.db["us-east-1"], strong)
	_, err := b.db["us-east-1"].UpdateTable(b.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("locks"),
		MultiRegionConsistency: dtypes.MultiRegionConsistencyStrong,
		ReplicaUpdates:         []dtypes.ReplicationGroupUpdate{{Create: &dtypes.CreateReplicationGroupMemberAction{RegionName: aws.String("us-east-2")}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"past-ttl over two Regions", []string{"--region", "us-east-1", "--regions", "all", "--expired-when", "past-ttl"}, []string{"archived 2 times", "read one Region"}},
		{"past-ttl per Region", []string{"--region", "eu-west-1", "--per-region", "--expired-when", "past-ttl"}, []string{"without --per-region"}},
		{"MRSC under service", []string{"--region", "us-east-1", "--table", "locks"}, []string{"multi-Region strongly consistent", "archiver sweep"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := b.run("refused", tc.flags...)
			err := p.wait(60 * time.Second)
			if err == nil {
				t.Fatalf("archiver run %s started; want it refused", strings.Join(tc.flags, " "))
			}
			for _, w := range tc.want {
				if !strings.Contains(p.tail(40), w) {
					t.Errorf("its output does not say %q:\n%s", w, p.tail(40))
				}
			}
		})
	}
	one := b.run("one", "--region", "us-east-1")
	eventually.True(t, time.Minute, "the WARN about eu-west-1's expiries", func() bool {
		return logSays(one, `"level":"warn"`, "eu-west-1 are NOT archived")
	})
	stopClean(t, one)
}

// TestGlobalTableSweeper: the sweeper on a global table runs in one Region
// and its deletes replicate to the others as plain deletes; one archiver
// with --expired-when past-ttl in one Region (here another than the
// sweeper's) archives every expiry exactly once, and no user delete. The
// engine's own TTL is off, so every expiry is the sweeper's.
func TestGlobalTableSweeper(t *testing.T) {
	b := newGlobalBed(t, []string{"us-east-1", "eu-west-1"}, "--ttl-interval", "-1s")
	b.table = sweepE2ETable
	tbl := sweptTable()
	tbl.Replicas = []string{"eu-west-1"}
	enginetest.CreateTable(t, b.db["us-east-1"], tbl)
	sw := startProc(t, b.work, "sweep", b.bin, "sweep", "--endpoint", b.endpoint, "--region", "us-east-1", "--table", sweepE2ETable,
		"--checkpoint", "file://"+filepath.Join(b.work, "sweep.json"), "--metrics-addr", "127.0.0.1:0")
	run := b.run("eu", "--region", "eu-west-1", "--expired-when", "past-ttl")
	first := time.Now().Add(2 * time.Second).Unix()
	expiredIn := map[string]string{}
	for i, r := range []string{"us-east-1", "eu-west-1", "us-east-1", "eu-west-1"} {
		keys := keyRange(fmt.Sprintf("cart%d", i), 0, 30)
		for j, k := range keys {
			putCart(t, b, r, k, first+int64(j%6))
			expiredIn[k] = "eu-west-1" // read there, whoever deleted it
		}
	}
	var deleted []string
	for _, k := range keyRange("kept", 0, 10) {
		putCart(t, b, "eu-west-1", k, time.Now().Add(time.Hour).Unix())
		deleted = append(deleted, k)
	}
	b.waitReplicated()
	for _, k := range deleted {
		if _, err := b.db["us-east-1"].DeleteItem(b.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(sweepE2ETable),
			Key: map[string]dtypes.AttributeValue{keyAttr: &dtypes.AttributeValueMemberS{Value: k}}}); err != nil {
			t.Fatal(err)
		}
	}
	b.waitFarEnd(slices.Collect(maps.Keys(expiredIn)), sw, run)
	stopClean(t, run)
	stopClean(t, sw)
	b.checkFarEnd(expiredIn, deleted, false)
	if !logSays(sw, "the table is a global table") {
		t.Errorf("the sweeper did not say who archives its deletes on a global table:\n%s", sw.tail(20))
	}
}

// putCart writes an item of the swept table in region, as putItems writes
// them, with its window attribute for the TTL ttl.
func putCart(t *testing.T, b *globalBed, region, key string, ttl int64) {
	t.Helper()
	_, err := b.db[region].PutItem(b.ctx, &dynamodb.PutItemInput{TableName: aws.String(sweepE2ETable), Item: map[string]dtypes.AttributeValue{
		keyAttr:                      &dtypes.AttributeValueMemberS{Value: key},
		ttlAttr:                      &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(ttl, 10)},
		sweep.DefaultWindowAttribute: &dtypes.AttributeValueMemberS{Value: sweep.Window(time.Unix(ttl, 0), sweep.DefaultWindow, 1)},
		"payload":                    &dtypes.AttributeValueMemberS{Value: "session data for " + key},
		"n":                          &dtypes.AttributeValueMemberN{Value: preciseN},
	}})
	if err != nil {
		t.Fatal(err)
	}
}
