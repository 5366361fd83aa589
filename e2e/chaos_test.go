package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/lease"
	"github.com/ttl-archiver/archiver/sinks"
)

// The chaos suite (issue 11): each test breaks one part of the pipeline in
// a way the dead-letter rules were made for, and counts every expected
// expired item at the far end, the archive and the dead-letter sink
// together. Nothing may be lost; an event may arrive twice only when it was
// above its shard's checkpoint when a process died (the un-checkpointed
// tail). The in-process tests here run on faultEnv (engine, consumer and
// file sink in the test's process, fault hooks at hand); chaos_proc_test.go
// runs the real `archiver run` binary.

// union is what several far ends hold together (an archive and the
// dead-letter sink).
func union(ts ...*tally) *tally {
	u := newTally()
	for _, ta := range ts {
		ta.mu.Lock()
		for k, n := range ta.byKey {
			u.byKey[k] += n
		}
		for k, kind := range ta.kinds {
			u.kinds[k] = kind
		}
		for id, n := range ta.events {
			u.events[id] += n
		}
		for id, at := range ta.at {
			u.at[id] = at
		}
		for k, d := range ta.dead {
			u.dead[k] = d
		}
		u.lines += ta.lines
		u.torn += ta.torn
		u.nbad += ta.nbad
		u.bad = append(u.bad, ta.bad...)
		ta.mu.Unlock()
	}
	return u
}

// deliveries copies the tally's deliveries per event ID.
func (ta *tally) deliveries() map[string]int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	m := make(map[string]int, len(ta.events))
	for id, n := range ta.events {
		m[id] = n
	}
	return m
}

// covers reports whether a shard's checkpoint cp passed sequence number
// seq.
func covers(cp checkpoint.Checkpoint, seq string) bool {
	return cp.Finished || (cp.SequenceNumber != "" && seq != "" && event.CompareSequence(seq, cp.SequenceNumber) <= 0)
}

// passed is how many of the events at a far end the checkpoints passed.
func passed(cps map[string]checkpoint.Checkpoint, far *tally) int {
	far.mu.Lock()
	defer far.mu.Unlock()
	n := 0
	for _, at := range far.at {
		if covers(cps[at.shard], at.seq) {
			n++
		}
	}
	return n
}

// checkTail checks what a crash or a fault may cost. When it struck, the
// checkpoints were cps (by shard) and the far end, which is to get every
// event, held before (deliveries by event ID): every event the checkpoints
// passed must have been at the far end already (a checkpoint never passes
// an unacknowledged record), and only events above them, the
// un-checkpointed tail, may have been delivered again since. after is the
// far end at the end of the test.
func checkTail(t *testing.T, where string, cps map[string]checkpoint.Checkpoint, before map[string]int, after *tally) {
	t.Helper()
	after.mu.Lock()
	defer after.mu.Unlock()
	early, again, tail := 0, 0, 0
	for id, n := range after.events {
		at := after.at[id]
		passed := covers(cps[at.shard], at.seq)
		if !passed {
			tail += n - 1
		}
		switch {
		case passed && before[id] == 0:
			if early++; early <= 3 {
				t.Errorf("%s: event %s (shard %s, sequence %s) was checkpointed before it was at the far end", where, id, at.shard, at.seq)
			}
		case passed && n > before[id]:
			if again++; again <= 3 {
				t.Errorf("%s: event %s (shard %s, sequence %s, checkpoint %+v) was delivered again although the checkpoint had passed it", where, id, at.shard, at.seq, cps[at.shard])
			}
		}
	}
	if early+again > 0 {
		t.Errorf("%s: %d events checkpointed before they were delivered, %d checkpointed events delivered again", where, early, again)
	}
	t.Logf("%s: %d duplicate deliveries, all of the un-checkpointed tail", where, tail)
}

// checkCovered checks that after a graceful stop the checkpoints passed
// every event the far end holds: nothing delivered is left for a restart
// to send again, and no shard stalled behind an event it could not
// deliver.
func checkCovered(t *testing.T, where string, cps map[string]checkpoint.Checkpoint, far *tally) {
	t.Helper()
	far.mu.Lock()
	defer far.mu.Unlock()
	n := 0
	for id, at := range far.at {
		if at.seq != "" && !covers(cps[at.shard], at.seq) {
			if n++; n <= 3 {
				t.Errorf("%s: event %s (shard %s, sequence %s) delivered but not checkpointed after a graceful stop (checkpoint %+v)", where, id, at.shard, at.seq, cps[at.shard])
			}
		}
	}
	if n > 3 {
		t.Errorf("%s: %d delivered events not checkpointed after a graceful stop", where, n)
	}
}

// noDuplicates fails the test if an event arrived more than once: where
// nothing crashed, nothing is re-delivered.
func noDuplicates(t *testing.T, where string, ta *tally) {
	t.Helper()
	if d := ta.duplicates(); d > 0 {
		t.Errorf("%s: %d duplicate deliveries without a crash", where, d)
	}
}

// loadFileCheckpoints loads the checkpoints a file store keeps at path. It
// opens a copy, so that it works while a worker holds the store's lock.
func loadFileCheckpoints(t *testing.T, ctx context.Context, path, streamARN string) map[string]checkpoint.Checkpoint {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]checkpoint.Checkpoint{}
	}
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "checkpoints.json")
	if err := os.WriteFile(cp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := checkpoint.OpenFile(cp)
	if err != nil {
		t.Fatalf("opening a copy of %s: %v", path, err)
	}
	defer fs.Close()
	cps, err := fs.Load(ctx, streamARN)
	if err != nil {
		t.Fatalf("loading the checkpoints of %s: %v", path, err)
	}
	return cps
}

// checkpoints loads the env's checkpoints: from a copy of the file store
// (one worker), or from the lease table (once the workers stopped).
func (env *faultEnv) checkpoints() map[string]checkpoint.Checkpoint {
	t := env.t
	if env.workers == 1 {
		return loadFileCheckpoints(t, env.ctx, filepath.Join(env.dir, "checkpoints.json"), env.stream)
	}
	ls, err := lease.Open(env.ctx, lease.Options{
		Client: enginetest.ClientAt(env.srv.Endpoint(), "lease-checker"), Table: "leases", WorkerID: "checker",
	})
	if err != nil {
		t.Fatalf("opening the lease table: %v", err)
	}
	defer ls.Close()
	cps, err := checkpoint.NewDynamo(ls).Load(env.ctx, env.stream)
	if err != nil {
		t.Fatalf("loading the lease table's checkpoints: %v", err)
	}
	return cps
}

// deadDir is where the workers' dead-letter file sinks (fileDeadLetter)
// write.
func (env *faultEnv) deadDir() string { return filepath.Join(env.dir, "dead") }

// fileDeadLetter is a configure step: each worker gets a file dead-letter
// sink of its own under env.deadDir() and the given RetryFor.
func (env *faultEnv) fileDeadLetter(retryFor time.Duration) func(inst string, c *consumer.Config) {
	return func(inst string, c *consumer.Config) {
		s, err := sinks.NewFileSink(filepath.Join(env.deadDir(), inst), sinks.Options{Logger: c.Logger})
		if err != nil {
			env.t.Fatal(err)
		}
		c.DeadLetter, c.RetryFor = s, retryFor
	}
}

// ---- a poison record ----

// corruptingFront serves the engine's API on a server of its own and
// passes every answer on unchanged, except GetRecords answers holding the
// expiry (REMOVE) of a key in corrupt: that record is changed by corrupt's
// function, every time it is read. The engine only ever produces valid
// records; this is how a poison record gets in. It returns the endpoint.
func corruptingFront(t *testing.T, env *faultEnv, corrupt map[string]func(rec map[string]any)) string {
	h := env.srv.Engine()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "DynamoDBStreams_20120810.GetRecords" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			body = corruptRecords(t, body, corrupt)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(front.Close)
	return front.URL
}

// corruptRecords applies corrupt to the REMOVE records of its keys in a
// GetRecords answer.
func corruptRecords(t *testing.T, body []byte, corrupt map[string]func(rec map[string]any)) []byte {
	hit := false
	for k := range corrupt {
		if bytes.Contains(body, []byte(strconv.Quote(k))) {
			hit = true
		}
	}
	if !hit {
		return body
	}
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Errorf("corrupting a GetRecords answer: %v", err)
		return body
	}
	recs, _ := out["Records"].([]any)
	for _, r := range recs {
		rec, _ := r.(map[string]any)
		d, _ := rec["dynamodb"].(map[string]any)
		keys, _ := d["Keys"].(map[string]any)
		id, _ := keys[keyAttr].(map[string]any)
		k, _ := id["S"].(string)
		if f := corrupt[k]; f != nil && rec["eventName"] == "REMOVE" {
			f(rec)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Errorf("corrupting a GetRecords answer: %v", err)
		return body
	}
	return b
}

// startCorrupted starts the workers reading through a corruptingFront
// (corrupt as there), with a file dead-letter sink.
func (env *faultEnv) startCorrupted(corrupt map[string]func(rec map[string]any)) {
	front := corruptingFront(env.t, env, corrupt)
	dl := env.fileDeadLetter(time.Minute)
	env.configure = func(inst string, c *consumer.Config) {
		dl(inst, c)
		c.Streams = enginetest.StreamsClientAt(front, "reader-"+inst)
	}
	env.start()
}

// dropSequenceNumber makes a record malformed: no SequenceNumber.
func dropSequenceNumber(rec map[string]any) {
	delete(rec["dynamodb"].(map[string]any), "SequenceNumber")
}

// TestChaosPoisonRecord: two poison records among 10,000 expiries, one
// with an eventName no stream produces ("PUT"), one without a
// SequenceNumber, with a file dead-letter sink. Each poison record must be
// in the dead-letter sink as kind undecodable with its raw record, every
// other item in the archive, and the shards must not stall: after a
// graceful stop the checkpoints pass everything delivered.
func TestChaosPoisonRecord(t *testing.T) {
	t.Parallel()
	const n = 10000
	env := newFaultEnv(t, 1)
	keys := keyRange("f", 0, n)
	badName, noSeq := keys[n/3], keys[2*n/3]
	env.startCorrupted(map[string]func(map[string]any){
		badName: func(rec map[string]any) { rec["eventName"] = "PUT" },
		noSeq:   dropSequenceNumber,
	})
	for i := 0; i < n; i += n / 5 {
		env.wave(n / 5)
	}
	env.written.drop([]string{badName, noSeq})
	dead := newFileSinkReader(env.deadDir())
	eventually.Wait(t, 60*time.Second, "both poison records reach the dead-letter sink", func() error {
		return dead.poll(t).allArrived([]string{badName, noSeq})
	})
	arch := env.finish()
	dl2 := dead.poll(t)

	if lost, _ := arch.missing([]string{badName, noSeq}); lost != 2 {
		t.Errorf("archive: a poison record was archived as an event")
	}
	for k, want := range map[string]string{badName: `"eventName":"PUT"`, noSeq: `"eventName":"REMOVE"`} {
		d := dl2.dead[k]
		switch {
		case dl2.kinds[k] != event.Undecodable:
			t.Errorf("dead letter of %s: kind %q, want %q", k, dl2.kinds[k], event.Undecodable)
		case d == nil || d.Reason != event.ReasonUndecodable || d.Error == "" || d.Sink != "":
			t.Errorf("dead letter of %s: %+v, want reason %q, an error and no sink", k, d, event.ReasonUndecodable)
		case !bytes.Contains(d.Record, []byte(want)) || !bytes.Contains(d.Record, []byte(strconv.Quote(k))):
			t.Errorf("dead letter of %s: raw record %s, want its key and %s", k, d.Record, want)
		case k == noSeq && bytes.Contains(d.Record, []byte("SequenceNumber")):
			t.Errorf("dead letter of %s: raw record %s has a SequenceNumber, want it as read (without)", k, d.Record)
		}
	}
	if len(dl2.byKey) != 2 {
		t.Errorf("dead-letter sink holds %d keys, want only the 2 poison records", len(dl2.byKey))
	}
	far := union(arch, dl2)
	noDuplicates(t, "archive and dead-letter sink", far)
	checkCovered(t, "archive and dead-letter sink", env.checkpoints(), far)
}

// TestChaosMalformedLastRecordThenNewIterator: a malformed record that is
// the last of its GetRecords answer must not become the reader's resume
// position. When the reader then needs a new iterator (here every iterator
// expires), it resumes after the last well-formed record: nothing is read,
// archived or dead-lettered twice.
func TestChaosMalformedLastRecordThenNewIterator(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t, 1)
	noSeq := keyRange("f", 100, 1)[0] // the first item of the second wave
	env.startCorrupted(map[string]func(map[string]any){noSeq: dropSequenceNumber})
	env.waitArrived("the first wave", env.wave(100))
	env.wave(1) // its expiry is the last record its reader gets
	env.written.drop([]string{noSeq})
	dead := newFileSinkReader(env.deadDir())
	eventually.Wait(t, 60*time.Second, "the malformed record reaches the dead-letter sink", func() error {
		return dead.poll(t).allArrived([]string{noSeq})
	})
	env.srv.Engine().ExpireIterators()
	env.waitArrived("a wave read with new iterators", env.wave(100))
	arch := env.finish()
	dl2 := dead.poll(t)
	t.Logf("dead-letter copies of %s: %d", noSeq, dl2.byKey[noSeq])
	far := union(arch, dl2)
	noDuplicates(t, "archive and dead-letter sink", far)
	checkCovered(t, "archive and dead-letter sink", env.checkpoints(), far)
}

// ---- S3 faults ----

// tcpProxy forwards TCP connections to a server and injects what the
// server cannot do by itself: being unreachable for a while (down: every
// open connection is cut and new ones are closed at once), or answering
// late (every chunk of the server's answers waits delay before it is
// passed on).
type tcpProxy struct {
	ln     net.Listener
	target string
	down   atomic.Bool
	delay  atomic.Int64 // nanoseconds
	held   atomic.Int32 // chunks of answers waiting now
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

// startProxy listens on a free loopback port and forwards to target
// (host:port) until the test ends.
func startProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.down.Load() {
				c.Close()
				continue
			}
			go p.forward(c)
		}
	}()
	return p
}

// endpoint is the proxy's URL.
func (p *tcpProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

// setDown makes the server unreachable through the proxy (cutting every
// open connection) or reachable again.
func (p *tcpProxy) setDown(down bool) {
	p.down.Store(down)
	if down {
		p.cut()
	}
}

// setDelay makes every chunk of the server's answers wait d.
func (p *tcpProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

// cut closes every open connection.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *tcpProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down.Load() {
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *tcpProxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		client.Close()
		server.Close()
		return
	}
	go func() {
		_, _ = io.Copy(server, client)
		server.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				p.held.Add(1)
				time.Sleep(d)
				p.held.Add(-1)
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	server.Close()
}

// s3SinkURL is the URL of an S3 sink writing to bucket/prefix on a
// versitygw at endpoint, with more URL parameters as name, value pairs.
func s3SinkURL(bucket, prefix, endpoint string, params ...string) string {
	// Manifests every second: a shard's checkpoint waits for its range's
	// manifest (issue 27), and the default 10 minutes would hold every
	// checkpoint for the whole test.
	q := url.Values{"endpoint": {endpoint}, "path-style": {"true"}, "region": {"us-east-1"}, "manifest-interval": {"1s"}}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}

// openSink opens a sink from its URL as `archiver run` does, for a
// worker's consumer (its logger and metrics registry).
func openSink(t testing.TB, ctx context.Context, rawURL string, c *consumer.Config) sinks.Sink {
	t.Helper()
	s, _, err := sinks.Open(ctx, rawURL, sinks.Options{Logger: c.Logger, Registerer: c.Registerer, AWSConfig: s3Config})
	if err != nil {
		t.Fatalf("sinks.Open(%s): %v", rawURL, err)
	}
	return s
}

// waitS3 waits until every key of keys is in the S3 reader's objects.
func waitS3(t *testing.T, ctx context.Context, r *s3Reader, what string, keys []string) {
	t.Helper()
	eventually.Wait(t, 120*time.Second, what, func() error {
		if err := r.poll(t, ctx); err != nil {
			return err
		}
		return r.tally.allArrived(keys)
	})
}

// TestChaosS3Outage: S3 (versitygw, behind a proxy) is unreachable for 30 s
// (sinkOutage: 5 s with -short) while items keep expiring, with no
// dead-letter sink, then back. Every expired item must reach S3, and no
// event the checkpoint had passed when the outage began may be written
// again.
func TestChaosS3Outage(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t, 1)
	s3Endpoint, s3c := startVersity(t)
	px := startProxy(t, strings.TrimPrefix(s3Endpoint, "http://"))
	sinkURL := s3SinkURL(s3Bucket, "ttl", px.endpoint(), "flush-interval", "500ms")
	env.configure = func(_ string, c *consumer.Config) {
		c.Routes = append(c.Routes, consumer.Route{Sink: openSink(t, env.ctx, sinkURL, c)})
	}
	env.start()
	s3r := newS3Reader(s3c, "ttl/")
	waitS3(t, env.ctx, s3r, "the first wave reaches S3", env.wave(1000))

	px.setDown(true)
	cps := env.checkpoints()
	if err := s3r.poll(t, env.ctx); err != nil {
		t.Fatal(err)
	}
	before := s3r.tally.deliveries()
	outage := sinkOutage()
	for end := time.Now().Add(outage); time.Now().Before(end); {
		env.wave(100)
		time.Sleep(time.Second)
	}
	px.setDown(false)
	back := time.Now()
	env.wave(500)
	waitS3(t, env.ctx, s3r, "every item reaches S3 after the outage", env.written.all())
	t.Logf("S3 down for %v; caught up %v after it came back", outage, time.Since(back).Round(time.Millisecond))
	env.finish()
	if err := s3r.poll(t, env.ctx); err != nil {
		t.Fatal(err)
	}
	s3r.tally.checkItems(t, "S3")
	checkTail(t, "S3", cps, before, s3r.tally)
	checkCovered(t, "S3", env.checkpoints(), s3r.tally)
	t.Logf("S3: %d lines in %d objects for %d items, %d duplicates", s3r.tally.lines, s3r.objects, len(env.written.all()), s3r.tally.duplicates())
}

// skippedKeys lists the bucket's keys the reader skips (coverage manifests,
// the archiver's markers): deleteBucket deletes those unread, and data
// objects only once r has read them.
func skippedKeys(ctx context.Context, c *s3.Client) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(s3Bucket)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", s3Bucket, err)
		}
		for _, o := range out.Contents {
			if k := aws.ToString(o.Key); strings.Contains(k, "_manifests/") || strings.Contains(k, "_archiver/") {
				keys = append(keys, k)
			}
		}
	}
	return keys, nil
}

// deleteBucket deletes the bucket while a sink writes to it: every object
// is read into r first (what the bucket held still counts at the far
// end), then deleted, until DeleteBucket finds the bucket empty.
func deleteBucket(t *testing.T, ctx context.Context, r *s3Reader) {
	t.Helper()
	deleted := map[string]bool{}
	for attempt := 0; ; attempt++ {
		if err := r.poll(t, ctx); err != nil {
			t.Fatal(err)
		}
		skipped, err := skippedKeys(ctx, r.client)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range append(skipped, r.keys...) {
			if deleted[k] {
				continue
			}
			if _, err := r.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(k)}); err != nil {
				t.Fatalf("DeleteObject %s: %v", k, err)
			}
			deleted[k] = true
		}
		_, err = r.client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(s3Bucket)})
		if err == nil {
			t.Logf("bucket deleted with the %d objects it held", len(deleted))
			return
		}
		if attempt == 200 {
			t.Fatalf("DeleteBucket: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChaosBucketDeleted: the S3 sink's bucket is deleted while items keep
// expiring, with a file dead-letter sink (retry-for 5 s; a missing bucket
// is a permanent failure anyway). S3 (as it was before the deletion) and
// the dead-letter sink together must hold every expired item, everything
// expired after the deletion must be in the dead-letter sink naming the S3
// sink, and the file sink beside S3 must get everything.
func TestChaosBucketDeleted(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t, 1)
	s3Endpoint, s3c := startVersity(t)
	sinkURL := s3SinkURL(s3Bucket, "ttl", s3Endpoint, "flush-interval", "500ms")
	dl := env.fileDeadLetter(5 * time.Second)
	var s3Name string
	env.configure = func(inst string, c *consumer.Config) {
		dl(inst, c)
		s := openSink(t, env.ctx, sinkURL, c)
		s3Name = s.Name()
		c.Routes = append(c.Routes, consumer.Route{Sink: s})
	}
	env.start()
	s3r := newS3Reader(s3c, "ttl/")
	waitS3(t, env.ctx, s3r, "the first wave reaches S3", env.wave(1000))
	env.wave(300) // on its way while the bucket goes
	deleteBucket(t, env.ctx, s3r)
	var after []string
	for i := 0; i < 3; i++ {
		after = append(after, env.wave(300)...)
		time.Sleep(300 * time.Millisecond)
	}
	dead := newFileSinkReader(env.deadDir())
	eventually.Wait(t, 120*time.Second, "what expired after the deletion reaches the dead-letter sink", func() error {
		return dead.poll(t).allArrived(after)
	})
	env.finish()
	dlq := dead.poll(t)
	far := union(s3r.tally, dlq)
	if err := far.allArrived(env.written.all()); err != nil {
		t.Errorf("S3 and the dead-letter sink: %v", err)
	}
	far.checkItems(t, "S3 and the dead-letter sink")
	noDuplicates(t, "S3 and the dead-letter sink", far)
	checkCovered(t, "S3 and the dead-letter sink", env.checkpoints(), far)
	for k, d := range dlq.dead {
		if d.Sink != s3Name || d.Reason != event.ReasonPermanent || dlq.kinds[k] != event.Expired {
			t.Errorf("dead letter of %s: kind %s, %+v; want expired, sink %s, reason %s", k, dlq.kinds[k], d, s3Name, event.ReasonPermanent)
			break
		}
	}
	t.Logf("%d items: %d in S3 before the deletion, %d in the dead-letter sink", len(env.written.all()), len(s3r.tally.byKey), len(dlq.byKey))
}

// objectBytes is an object's stored bytes.
func objectBytes(t *testing.T, ctx context.Context, c *s3.Client, key string) []byte {
	t.Helper()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	return data
}

// foreignObject is a gzip JSONL object of n expired events of other items
// than the test writes, with other event IDs.
func foreignObject(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("foreign-%06d", i)
		ev := event.Event{
			Kind: event.Expired, Table: faultTable, EventName: "REMOVE", EventID: fmt.Sprintf("f0re1gn%025d", i),
			Keys: event.Item{keyAttr: &stypes.AttributeValueMemberS{Value: k}},
		}
		if _, err := zw.Write(event.AppendLine(nil, &ev)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestChaos412AfterCrash: a crash between the S3 upload and the checkpoint
// makes the restarted archiver upload to keys that exist, and here they
// hold other bytes (412 Precondition Failed from versitygw). Every record
// is in the stream before anything reads it, so both runs read the same
// batches and the sink cuts the same objects at the same keys. The first
// run cannot look up the table's TTL attribute (DescribeTimeToLive is
// denied), so its lines carry no TTL metadata; then its checkpoint is lost
// (the crash), and one of its objects is replaced by another writer's
// object with other event IDs. The second run renders the same events with
// TTL metadata: a 412 on an object with the same event IDs must be taken
// as written, a 412 on the foreign object must put the events under a
// distinct key. No existing object is overwritten, every item is in S3 and
// the checkpoints pass everything.
func TestChaos412AfterCrash(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t, 1)
	ctx := env.ctx
	s3Endpoint, s3c := startVersity(t)
	sinkURL := s3SinkURL(s3Bucket, "ttl", s3Endpoint, "flush-interval", "1s")
	env.configure = func(_ string, c *consumer.Config) {
		for _, r := range c.Routes {
			_ = r.Sink.Close(ctx)
		}
		c.Routes = []consumer.Route{{Sink: openSink(t, ctx, sinkURL, c)}}
	}
	keys := env.wave(1000)
	for {
		n, err := env.srv.Engine().SweepTTL(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}

	// The first run, without the TTL attribute.
	var denied atomic.Int64
	env.srv.Engine().SetHook(func(op string, r *http.Request) error {
		if op == "DescribeTimeToLive" && strings.HasPrefix(enginetest.AccessKey(r), "reader-") {
			denied.Add(1)
			return engine.NewError("AccessDeniedException", "DescribeTimeToLive is denied in this test", http.StatusBadRequest)
		}
		return nil
	})
	env.start()
	first := newS3Reader(s3c, "ttl/")
	waitS3(t, ctx, first, "the first run archives every item", keys)
	env.stopAll()
	env.srv.Engine().SetHook(nil)
	if denied.Load() == 0 || first.tally.nbad != len(keys) {
		t.Fatalf("first run: %d DescribeTimeToLive denied, %d of %d events without TTL metadata; want all without", denied.Load(), first.tally.nbad, len(keys))
	}
	// The crash: the objects are there, the checkpoints are not.
	if err := os.Remove(filepath.Join(env.dir, "checkpoints.json")); err != nil {
		t.Fatal(err)
	}
	sort.Strings(first.keys)
	stored := map[string][]byte{}
	for _, k := range first.keys {
		stored[k] = objectBytes(t, ctx, s3c, k)
	}
	foreignKey := first.keys[0]
	stored[foreignKey] = foreignObject(t, 5)
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s3Bucket), Key: aws.String(foreignKey), Body: bytes.NewReader(stored[foreignKey]),
		ContentEncoding: aws.String("gzip"), ContentType: aws.String("application/x-ndjson"),
	}); err != nil {
		t.Fatal(err)
	}

	// The second run reads everything again.
	env.start()
	second := newS3Reader(s3c, "ttl/")
	eventually.Wait(t, 120*time.Second, "the second run archives and checkpoints every item", func() error {
		env.checkWorkers()
		if err := second.poll(t, ctx); err != nil {
			return err
		}
		if err := second.tally.allArrived(keys); err != nil {
			return err
		}
		cps := loadFileCheckpoints(t, ctx, filepath.Join(env.dir, "checkpoints.json"), env.stream)
		second.tally.mu.Lock()
		defer second.tally.mu.Unlock()
		for id, at := range second.tally.at {
			if !strings.HasPrefix(id, "f0re1gn") && !covers(cps[at.shard], at.seq) {
				return fmt.Errorf("event %s (shard %s, sequence %s) not checkpointed", id, at.shard, at.seq)
			}
		}
		return nil
	})
	env.stopAll()
	if err := second.poll(t, ctx); err != nil {
		t.Fatal(err)
	}
	for k, want := range stored {
		if got := objectBytes(t, ctx, s3c, k); !bytes.Equal(got, want) {
			t.Errorf("object %s was overwritten", k)
		}
	}
	noDuplicates(t, "S3", second.tally)
	var added []string
	for _, k := range second.keys {
		if stored[k] == nil {
			added = append(added, k)
		}
	}
	// The distinct key holds what the first run had put at the foreign
	// object's key, now with TTL metadata.
	moved := newS3Reader(s3c, "ttl/")
	for _, k := range added {
		if err := moved.read(t, ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	moved.tally.checkItems(t, "the object under a distinct key")
	if len(added) != 1 || moved.tally.lines == 0 {
		t.Errorf("second run added objects %v, want exactly one: the foreign object's events under a distinct key", added)
	}
	same, distinct := env.metric("archiver_sink_conflicts_total", "outcome", sinks.ConflictSameEvents), env.metric("archiver_sink_conflicts_total", "outcome", sinks.ConflictDistinctKey)
	// The counter also counts the coverage manifests the second run
	// recorded again (issue 27): same_events where it is the same proof as
	// the first run's, distinct_key for the range whose object moved to
	// the distinct key (its proof lists that key). The data objects'
	// outcomes are exact above: one added, none overwritten.
	if int(same) < len(first.keys)-1 || distinct < 1 {
		t.Errorf("archiver_sink_conflicts_total: %v same_events, %v distinct_key; want at least %d and 1 (and the manifests')", same, distinct, len(first.keys)-1)
	}
	t.Logf("first run: %d objects; second run: %v conflicts resolved by the same events, %v by the distinct key %v (%d lines)",
		len(first.keys), same, distinct, added, moved.tally.lines)
}

// ---- a description that leaves out an unfinished closed parent ----

// orderLog records, on one clock shared by every worker, when each event
// was first handed to a sink and when it was first acknowledged.
type orderLog struct {
	mu      sync.Mutex
	clock   int64
	written map[string]int64  // event ID → first Write
	acked   map[string]int64  // event ID → first successful acknowledgement
	key     map[string]string // event ID → item key
	shard   map[string]string // event ID → shard
}

func newOrderLog() *orderLog {
	return &orderLog{written: map[string]int64{}, acked: map[string]int64{}, key: map[string]string{}, shard: map[string]string{}}
}

func (o *orderLog) wrote(b sinks.Batch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clock++
	for i := range b.Events {
		e := &b.Events[i]
		if o.written[e.EventID] == 0 {
			o.written[e.EventID] = o.clock
			o.key[e.EventID], o.shard[e.EventID] = itemKey(e.Keys), b.ShardID
		}
	}
}

func (o *orderLog) ack(b sinks.Batch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clock++
	for i := range b.Events {
		if id := b.Events[i].EventID; o.acked[id] == 0 {
			o.acked[id] = o.clock
		}
	}
}

// holdSink wraps a worker's sink: it logs writes and acknowledgements in
// an orderLog and, while its holder holds, keeps the acknowledgements back
// (the events are durable; the consumer does not know yet), so that no
// shard can finish.
// It is its own fake rather than a sinktest.Recorder: it wraps the
// worker's real file sink, whose archive the test reads.
type holdSink struct {
	sinks.Sink
	h *holder
}

type holder struct {
	log     *orderLog
	mu      sync.Mutex
	held    bool
	pending []func()
}

// release hands every acknowledgement held back to the consumer, and
// holds none from now on.
func (h *holder) release() {
	h.mu.Lock()
	h.held = false
	pending := h.pending
	h.pending = nil
	h.mu.Unlock()
	for _, f := range pending {
		f()
	}
}

func (s *holdSink) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	s.h.log.wrote(b)
	return s.Sink.Write(ctx, b, func(err error) {
		done := func() {
			if err == nil {
				s.h.log.ack(b)
			}
			ack(err)
		}
		s.h.mu.Lock()
		if s.h.held {
			s.h.pending = append(s.h.pending, done)
			s.h.mu.Unlock()
			return
		}
		s.h.mu.Unlock()
		done()
	})
}

// lineage maps every shard of the env's stream to its parent.
func (env *faultEnv) lineage() map[string]string {
	parent := map[string]string{}
	for _, s := range env.shards() {
		parent[aws.ToString(s.ShardId)] = aws.ToString(s.ParentShardId)
	}
	return parent
}

// checkLineageOrder checks parents before children per key: an event of a
// shard was acknowledged before any event of the same key from a
// descendant shard was handed to a sink. It returns how many such pairs it
// checked with the older event in shard of.
func checkLineageOrder(t *testing.T, o *orderLog, parent map[string]string, of string) int {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	byKey := map[string][]string{}
	for id, k := range o.key {
		byKey[k] = append(byKey[k], id)
	}
	ancestor := func(a, b string) bool {
		for s := parent[b]; s != ""; s = parent[s] {
			if s == a {
				return true
			}
		}
		return false
	}
	bad, checked := 0, 0
	for k, ids := range byKey {
		for _, older := range ids {
			for _, newer := range ids {
				if !ancestor(o.shard[older], o.shard[newer]) {
					continue
				}
				if o.shard[older] == of {
					checked++
				}
				if o.acked[older] == 0 || o.acked[older] > o.written[newer] {
					if bad++; bad <= 3 {
						t.Errorf("key %s: event %s of shard %s handed to the sink (at %d) before event %s of its ancestor %s was acknowledged (at %d)",
							k, newer, o.shard[newer], o.written[newer], older, o.shard[older], o.acked[older])
					}
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d events of a child shard handed to the sink before their key's events of a parent were acknowledged", bad)
	}
	return checked
}

// TestChaosDescribeOmitsParent: a closed parent with records nobody read
// yet is left out of one DescribeStream answer (engine's
// OmitShardFromDescribe), as the real service's eventually consistent
// descriptions sometimes do. It must not be taken for gone: its children
// wait until it is read to its end and finished. The workers are held
// back (a small in-flight budget and a sink whose acknowledgements are
// kept back) while an open shard is split, its keys expire again into the
// children, and the parent is left out; then the acknowledgements flow.
// Every record of every key must arrive, and per key every parent's event
// must have been acknowledged before the child's was handed to the sink.
// With the file store (one worker) and the lease table (two workers).
func TestChaosDescribeOmitsParent(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name    string
		workers int
	}{{"file store", 1}, {"lease table", 2}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			env := newFaultEnv(t, mode.workers)
			var describes atomic.Int64
			env.srv.Engine().SetHook(func(op string, r *http.Request) error {
				if op == "DescribeStream" && strings.HasPrefix(enginetest.AccessKey(r), "reader-") {
					describes.Add(1)
				}
				return nil
			})
			// described waits until the workers described the stream
			// n more times.
			described := func(what string, n int64) {
				want := describes.Load() + n
				eventually.Wait(t, 60*time.Second, what, func() error {
					if got := describes.Load(); got < want {
						return fmt.Errorf("%d of %d descriptions", got, want)
					}
					return nil
				})
			}
			h := &holder{log: newOrderLog(), held: true}
			env.configure = func(_ string, c *consumer.Config) {
				c.Routes[0].Sink = &holdSink{Sink: c.Routes[0].Sink, h: h}
				c.MaxInFlightBytes, c.GetRecordsLimit = 32<<10, 25
			}
			env.start()
			t.Cleanup(h.release) // before the workers' own clean-ups stop them
			keys := env.wave(600)
			described("the workers describe the stream", 3)
			open := env.openShards()
			parent := open[0]
			if err := env.srv.Engine().SplitShard(faultTable, parent); err != nil {
				t.Fatal(err)
			}
			if err := putItems(env.ctx, env.db, faultTable, keys, expiredTTL()); err != nil {
				t.Fatal(err)
			}
			env.sweep()
			described("the workers see the parent closed", 3)
			if err := env.srv.Engine().OmitShardFromDescribe(faultTable, parent, 1); err != nil {
				t.Fatal(err)
			}
			described("a description leaves the parent out", 4)
			h.release()
			eventually.Wait(t, 120*time.Second, "both expiries of every key arrive", func() error {
				env.checkWorkers()
				got := env.farEnd()
				got.mu.Lock()
				defer got.mu.Unlock()
				for _, k := range keys {
					if got.byKey[k] < 2 {
						return fmt.Errorf("key %s arrived %d times, want both expiries", k, got.byKey[k])
					}
				}
				return nil
			})
			got := env.finish()
			if mode.workers == 1 {
				noDuplicates(t, "file sink", got)
			}
			if n := checkLineageOrder(t, h.log, env.lineage(), parent); n == 0 {
				t.Errorf("no key has events in the omitted parent %s and in a child: the test did not test it", parent)
			} else {
				t.Logf("%d keys had an expiry in the omitted parent %s and one in a child", n, parent)
			}
		})
	}
}
