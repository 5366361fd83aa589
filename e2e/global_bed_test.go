package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// The bed of the global-table tests (issue 26): `archiver engine` as a
// process serving every Region, a global table with a replica in each
// Region of the bed, versitygw and nats-server with one JetStream stream,
// and `archiver run` processes, as many as a test starts, all writing to
// one S3 bucket and prefix and one stream.

const (
	globalTable   = "sessions"
	globalPrefix  = "global"
	globalSubject = "archiver.{table}.{kind}"
)

type globalBed struct {
	t        *testing.T
	ctx      context.Context
	bin      string
	work     string
	endpoint string
	regions  []string // the first holds the table first; the others are its replicas
	table    string   // the table run archives (default globalTable)
	db       map[string]*dynamodb.Client
	streams  map[string]*dynamodbstreams.Client
	s3       *s3Reader
	s3URL    string // the S3 sink's URL
	natsURL  string
	js       jetstream.JetStream
	starts   int
}

// newGlobalBed starts the bed with the table in regions[0] and a replica in
// each other Region. engineFlags are added to the engine's.
func newGlobalBed(t *testing.T, regions []string, engineFlags ...string) *globalBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	b := &globalBed{t: t, ctx: ctx, bin: buildArchiver(t), work: t.TempDir(), regions: regions, table: globalTable,
		db: map[string]*dynamodb.Client{}, streams: map[string]*dynamodbstreams.Client{}}
	eng := startProc(t, b.work, "engine", b.bin, append([]string{"engine",
		"--listen", "127.0.0.1:0", "--ttl-interval", "200ms", "--stream-shards", "2", "--shard-rollover", "150"}, engineFlags...)...)
	b.endpoint = engineEndpoint(t, eng)
	for _, r := range regions {
		b.db[r] = enginetest.ClientAt(b.endpoint, "writer", func(o *dynamodb.Options) { o.Region = r })
		b.streams[r] = enginetest.StreamsClientAt(b.endpoint, "reader", func(o *dynamodbstreams.Options) { o.Region = r })
	}
	tbl := table(globalTable)
	tbl.Replicas = regions[1:]
	enginetest.CreateTable(t, b.db[regions[0]], tbl)
	s3Endpoint, s3c := startVersity(t)
	b.s3 = newS3Reader(s3c, globalPrefix+"/")
	b.s3URL = s3SinkURL(s3Bucket, globalPrefix, s3Endpoint, "flush-interval", "300ms")
	b.natsURL = startNATS(t)
	b.js = natsClient(t, b.natsURL)
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "EXPIRIES", Subjects: []string{"archiver.>"}, Duplicates: 20 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	return b
}

// run starts `archiver run` on the table, with a file checkpoint store of
// its own (name.json), the bed's S3 and NATS sinks, and flags (--region,
// --regions, --per-region, ...).
func (b *globalBed) run(name string, flags ...string) *proc {
	b.starts++
	args := append([]string{"run", "--endpoint", b.endpoint, "--table", b.table,
		"--checkpoint", "file://" + filepath.Join(b.work, name+".json"), "--worker-id", name,
		"--sink", b.s3URL, "--sink", "nats://" + b.natsURL + "?subject=" + globalSubject,
		"--metrics-addr", "127.0.0.1:0", "--log-level", "info"}, flags...)
	return startProc(b.t, b.work, fmt.Sprintf("%s-%02d", name, b.starts), b.bin, args...)
}

// expire writes n items whose TTL has passed in region: the engine's TTL
// deletes each there (the Region that last wrote it), and the delete is
// replicated to the others. It returns the keys.
func (b *globalBed) expire(region, prefix string, n int) []string {
	b.t.Helper()
	keys := keyRange(prefix, 0, n)
	if err := putItems(b.ctx, b.db[region], globalTable, keys, expiredTTL()); err != nil {
		b.t.Fatalf("writing in %s: %v", region, err)
	}
	return keys
}

// userDelete writes n items with an hour to live in region, waits until
// they are replicated, and deletes them there, as a user does.
func (b *globalBed) userDelete(region, prefix string, n int) []string {
	b.t.Helper()
	keys := keyRange(prefix, 0, n)
	if err := putItems(b.ctx, b.db[region], globalTable, keys, time.Now().Add(time.Hour).Unix()); err != nil {
		b.t.Fatalf("writing in %s: %v", region, err)
	}
	b.waitReplicated()
	for _, k := range keys {
		_, err := b.db[region].DeleteItem(b.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(globalTable),
			Key: map[string]dtypes.AttributeValue{keyAttr: &dtypes.AttributeValueMemberS{Value: k}}})
		if err != nil {
			b.t.Fatalf("DeleteItem %s in %s: %v", k, region, err)
		}
	}
	return keys
}

// control POSTs body to the engine's control API at path.
func (b *globalBed) control(path, body string) {
	b.t.Helper()
	controlAPI(b.t, b.ctx, b.endpoint, path, body)
}

// waitReplicated waits until every replicated write was applied.
func (b *globalBed) waitReplicated() {
	b.t.Helper()
	b.control("/_engine/replication/wait", `{"timeout":"60s"}`)
}

// waitFarEnd waits until every key is in the S3 archive and on JetStream,
// failing early when a process exited.
func (b *globalBed) waitFarEnd(keys []string, procs ...*proc) {
	b.t.Helper()
	eventually.Wait(b.t, 3*time.Minute, "every expired item in S3 and on JetStream", func() error {
		for _, p := range procs {
			if p.exited() && !p.termed {
				b.t.Fatalf("%s exited on its own: %v\n%s", p.name, p.err, p.tail(30))
			}
		}
		if err := b.s3.poll(b.t, b.ctx); err != nil {
			return err
		}
		if err := b.s3.tally.allArrived(keys); err != nil {
			return fmt.Errorf("S3: %w", err)
		}
		st, err := b.js.Stream(b.ctx, "EXPIRIES")
		if err != nil {
			return err
		}
		info, err := st.Info(b.ctx)
		if err != nil {
			return err
		}
		if int(info.State.Msgs) < len(keys) {
			return fmt.Errorf("JetStream: %d of %d messages", info.State.Msgs, len(keys))
		}
		return nil
	})
}

// removes is what one Region's stream holds for each key: its REMOVE
// records made by DynamoDB's TTL (service) and the others (plain).
type removes struct{ service, plain map[string]int }

// readRemoves reads every record of the table's stream in region, each
// shard from its trim horizon to its end (a closed shard) or to its first
// empty page (an open one: every write was made before).
func (b *globalBed) readRemoves(region string) removes {
	b.t.Helper()
	api := b.streams[region]
	out, err := b.db[region].DescribeTable(b.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(globalTable)})
	if err != nil {
		b.t.Fatal(err)
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	rm := removes{service: map[string]int{}, plain: map[string]int{}}
	for _, sh := range describeShards(b.t, b.ctx, api, arn) {
		it, err := api.GetShardIterator(b.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
			ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			b.t.Fatal(err)
		}
		for next := it.ShardIterator; next != nil; {
			page, err := api.GetRecords(b.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
			if err != nil {
				b.t.Fatal(err)
			}
			for _, r := range page.Records {
				if r.EventName != stypes.OperationTypeRemove {
					continue
				}
				k := itemKey(r.Dynamodb.Keys)
				if id := r.UserIdentity; id != nil && aws.ToString(id.Type) == "Service" && aws.ToString(id.PrincipalId) == "dynamodb.amazonaws.com" {
					rm.service[k]++
				} else {
					rm.plain[k]++
				}
			}
			next = page.NextShardIterator
			if len(page.Records) == 0 && sh.SequenceNumberRange.EndingSequenceNumber == nil {
				break
			}
		}
	}
	return rm
}

// describeShards lists every shard of a stream, paging.
func describeShards(t testing.TB, ctx context.Context, api *dynamodbstreams.Client, arn string) []stypes.Shard {
	t.Helper()
	var out []stypes.Shard
	var start *string
	for {
		d, err := api.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d.StreamDescription.Shards...)
		if d.StreamDescription.LastEvaluatedShardId == nil {
			return out
		}
		start = d.StreamDescription.LastEvaluatedShardId
	}
}

// checkStreams checks the attribution in the streams: each expired key
// (key → the Region whose TTL deleted it) has one service REMOVE, in that
// Region's stream, and one plain REMOVE in each other Region's; each user
// delete a plain REMOVE in every Region's and no service REMOVE.
func (b *globalBed) checkStreams(expiredIn map[string]string, deleted []string) {
	b.t.Helper()
	b.waitReplicated()
	byRegion := map[string]removes{}
	for _, r := range b.regions {
		byRegion[r] = b.readRemoves(r)
	}
	bad := 0
	report := func(format string, a ...any) {
		if bad++; bad <= 10 {
			b.t.Errorf(format, a...)
		}
	}
	for k, owner := range expiredIn {
		for _, r := range b.regions {
			want := [2]int{0, 1}
			if r == owner {
				want = [2]int{1, 0}
			}
			if got := [2]int{byRegion[r].service[k], byRegion[r].plain[k]}; got != want {
				report("expired %s (deleted by %s's TTL): %s's stream holds %d service and %d plain REMOVEs, want %d and %d", k, owner, r, got[0], got[1], want[0], want[1])
			}
		}
	}
	for _, k := range deleted {
		for _, r := range b.regions {
			if got := [2]int{byRegion[r].service[k], byRegion[r].plain[k]}; got != [2]int{0, 1} {
				report("user-deleted %s: %s's stream holds %d service and %d plain REMOVEs, want 0 and 1", k, r, got[0], got[1])
			}
		}
	}
	if bad > 10 {
		b.t.Errorf("... %d attribution errors in all", bad)
	}
}

// checkFarEnd checks the archive and JetStream: every expired key exactly
// once in each (in S3 at least once when a process was killed: a re-read
// tail may be archived again under another object name; JetStream drops
// the copy by its message ID), as an expiry, read in the Region whose TTL
// deleted it; no user delete.
func (b *globalBed) checkFarEnd(expiredIn map[string]string, deleted []string, killed bool) {
	b.t.Helper()
	if err := b.s3.poll(b.t, b.ctx); err != nil {
		b.t.Fatal(err)
	}
	st, err := b.js.Stream(b.ctx, "EXPIRIES")
	if err != nil {
		b.t.Fatal(err)
	}
	js := readStream(b.t, b.ctx, st)
	for where, ta := range map[string]*tally{"S3": b.s3.tally, "JetStream": js.tally} {
		ta.checkItems(b.t, where)
		ta.mu.Lock()
		for k, owner := range expiredIn {
			n := ta.byKey[k]
			if n == 0 || (n > 1 && (where == "JetStream" || !killed)) {
				b.t.Errorf("%s: expired %s delivered %d times, want once", where, k, n)
			}
			if ta.kinds[k] != "expired" {
				b.t.Errorf("%s: %s delivered as %q, want expired", where, k, ta.kinds[k])
			}
			if ta.regions[k] != owner {
				b.t.Errorf("%s: %s read in Region %q, want %s, whose TTL deleted it", where, k, ta.regions[k], owner)
			}
		}
		for _, k := range deleted {
			if ta.byKey[k] != 0 {
				b.t.Errorf("%s: user-deleted %s delivered %d times, want never", where, k, ta.byKey[k])
			}
		}
		if extra := len(ta.byKey) - len(expiredIn); extra != 0 {
			b.t.Errorf("%s: %d keys delivered beyond the %d expired", where, extra, len(expiredIn))
		}
		ta.mu.Unlock()
	}
}

// owners maps each key of keys to region.
func owners(m map[string]string, region string, keys []string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	for _, k := range keys {
		m[k] = region
	}
	return m
}

// logSays reports whether p's log holds a line whose message contains
// every part.
func logSays(p *proc, parts ...string) bool {
	data := p.tail(1 << 20)
	for _, line := range strings.Split(data, "\n") {
		ok := true
		for _, part := range parts {
			ok = ok && strings.Contains(line, part)
		}
		if ok {
			return true
		}
	}
	return false
}

// envDuration is the duration in the environment variable name, or def
// when it is unset; a value that does not parse fails the test.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return d
}
