package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

// pipelineItems is E2E_ITEMS, by default 50,000, but 5,000 with -short or
// under the race detector (which makes the engine about ten times slower:
// 50,000 items would take minutes on 2 cores; `go test -run
// TestPipelineS3AndJetStream ./e2e/` without -race runs the full
// 50,000 in about a minute).
func pipelineItems(t *testing.T) int {
	if s := os.Getenv("E2E_ITEMS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("E2E_ITEMS=%q: want a positive number", s)
		}
		return n
	}
	if testing.Short() || raceEnabled {
		return 5000
	}
	return 50000
}

// TestPipelineS3AndJetStream is issue 4's end-to-end test: the engine
// (in-process, over HTTP), the consumer with a file checkpoint, and three
// sinks opened from their URLs as `archiver run` opens them: S3 (versitygw)
// and NATS JetStream (embedded server, a stream capturing archiver.>) with
// the default events=expired, and a file sink with events=expired,deleted
// that proves the user deletes were read and classified. E2E_ITEMS items
// (default 50,000) expire through the engine's TTL process; every one must
// reach S3 (gzip JSONL objects, decoded) and JetStream (one message per
// record, unique Nats-Msg-Id), and none of the user deletes may reach either.
func TestPipelineS3AndJetStream(t *testing.T) {
	t.Parallel()
	n := pipelineItems(t)
	const deletes = 300
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The servers.
	bed := enginetest.Start(t, engine.Options{
		TTLInterval: 200 * time.Millisecond, StreamShards: 4, ShardRolloverRecords: 5000, Logger: zap.NewNop(),
	})
	srv := bed.Server
	s3Endpoint, s3c := startVersity(t)
	natsURL := startNATS(t)
	js := natsClient(t, natsURL)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ARCHIVE", Subjects: []string{"archiver.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	db := enginetest.ClientAt(srv.Endpoint(), "writer")
	enginetest.CreateTable(t, db, table("sessions"))

	// The archiver, wired as `archiver run` wires it.
	store, err := checkpoint.OpenFile(filepath.Join(t.TempDir(), "checkpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	fileDir := t.TempDir()
	sinkURLs := []string{
		"s3://" + s3Bucket + "/ttl?" + url.Values{
			"endpoint": {s3Endpoint}, "path-style": {"true"}, "region": {"us-east-1"},
			"flush-interval": {"1s"}, "flush-bytes": {"1MiB"},
		}.Encode(),
		"nats://" + natsURL + "?subject=archiver.{table}.{kind}",
		"file://" + fileDir + "?events=expired,deleted",
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	var routes []consumer.Route
	for _, u := range sinkURLs {
		s, kinds, err := sinks.Open(ctx, u, sinks.Options{Logger: log.Named("sinks"), AWSConfig: s3Config})
		if err != nil {
			t.Fatalf("sinks.Open(%s): %v", u, err)
		}
		routes = append(routes, consumer.Route{Sink: s, Kinds: kinds})
	}
	cons, err := consumer.New(consumer.Config{
		Options: shard.Options{
			Streams:    enginetest.StreamsClientAt(srv.Endpoint(), "archiver"),
			TableNames: []string{"sessions"}, Logger: log,
		},
		Tables: enginetest.ClientAt(srv.Endpoint(), "archiver"), Store: store, Routes: routes,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan struct{})
	var runErr error
	go func() { runErr = cons.Run(runCtx); close(runDone) }()
	t.Cleanup(func() {
		stopRun()
		select {
		case <-runDone:
		case <-time.After(60 * time.Second):
			t.Error("consumer did not stop")
		}
	})

	// User deletes first (items with a TTL an hour ahead, deleted by
	// DeleteItem: REMOVE records without userIdentity), then the expiring
	// items from four writers at once, with more user deletes among them.
	start := time.Now()
	delKeys := keyRange("del", 0, deletes)
	if err := putItems(ctx, db, "sessions", delKeys, time.Now().Add(time.Hour).Unix()); err != nil {
		t.Fatal(err)
	}
	deleteItems(t, ctx, db, delKeys[:deletes/2])
	keys := keyRange("exp", 0, n)
	var wg sync.WaitGroup
	const writers = 4
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(part []string) {
			defer wg.Done()
			errs <- putItems(ctx, db, "sessions", part, expiredTTL())
		}(keys[w*n/writers : (w+1)*n/writers])
	}
	deleteItems(t, ctx, db, delKeys[deletes/2:])
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d expiring items and %d deleted ones in %v", n, deletes, time.Since(start).Round(time.Millisecond))

	// Wait for the far ends.
	s3r := newS3Reader(s3c, "ttl/")
	eventually.Wait(t, 5*time.Minute, "every expired item reaches S3", func() error {
		if err := s3r.poll(t, ctx); err != nil {
			return err
		}
		return s3r.tally.allArrived(keys)
	})
	t.Logf("all %d expired items in S3 (%d objects) %v after writing began", n, s3r.objects, time.Since(start).Round(time.Millisecond))
	eventually.Wait(t, 2*time.Minute, "JetStream holds a message per expired item", func() error {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs < uint64(n) {
			return fmt.Errorf("%d of %d messages", info.State.Msgs, n)
		}
		return nil
	})
	fileR := newFileSinkReader(fileDir)
	eventually.Wait(t, 2*time.Minute, "the file sink holds every user delete", func() error {
		return fileR.poll(t).allArrived(delKeys)
	})
	t.Logf("all sinks complete %v after writing began", time.Since(start).Round(time.Millisecond))

	// A graceful stop flushes whatever the sinks still hold: after it,
	// nothing more can arrive, and the checks are final.
	stopRun()
	select {
	case <-runDone:
		if runErr != nil {
			t.Errorf("consumer.Run: %v", runErr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("consumer did not stop within 60s")
	}

	if err := s3r.poll(t, ctx); err != nil {
		t.Fatal(err)
	}
	msgs := readStream(t, ctx, st)
	fileT := fileR.poll(t)
	s3r.tally.checkItems(t, "S3")
	msgs.tally.checkItems(t, "JetStream")
	fileT.checkItems(t, "file sink")
	for subj, n := range msgs.subjects {
		if subj != "archiver.sessions.expired" {
			t.Errorf("JetStream: %d messages on subject %s, want archiver.sessions.expired", n, subj)
		}
	}
	for _, k := range s3r.keys {
		if !s3KeyRE.MatchString(k) {
			t.Errorf("S3 object key %s does not match %s", k, s3KeyRE)
		}
	}
	checkFarEnd(t, "S3", s3r.tally, keys, delKeys)
	checkFarEnd(t, "JetStream", msgs.tally, keys, delKeys)
	if len(msgs.msgIDs) != n || msgs.tally.lines != n {
		t.Errorf("JetStream: %d messages with %d distinct Nats-Msg-Id, want %d each (one per expired record)", msgs.tally.lines, len(msgs.msgIDs), n)
	}
	if msgs.kinds["expired"] != msgs.tally.lines {
		t.Errorf("JetStream Archiver-Kind headers %v, want only expired", msgs.kinds)
	}
	for _, k := range delKeys {
		if got := fileT.kinds[k]; got != event.Deleted {
			t.Errorf("file sink (events=expired,deleted): user delete %s archived as %q, want deleted", k, got)
			break
		}
	}
	if err := fileT.allArrived(keys); err != nil {
		t.Errorf("file sink: %v", err)
	}
	t.Logf("%d expired, %d user deletes: S3 %d lines in %d objects (%d duplicates), JetStream %d messages, file sink %d lines",
		n, deletes, s3r.tally.lines, s3r.objects, s3r.tally.duplicates(), msgs.tally.lines, fileT.lines)
}

// s3KeyRE is the Hive-style object key issue 4 asks for.
var s3KeyRE = regexp.MustCompile(`^ttl/table=sessions/kind=expired/dt=\d{4}-\d{2}-\d{2}/hr=\d{2}/us-east-1\.shardId-[^/.]+-\d+-\d+\.jsonl\.gz$`) // the engine's Region

// checkFarEnd asserts that every expired key arrived as kind expired and no
// user delete arrived at all.
func checkFarEnd(t *testing.T, name string, ta *tally, expired, deleted []string) {
	t.Helper()
	if err := ta.allArrived(expired); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	for _, k := range deleted {
		if ta.byKey[k] > 0 {
			t.Errorf("%s: user delete %s reached an events=expired sink (%d times, kind %s)", name, k, ta.byKey[k], ta.kinds[k])
		}
	}
	bad := 0
	for k, kind := range ta.kinds {
		if kind != event.Expired {
			bad++
			if bad <= 3 {
				t.Errorf("%s: key %s arrived as kind %q, want expired", name, k, kind)
			}
		}
	}
}

func deleteItems(t *testing.T, ctx context.Context, db *dynamodb.Client, keys []string) {
	t.Helper()
	for _, k := range keys {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String("sessions"),
			Key:       map[string]dtypes.AttributeValue{keyAttr: &dtypes.AttributeValueMemberS{Value: k}},
		}); err != nil {
			t.Fatalf("DeleteItem %s: %v", k, err)
		}
	}
}
