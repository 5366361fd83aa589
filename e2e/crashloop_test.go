package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// TestCrashLoop is issue 5's crash loop: `archiver run` as a real process
// against `archiver engine` as another real process, killed with SIGKILL at
// random moments CRASHLOOP_ROUNDS times (default 5; `make crashloop` runs
// 20) and restarted each time, while a writer keeps adding items whose TTL
// has passed (the engine's sweeper deletes them every 200 ms onto a 4-shard
// stream that rolls shards over every 500 records). At the end the writer
// stops, a last archiver catches up and is stopped with SIGTERM (exit 0
// expected), and every expired key must be in the file sink and in S3
// (versitygw), and exactly once in JetStream (re-deliveries carry the same
// Nats-Msg-Id). Duplicates in the file sink and S3 (the killed processes'
// un-checkpointed tails) are reported, not limited. A restart after the
// clean stop must re-deliver nothing.
// CRASHLOOP_SEED replays a run's kill moments.
func TestCrashLoop(t *testing.T) {
	t.Parallel()
	crashLoop(t, false)
}

// TestCrashLoopLeases is the crash loop with many workers: two `archiver
// run` processes share the stream through the DynamoDB lease store
// (--checkpoint dynamodb://leases?create=true on the engine), and each round
// kills one of them at random and starts a replacement with a new worker ID,
// as ECS replaces a task. The killed worker's shards wait for its leases to
// expire (20 s, the default) before the other worker takes them, so this
// runs only when CRASHLOOP_ROUNDS is set (`make crashloop`) or
// E2E_LEASES=1, not in the default `go test` pass.
func TestCrashLoopLeases(t *testing.T) {
	if os.Getenv("CRASHLOOP_ROUNDS") == "" && os.Getenv("E2E_LEASES") != "1" {
		t.Skip("set CRASHLOOP_ROUNDS (make crashloop) or E2E_LEASES=1: each kill costs a 20 s lease expiry")
	}
	t.Parallel()
	crashLoop(t, true)
}

// crashLoop runs the crash loop with the file store and one process, or
// (leases) with the DynamoDB lease store and two processes.
func crashLoop(t *testing.T, leases bool) {
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
	sr := newFileSinkReader(sinkDir)
	// JetStream beside the file sink: re-deliveries after a kill carry the
	// same Nats-Msg-Id, so the stream must hold each expired record once.
	natsURL := startNATS(t)
	js := natsClient(t, natsURL)
	// And S3 (versitygw): objects are named by stream positions and written
	// with If-None-Match, so a re-delivery never overwrites.
	s3Endpoint, s3c := startVersity(t)
	s3URL := "s3://" + s3Bucket + "/ttl?" + url.Values{
		"endpoint": {s3Endpoint}, "path-style": {"true"}, "region": {"us-east-1"}, "flush-interval": {"1s"},
	}.Encode()
	ckpt := "file://" + filepath.Join(work, "checkpoints.json")
	workers := 1
	if leases {
		ckpt = "dynamodb://leases?create=true"
		workers = 2
	}

	eng := startProc(t, work, "engine", bin, "engine",
		"--listen", "127.0.0.1:0", "--ttl-interval", "200ms",
		"--stream-shards", "4", "--shard-rollover", "500")
	endpoint := engineEndpoint(t, eng)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	db := enginetest.ClientAt(endpoint, "writer")
	enginetest.CreateTable(t, db, table("sessions"))
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ARCHIVE", Subjects: []string{"archiver.>"}, Duplicates: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
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

	// Each process (slot) writes its own sink directory: two file sinks
	// must not append to one file. A replacement gets a new worker ID.
	start := func(i, slot int) *proc {
		name := fmt.Sprintf("run-%02d-w%d", i, slot)
		return startProc(t, work, name, bin, "run",
			"--endpoint", endpoint, "--table", "sessions",
			"--checkpoint", ckpt, "--worker-id", name,
			"--sink", "file://"+filepath.Join(sinkDir, fmt.Sprintf("w%d", slot)),
			"--sink", "nats://"+natsURL,
			"--sink", s3URL,
			"--metrics-addr", "127.0.0.1:0", "--log-level", "info",
			"--shutdown-timeout", "25s")
	}
	running := make([]*proc, workers)
	for slot := 1; slot < workers; slot++ {
		running[slot] = start(0, slot)
	}

	// Kill rounds. The moments range from the process's start-up (before it
	// read anything) to a few seconds in (mid-stream, between sink write and
	// checkpoint).
	killed := 0
	for i := 0; i < rounds; i++ {
		slot := rng.IntN(workers)
		if running[slot] == nil {
			running[slot] = start(i, slot)
		}
		wait := time.Duration(50+rng.IntN(2500)) * time.Millisecond
		time.Sleep(wait)
		p := running[slot]
		if !p.kill() {
			t.Fatalf("round %d: %s exited on its own before the kill: %v\n%s", i, p.name, p.err, p.tail(30))
		}
		running[slot] = nil
		killed++
		got := sr.poll(t)
		t.Logf("round %d: killed %s after %v; sink holds %d lines, %d keys of %d written", i, p.name, wait, got.lines, len(got.byKey), len(written.all()))
	}

	// The last archivers catch up with everything written.
	for slot := range running {
		if running[slot] == nil {
			running[slot] = start(rounds, slot)
		}
	}
	time.Sleep(500 * time.Millisecond)
	close(stopWriting)
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}
	keys := written.all()
	catchUp := time.Now()
	var got *tally
	eventually.Wait(t, 180*time.Second, "every expired key reaches the file sink", func() error {
		for _, p := range running {
			if p.exited() {
				t.Fatalf("%s exited on its own: %v\n%s", p.name, p.err, p.tail(30))
			}
		}
		got = sr.poll(t)
		return got.allArrived(keys)
	})
	t.Logf("the last archivers caught up %v after the writer stopped", time.Since(catchUp).Round(time.Millisecond))
	stopAt := time.Now()
	for _, p := range running {
		p.term()
	}
	for _, p := range running {
		if err := p.stop(40 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v (want exit code 0)\n%s", p.name, err, p.tail(30))
		}
	}
	t.Logf("graceful stop took %v", time.Since(stopAt).Round(time.Millisecond))
	got = sr.poll(t)
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
	dups, lines, torn := got.duplicates(), got.lines, got.torn

	// A restart after the clean stop re-delivers nothing: a last batch of
	// expired items arrives exactly once and nothing else is added.
	sentinels := keyRange("after-clean-stop", 0, 200)
	again := start(rounds+1, 0)
	if err := putItems(ctx, db, "sessions", sentinels, expiredTTL()); err != nil {
		t.Fatal(err)
	}
	eventually.Wait(t, 60*time.Second, "the restarted archiver archives a new batch", func() error {
		if again.exited() {
			t.Fatalf("archiver run exited on its own: %v\n%s", again.err, again.tail(30))
		}
		return sr.poll(t).allArrived(sentinels)
	})
	checkOps(t, again)
	if err := again.stop(40 * time.Second); err != nil {
		t.Errorf("archiver run after SIGTERM: %v (want exit code 0)\n%s", err, again.tail(30))
	}
	after := sr.poll(t)
	if extra := after.lines - lines - len(sentinels); extra != 0 {
		t.Errorf("restart after a clean stop: %d lines added for %d new expired items (%d re-delivered), want none re-delivered",
			after.lines-lines, len(sentinels), extra)
	}
	for _, k := range sentinels {
		if after.byKey[k] != 1 {
			t.Errorf("restart after a clean stop: %s archived %d times, want once", k, after.byKey[k])
		}
	}

	// JetStream: every expired record exactly once (de-duplicated by
	// Nats-Msg-Id across the kills), nothing else.
	all := append(append([]string(nil), keys...), sentinels...)
	eventually.Wait(t, 60*time.Second, "JetStream holds every expired item", func() error {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs < uint64(len(all)) {
			return fmt.Errorf("%d of %d messages", info.State.Msgs, len(all))
		}
		return nil
	})
	msgs := readStream(t, ctx, st)
	if err := msgs.tally.allArrived(all); err != nil {
		t.Errorf("JetStream: %v", err)
	}
	if msgs.tally.lines != len(all) || len(msgs.msgIDs) != len(all) {
		t.Errorf("JetStream: %d messages, %d distinct Nats-Msg-Id, want %d each (de-duplication across kills)", msgs.tally.lines, len(msgs.msgIDs), len(all))
	}
	msgs.tally.checkItems(t, "JetStream")

	// S3: every expired item, after the clean stops flushed the buffers.
	s3r := newS3Reader(s3c, "ttl/")
	if err := s3r.poll(t, ctx); err != nil {
		t.Fatal(err)
	}
	if err := s3r.tally.allArrived(all); err != nil {
		t.Errorf("S3: %v", err)
	}
	s3r.tally.checkItems(t, "S3")

	logSummary(t, work)

	kept, _ := filepath.Glob(filepath.Join(sinkDir, "w*", "_archiver", "torn", "*", "*", "*.jsonl.*"))
	t.Logf("crash loop: %d kill -9 rounds, %d expired items, %d archive lines, %d duplicate deliveries (%.2f%%), %d torn lines, %d torn tails cut off and kept aside",
		killed, len(keys), lines, dups, 100*float64(dups)/float64(max(1, len(keys))), torn, len(kept))
	t.Logf("JetStream: %d messages for %d expired items; S3: %d lines in %d objects (%d duplicates)",
		msgs.tally.lines, len(all), s3r.tally.lines, s3r.objects, s3r.tally.duplicates())
}

// checkOps checks the running archiver's health server (its address is in
// the "archiver running" log line): /readyz answers 200 and /metrics counts
// the expired events it archived.
func checkOps(t *testing.T, p *proc) {
	t.Helper()
	addr := logField(p.logPath, "archiver running", "metrics_addr")
	if addr == "" {
		t.Errorf("%s: no metrics_addr in its \"archiver running\" log line", p.name)
		return
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	eventually.Wait(t, 30*time.Second, "/readyz answers 200", func() error {
		if code, body := get("/readyz"); code != http.StatusOK {
			return fmt.Errorf("status %d: %s", code, body)
		}
		return nil
	})
	_, metrics := get("/metrics")
	re := regexp.MustCompile(`(?m)^archiver_events_total\{kind="expired",table="sessions"\} (\d+)`)
	m := re.FindStringSubmatch(metrics)
	if m == nil {
		t.Errorf("/metrics has no archiver_events_total{kind=\"expired\",table=\"sessions\"}")
	} else if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("/metrics: archiver_events_total{kind=\"expired\",table=\"sessions\"} is 0 after archiving")
	}
}

// logField returns a field of the first JSON log line with message msg.
func logField(logPath, msg, field string) string {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != msg {
			continue
		}
		if v, ok := l[field].(string); ok {
			return v
		}
	}
	return ""
}

// logSummary logs how often each warning and error message appears in the
// archiver processes' logs (a diagnostic, not an assertion). E2E_KEEP=DIR
// copies the logs there for a closer look.
func logSummary(t *testing.T, dir string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "run-*.log"))
	if d := os.Getenv("E2E_KEEP"); d != "" {
		for _, p := range paths {
			data, _ := os.ReadFile(p)
			_ = os.WriteFile(filepath.Join(d, filepath.Base(p)), data, 0o644)
		}
	}
	counts, sample := map[string]int{}, map[string]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			var l struct{ Level, Logger, Msg, Error string }
			if json.Unmarshal([]byte(line), &l) != nil || (l.Level != "warn" && l.Level != "error") {
				continue
			}
			key := fmt.Sprintf("%s %s: %s", l.Level, l.Logger, l.Msg)
			counts[key]++
			if sample[key] == "" {
				sample[key] = l.Error
			}
		}
	}
	for m, n := range counts {
		t.Logf("archiver logs: %dx %s (e.g. %.700s)", n, m, sample[m])
	}
}
