package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// The chaos tests that run the real `archiver run` binary (see
// chaos_test.go for the suite's rules).

const procTable = "sessions"

// procBed is the bed of a chaos test with processes: the archiver binary,
// `archiver engine` as a process (TTL sweeps every 200 ms, 4 shards
// rolling over every 500 records) and a table on it.
type procBed struct {
	t        *testing.T
	ctx      context.Context
	bin      string
	work     string
	endpoint string
	db       *dynamodb.Client
	stream   string // the table's stream ARN
	ckpt     string // the file store's path
	starts   int

	expirer // wave: small items that expire, keys s-000000, s-000001, ...
}

func newProcBed(t *testing.T) *procBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	b := &procBed{t: t, ctx: ctx, bin: buildArchiver(t), work: t.TempDir()}
	b.ckpt = filepath.Join(b.work, "checkpoints.json")
	eng := startProc(t, b.work, "engine", b.bin, "engine",
		"--listen", "127.0.0.1:0", "--ttl-interval", "200ms",
		"--stream-shards", "4", "--shard-rollover", "500")
	b.endpoint = engineEndpoint(t, eng)
	b.db = enginetest.ClientAt(b.endpoint, "writer")
	enginetest.CreateTable(t, b.db, table(procTable))
	out, err := b.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(procTable)})
	if err != nil {
		t.Fatal(err)
	}
	b.stream = aws.ToString(out.Table.LatestStreamArn)
	b.expirer = expirer{t: t, ctx: ctx, db: b.db, table: procTable, prefix: "s"}
	return b
}

// run starts `archiver run` on the table with the file store, a metrics
// server on a free port and the given flags (sinks and more).
func (b *procBed) run(flags ...string) *proc {
	b.starts++
	name := fmt.Sprintf("run-%02d", b.starts)
	args := append([]string{"run", "--endpoint", b.endpoint, "--table", procTable,
		"--checkpoint", "file://" + b.ckpt, "--worker-id", name,
		"--metrics-addr", "127.0.0.1:0", "--log-level", "info", "--shutdown-timeout", "25s"}, flags...)
	return startProc(b.t, b.work, name, b.bin, args...)
}

// putLarge writes an item like putItems' with a string of size bytes
// beside, whose TTL has passed.
func (b *procBed) putLarge(key string, size int) {
	_, err := b.db.PutItem(b.ctx, &dynamodb.PutItemInput{TableName: aws.String(procTable), Item: map[string]dtypes.AttributeValue{
		keyAttr:   &dtypes.AttributeValueMemberS{Value: key},
		ttlAttr:   &dtypes.AttributeValueMemberN{Value: fmt.Sprint(expiredTTL())},
		"payload": &dtypes.AttributeValueMemberS{Value: "session data for " + key},
		"n":       &dtypes.AttributeValueMemberN{Value: preciseN},
		"blob":    &dtypes.AttributeValueMemberS{Value: strings.Repeat("x", size)},
	}})
	if err != nil {
		b.t.Fatalf("PutItem %s: %v", key, err)
	}
	b.written.add(key)
}

// checkpoints loads the file store's checkpoints (a copy: a process may
// hold the store).
func (b *procBed) checkpoints() map[string]checkpoint.Checkpoint {
	return loadFileCheckpoints(b.t, b.ctx, b.ckpt, b.stream)
}

// alive fails the test if p exited on its own.
func alive(t *testing.T, p *proc) {
	t.Helper()
	if p.exited() {
		t.Fatalf("%s exited on its own: %v\n%s", p.name, p.err, p.tail(30))
	}
}

// stopClean stops p with SIGTERM and wants exit code 0.
func stopClean(t *testing.T, p *proc) {
	t.Helper()
	if err := p.stop(40 * time.Second); err != nil {
		t.Errorf("%s after SIGTERM: %v (want exit code 0)\n%s", p.name, err, p.tail(30))
	}
}

// dirBytes is the size of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestChaosNATSMaxPayload is issue 11's "done when": `archiver run` with
// --dead-letter file://DIR --retry-for 5s and a NATS server (JetStream)
// whose max_payload is 64 KiB. Three expired items of 200 KB among 2,000
// small ones must land in DIR (whole, naming the NATS sink), the small ones
// on JetStream, nothing else is lost, and a clean restart re-delivers
// nothing. A file sink beside NATS witnesses re-deliveries (JetStream
// drops a re-published message with a Nats-Msg-Id it has seen).
func TestChaosNATSMaxPayload(t *testing.T) {
	t.Parallel()
	b := newProcBed(t)
	natsURL := startNATSMaxPayload(t, 64<<10)
	js := natsClient(t, natsURL)
	st, err := js.CreateStream(b.ctx, jetstream.StreamConfig{Name: "ARCHIVE", Subjects: []string{"archiver.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	dlqDir, archDir := filepath.Join(b.work, "dead"), filepath.Join(b.work, "archive")
	flags := []string{"--sink", "nats://" + natsURL, "--sink", "file://" + archDir,
		"--dead-letter", "file://" + dlqDir, "--retry-for", "5s"}
	p := b.run(flags...)

	var small, large []string
	for i := 0; i < 4; i++ {
		small = append(small, b.wave(500)...)
		if i < 3 {
			k := fmt.Sprintf("large-%d", i)
			b.putLarge(k, 200_000)
			large = append(large, k)
		}
	}
	dead, arch := newFileSinkReader(dlqDir), newFileSinkReader(archDir)
	eventually.Wait(t, 120*time.Second, "the large items reach the dead-letter sink, every item the file sink", func() error {
		alive(t, p)
		if err := dead.poll(t).allArrived(large); err != nil {
			return err
		}
		return arch.poll(t).allArrived(b.written.all())
	})
	eventually.Wait(t, 60*time.Second, "JetStream holds every small item", func() error {
		info, err := st.Info(b.ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs < uint64(len(small)) {
			return fmt.Errorf("%d of %d messages", info.State.Msgs, len(small))
		}
		return nil
	})
	stopClean(t, p)

	msgs := readStream(t, b.ctx, st)
	if err := msgs.tally.allArrived(small); err != nil {
		t.Errorf("JetStream: %v", err)
	}
	if msgs.tally.lines != len(small) {
		t.Errorf("JetStream: %d messages, want the %d small items once each", msgs.tally.lines, len(small))
	}
	msgs.tally.checkItems(t, "JetStream")
	dl := dead.poll(t)
	if dl.lines != len(large) {
		t.Errorf("dead-letter sink: %d lines, want the %d large items once each", dl.lines, len(large))
	}
	dl.checkItems(t, "dead-letter sink")
	natsName := "nats://" + natsURL
	for _, k := range large {
		d := dl.dead[k]
		if d == nil || d.Sink != natsName || d.Reason != event.ReasonPermanent || !strings.Contains(d.Error, "max_payload") || dl.kinds[k] != event.Expired {
			t.Errorf("dead letter of %s: kind %s, %+v; want expired, sink %s, reason %s, a max_payload error", k, dl.kinds[k], d, natsName, event.ReasonPermanent)
		}
	}
	if n := dirBytes(t, dlqDir); n < int64(len(large))*200_000 {
		t.Errorf("dead-letter sink: %d bytes for %d items of 200 KB: not whole", n, len(large))
	}
	far := union(msgs.tally, dl)
	if err := far.allArrived(b.written.all()); err != nil {
		t.Errorf("JetStream and the dead-letter sink: %v", err)
	}
	noDuplicates(t, "JetStream and the dead-letter sink", far)
	archived := arch.poll(t)
	checkCovered(t, "file sink", b.checkpoints(), archived)

	// A clean restart re-delivers nothing: new items arrive once, and
	// nothing else is added anywhere.
	lines, deadLines := archived.lines, dl.lines
	again := b.run(flags...)
	sentinels := b.wave(200)
	eventually.Wait(t, 60*time.Second, "the restarted archiver archives new items", func() error {
		alive(t, again)
		return arch.poll(t).allArrived(sentinels)
	})
	checkOps(t, again)
	stopClean(t, again)
	if n := arch.poll(t).lines - lines; n != len(sentinels) {
		t.Errorf("restart after a clean stop: the file sink got %d lines for %d new items (re-delivered %d)", n, len(sentinels), n-len(sentinels))
	}
	if n := dead.poll(t).lines - deadLines; n != 0 {
		t.Errorf("restart after a clean stop: %d lines added to the dead-letter sink", n)
	}
	if msgs := readStream(t, b.ctx, st); msgs.tally.lines != len(small)+len(sentinels) {
		t.Errorf("JetStream after the restart: %d messages, want %d", msgs.tally.lines, len(small)+len(sentinels))
	}
	logSummary(t, b.work)
}

// TestChaosKillWhileDeadLettering: `archiver run` with a file sink, an S3
// sink whose bucket does not exist (every batch fails permanently) and an
// S3 dead-letter sink reached through a proxy that holds S3's answers back
// for two seconds. While items keep expiring, the process is killed with
// SIGKILL once it logged that it sends events to the dead-letter sink, a
// checkpoint passed some of them, and an upload of the dead-letter sink is
// waiting for its answer; then it is restarted. The file sink and the dead-letter sink must each hold every
// item (all of them dead-lettered for the S3 sink), and only events above
// the checkpoints at the kill may have arrived twice.
func TestChaosKillWhileDeadLettering(t *testing.T) {
	t.Parallel()
	b := newProcBed(t)
	s3Endpoint, s3c := startVersity(t)
	px := startProxy(t, strings.TrimPrefix(s3Endpoint, "http://"))
	px.setDelay(2 * time.Second)
	archDir := filepath.Join(b.work, "archive")
	const gone = "gone"
	flags := []string{"--sink", "file://" + archDir,
		"--sink", s3SinkURL(gone, "ttl", s3Endpoint, "flush-interval", "200ms"),
		"--dead-letter", s3SinkURL(s3Bucket, "dlq", px.endpoint(), "flush-interval", "200ms"),
		"--retry-for", "5s",
		// The bucket does not exist: preflight would refuse to start.
		"--skip-preflight"}
	b.wave(500)
	p := b.run(flags...)
	arch, dead := newFileSinkReader(archDir), newS3Reader(s3c, "dlq/")
	eventually.Wait(t, 120*time.Second, "a checkpoint passed dead letters and another dead-letter upload is in flight", func() error {
		alive(t, p)
		b.wave(20)
		data, err := os.ReadFile(p.logPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "sending them to the dead-letter sink") {
			return fmt.Errorf("nothing sent to the dead-letter sink yet")
		}
		if err := dead.poll(t, b.ctx); err != nil {
			return err
		}
		if passed(b.checkpoints(), dead.tally) == 0 {
			return fmt.Errorf("no checkpoint passed a dead letter yet")
		}
		if px.held.Load() == 0 { // last: the kill follows at once
			return fmt.Errorf("no dead-letter upload waiting for its answer")
		}
		return nil
	})
	if !p.kill() {
		t.Fatalf("%s exited on its own before the kill: %v\n%s", p.name, p.err, p.tail(30))
	}
	cps := b.checkpoints()
	if err := dead.poll(t, b.ctx); err != nil {
		t.Fatal(err)
	}
	archBefore, deadBefore := arch.poll(t).deliveries(), dead.tally.deliveries()
	t.Logf("killed %s: %d events in the file sink, %d in the dead-letter sink, %d of them checkpointed",
		p.name, len(archBefore), len(deadBefore), passed(cps, dead.tally))

	px.setDelay(0)
	again := b.run(flags...)
	b.wave(500)
	eventually.Wait(t, 120*time.Second, "every item reaches the file sink and the dead-letter sink", func() error {
		alive(t, again)
		if err := arch.poll(t).allArrived(b.written.all()); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		if err := dead.poll(t, b.ctx); err != nil {
			return err
		}
		return dead.tally.allArrived(b.written.all())
	})
	stopClean(t, again)
	if err := dead.poll(t, b.ctx); err != nil {
		t.Fatal(err)
	}
	archived := arch.poll(t)
	archived.checkItems(t, "file sink")
	dead.tally.checkItems(t, "dead-letter sink")
	checkTail(t, "file sink", cps, archBefore, archived)
	checkTail(t, "dead-letter sink", cps, deadBefore, dead.tally)
	final := b.checkpoints()
	checkCovered(t, "file sink", final, archived)
	checkCovered(t, "dead-letter sink", final, dead.tally)
	s3Name := "s3://" + gone + "/ttl"
	for k, d := range dead.tally.dead {
		if d.Sink != s3Name || d.Reason != event.ReasonPermanent || dead.tally.kinds[k] != event.Expired {
			t.Errorf("dead letter of %s: kind %s, %+v; want expired, sink %s, reason %s", k, dead.tally.kinds[k], d, s3Name, event.ReasonPermanent)
			break
		}
	}
	logSummary(t, b.work)
	t.Logf("%d items; file sink %d lines (%d duplicates), dead-letter sink %d lines in %d objects (%d duplicates)",
		len(b.written.all()), archived.lines, archived.duplicates(), dead.tally.lines, dead.objects, dead.tally.duplicates())
}
