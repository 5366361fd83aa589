package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/event"
)

// TestCrashLoop is issue 5's crash loop: `archiver run` as a real process
// against `archiver engine` as another real process, killed with SIGKILL at
// random moments CRASHLOOP_ROUNDS times (default 5; `make crashloop` runs
// 20) and restarted each time, while a writer keeps adding items whose TTL
// has passed (the engine's sweeper deletes them every 200 ms onto a 4-shard
// stream that rolls shards over every 500 records). At the end the writer
// stops, a last archiver catches up and is stopped with SIGTERM (exit 0
// expected), and every expired key must be in the file sink. Duplicates
// (the killed processes' un-checkpointed tails) are reported, not limited.
// CRASHLOOP_SEED replays a run's kill moments.
func TestCrashLoop(t *testing.T) {
	t.Parallel()
	rounds := 5
	if s := os.Getenv("CRASHLOOP_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("CRASHLOOP_ROUNDS=%q: want a number of rounds", s)
		}
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CRASHLOOP_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CRASHLOOP_SEED=%q: want a number", s)
		}
		seed = n
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	t.Logf("crash loop: %d rounds, CRASHLOOP_SEED=%d", rounds, seed)

	t0 := time.Now()
	bin := buildArchiver(t)
	t.Logf("built the archiver in %v", time.Since(t0).Round(time.Millisecond))
	work := t.TempDir()
	sinkDir := filepath.Join(work, "archive")
	ckpt := filepath.Join(work, "checkpoints.json")

	eng := startProc(t, work, "engine", bin, "engine",
		"--listen", "127.0.0.1:0", "--ttl-interval", "200ms",
		"--stream-shards", "4", "--shard-rollover", "500")
	endpoint := engineEndpoint(t, eng)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db := ddbClient(endpoint, "writer")
	createTable(t, ctx, db, "sessions")
	t.Logf("engine up and table created %v after start", time.Since(t0).Round(time.Millisecond))

	// The writer: 25 expired items every 20 ms until told to stop, and
	// user activity the default sink must not archive: two live items
	// (TTL an hour ahead) per batch, one overwritten (MODIFY), one deleted
	// by the user (REMOVE without the TTL service's identity).
	var written keyLog
	stopWriting := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; ; i += 25 {
			select {
			case <-stopWriting:
				writerDone <- nil
				return
			default:
			}
			keys := keyRange("s", i, 25)
			if err := putItems(ctx, db, "sessions", keys, expiredTTL()); err != nil {
				writerDone <- err
				return
			}
			written.add(keys...)
			live := keyRange("u", i, 2)
			for r := 0; r < 2; r++ { // insert, then modify
				if err := putItems(ctx, db, "sessions", live, time.Now().Add(time.Hour).Unix()); err != nil {
					writerDone <- err
					return
				}
			}
			if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName: aws.String("sessions"),
				Key:       map[string]dtypes.AttributeValue{keyAttr: &dtypes.AttributeValueMemberS{Value: live[0]}},
			}); err != nil {
				writerDone <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() {
		select {
		case <-stopWriting:
		default:
			close(stopWriting)
		}
	}()

	runArgs := []string{"run",
		"--endpoint", endpoint, "--table", "sessions",
		"--checkpoint", "file://" + ckpt,
		"--sink", "file://" + sinkDir,
		"--metrics-addr", "127.0.0.1:0", "--log-level", "info",
		"--shutdown-timeout", "25s",
	}
	start := func(i int) *proc { return startProc(t, work, fmt.Sprintf("run-%02d", i), bin, runArgs...) }

	// Kill rounds. The moments range from the process's start-up (before it
	// read anything) to a few seconds in (mid-stream, between sink write and
	// checkpoint).
	killed := 0
	for i := 0; i < rounds; i++ {
		p := start(i)
		wait := time.Duration(50+rng.IntN(2500)) * time.Millisecond
		time.Sleep(wait)
		if !p.kill() {
			t.Fatalf("round %d: archiver run exited on its own before the kill at %v: %v\n%s", i, wait, p.err, p.tail(30))
		}
		killed++
		got := readFileSink(t, sinkDir)
		t.Logf("round %d: killed after %v; sink holds %d lines, %d keys of %d written", i, wait, got.lines, len(got.byKey), len(written.all()))
	}

	// The last archiver catches up with everything written.
	final := start(rounds)
	time.Sleep(500 * time.Millisecond)
	close(stopWriting)
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}
	keys := written.all()
	catchUp := time.Now()
	var got *tally
	waitFor(t, 120*time.Second, "every expired key reaches the file sink", func() error {
		if final.exited() {
			t.Fatalf("the last archiver run exited on its own: %v\n%s", final.err, final.tail(30))
		}
		got = readFileSink(t, sinkDir)
		return got.allArrived(keys)
	})
	t.Logf("the last archiver caught up %v after the writer stopped", time.Since(catchUp).Round(time.Millisecond))
	stopAt := time.Now()
	if err := final.stop(40 * time.Second); err != nil {
		t.Errorf("archiver run after SIGTERM: %v (want exit code 0)\n%s", err, final.tail(30))
	}
	t.Logf("graceful stop took %v", time.Since(stopAt).Round(time.Millisecond))
	got = readFileSink(t, sinkDir)
	if err := got.allArrived(keys); err != nil {
		t.Errorf("after the graceful stop: %v", err)
	}
	for k, kind := range got.kinds {
		if kind != event.Expired || strings.HasPrefix(k, "u-") {
			t.Errorf("key %s archived as %q; want only expired items (user inserts, modifies and deletes are not archived by default)", k, kind)
		}
	}
	got.checkItems(t, "file sink")
	if got.torn > 0 {
		t.Errorf("%d archive lines in the file sink do not decode (torn by a kill and not repaired on restart)", got.torn)
	}
	dups := got.duplicates()

	// A restart after the clean stop re-delivers nothing: a last batch of
	// expired items arrives exactly once and nothing else is added.
	sentinels := keyRange("after-clean-stop", 0, 200)
	again := start(rounds + 1)
	if err := putItems(ctx, db, "sessions", sentinels, expiredTTL()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the restarted archiver archives a new batch", func() error {
		if again.exited() {
			t.Fatalf("archiver run exited on its own: %v\n%s", again.err, again.tail(30))
		}
		return readFileSink(t, sinkDir).allArrived(sentinels)
	})
	if err := again.stop(40 * time.Second); err != nil {
		t.Errorf("archiver run after SIGTERM: %v (want exit code 0)\n%s", err, again.tail(30))
	}
	after := readFileSink(t, sinkDir)
	if extra := after.lines - got.lines - len(sentinels); extra != 0 {
		t.Errorf("restart after a clean stop: %d lines added for %d new expired items (%d re-delivered), want none re-delivered",
			after.lines-got.lines, len(sentinels), extra)
	}
	for _, k := range sentinels {
		if after.byKey[k] != 1 {
			t.Errorf("restart after a clean stop: %s archived %d times, want once", k, after.byKey[k])
		}
	}

	t.Logf("crash loop: %d kill -9 rounds, %d expired items, %d archive lines, %d duplicate deliveries (%.2f%%), %d torn lines",
		killed, len(keys), got.lines, dups, 100*float64(dups)/float64(max(1, len(keys))), got.torn)
}
