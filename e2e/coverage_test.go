package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/manifest"
)

// Issue 27's "done when": an archive that proves itself complete. Each test
// runs `archiver engine` (a manual clock: record times and TTLs follow the
// clock the test moves, never today's date) and `archiver run` as
// processes writing to versitygw (and a file sink), then proves the archive
// with `archiver verify --from` alone, the stream no longer consulted.

const covTable = "sessions"

// covBed is one coverage test's engine, versitygw and archiver binary.
type covBed struct {
	t        *testing.T
	ctx      context.Context
	bin      string
	work     string
	engine   *proc
	endpoint string
	db       *dynamodb.Client
	streams  *dynamodbstreams.Client
	stream   string // the table's stream ARN
	s3End    string
	s3       *s3.Client
}

// newCovBed starts versitygw and an engine with a manual clock and
// engineFlags, and creates the table covTable.
func newCovBed(t *testing.T, engineFlags ...string) *covBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	b := &covBed{t: t, ctx: ctx, bin: buildArchiver(t), work: t.TempDir()}
	b.s3End, b.s3 = startVersity(t)
	b.engine = startProc(t, b.work, "engine", b.bin,
		append([]string{"engine", "--listen", "127.0.0.1:0", "--manual-clock"}, engineFlags...)...)
	b.endpoint = engineEndpoint(t, b.engine)
	b.db = enginetest.ClientAt(b.endpoint, "writer")
	b.streams = enginetest.StreamsClientAt(b.endpoint, "writer")
	b.stream = enginetest.CreateTable(t, b.db, table(covTable))
	return b
}

// s3URL is the URL of the archive under prefix in the test bucket, with
// the sink parameters params.
func (b *covBed) s3URL(prefix string, params ...string) string {
	v := url.Values{"endpoint": {b.s3End}, "path-style": {"true"}, "region": {"us-east-1"}}
	for i := 0; i+1 < len(params); i += 2 {
		v.Set(params[i], params[i+1])
	}
	return "s3://" + s3Bucket + "/" + prefix + "?" + v.Encode()
}

// clock is the engine's time.
func (b *covBed) clock() time.Time {
	var out struct{ Now time.Time }
	if err := json.Unmarshal(controlAPI(b.t, b.ctx, b.endpoint, "/_engine/clock", ""), &out); err != nil {
		b.t.Fatalf("GET /_engine/clock: %v", err)
	}
	return out.Now
}

// setClock sets the engine's clock.
func (b *covBed) setClock(at time.Time) {
	controlAPI(b.t, b.ctx, b.endpoint, "/_engine/clock", fmt.Sprintf(`{"set":%q}`, at.UTC().Format(time.RFC3339Nano)))
}

// sweep has the engine's TTL delete what has expired, now.
func (b *covBed) sweep() {
	controlAPI(b.t, b.ctx, b.endpoint, "/_engine/ttl/sweep", "{}")
}

// expire writes n items (keys prefix-NNNNNN from from) whose TTL is an
// hour before the engine's clock.
func (b *covBed) expire(prefix string, from, n int) []string {
	keys := keyRange(prefix, from, n)
	if err := putItems(b.ctx, b.db, covTable, keys, b.clock().Add(-time.Hour).Unix()); err != nil {
		b.t.Fatal(err)
	}
	return keys
}

// run starts `archiver run` on covTable as worker name with flags.
func (b *covBed) run(name string, flags ...string) *proc {
	args := append([]string{"run", "--endpoint", b.endpoint, "--table", covTable, "--worker-id", name,
		"--metrics-addr", "127.0.0.1:0", "--log-level", "info", "--shutdown-timeout", "25s"}, flags...)
	return startProc(b.t, b.work, name, b.bin, args...)
}

// controlAPI calls the engine's control API at path: a POST of body, or a
// GET when body is "". Anything but 200 fails the test.
func controlAPI(t testing.TB, ctx context.Context, endpoint, path, body string) []byte {
	t.Helper()
	method, rd := http.MethodGet, io.Reader(nil)
	if body != "" {
		method, rd = http.MethodPost, strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s %s: %s %s", method, path, body, resp.Status, out)
	}
	return out
}

// covVerify is what one `archiver verify --from` said: its exit code, its
// text report and its --json report.
type covVerify struct {
	code int
	text string
	rep  struct {
		archive.Report
		Coverage *archive.CoverageReport `json:"coverage"`
	}
}

// verify runs `archiver verify --from from`, as text and with --json.
func (b *covBed) verify(from string) *covVerify {
	b.t.Helper()
	v := &covVerify{}
	code, text := b.archiver("verify", "--from", from)
	v.code, v.text = code, text
	code, out := b.archiver("verify", "--from", from, "--json")
	if code != v.code {
		b.t.Errorf("verify exits %d with --json, %d without", code, v.code)
	}
	if err := json.Unmarshal([]byte(out), &v.rep); err != nil || v.rep.Coverage == nil {
		b.t.Fatalf("verify --json: %v (or no coverage)\n%s", err, out)
	}
	return v
}

// archiver runs the binary with args to its end and returns its exit code
// and standard output (standard error is logged).
func (b *covBed) archiver(args ...string) (int, string) {
	b.t.Helper()
	cmd := exec.CommandContext(b.ctx, b.bin, args...)
	cmd.Env = cleanEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	case err != nil:
		b.t.Fatalf("archiver %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return 0, string(out)
}

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// wantComplete fails the test unless verify proved the archive complete:
// exit 0, the verdict, no finding, and every shard covered from its start
// without a gap.
func wantComplete(t *testing.T, what string, v *covVerify) {
	t.Helper()
	c := v.rep.Coverage
	if v.code != 0 || c.Verdict != archive.VerdictComplete || !strings.HasPrefix(firstLine(v.text), "complete: ") {
		t.Fatalf("%s: verify exits %d, verdict %q, first line %q; want 0, complete\n%s", what, v.code, c.Verdict, firstLine(v.text), v.text)
	}
	if c.FindingsTotal != 0 || c.ObjectsVerified != c.ObjectsListed || c.ObjectsListed == 0 || v.rep.Undecodable != 0 {
		t.Errorf("%s: %d findings, %d of %d listed objects verified, %d undecodable lines; want none, all, none",
			what, c.FindingsTotal, c.ObjectsVerified, c.ObjectsListed, v.rep.Undecodable)
	}
	for _, sh := range c.Shards {
		if sh.Gaps != 0 || sh.Start != "" || sh.Begun || len(sh.Covered) != 1 {
			t.Errorf("%s: shard %s covered %v from %q (begun mid-shard %v), %d gaps; want one range from its start",
				what, sh.Shard.Shard, sh.Covered, sh.Start, sh.Begun, sh.Gaps)
		}
	}
}

// s3Archive is an archive in the test bucket under a prefix.
type s3Archive struct {
	b      *covBed
	prefix string // no trailing slash
}

func (a s3Archive) from() string { return a.b.s3URL(a.prefix) }

// keys lists every key of the archive, relative to its root.
func (a s3Archive) keys() []string {
	var keys []string
	p := s3.NewListObjectsV2Paginator(a.b.s3, &s3.ListObjectsV2Input{Bucket: aws.String(s3Bucket), Prefix: aws.String(a.prefix + "/")})
	for p.HasMorePages() {
		out, err := p.NextPage(a.b.ctx)
		if err != nil {
			a.b.t.Fatalf("ListObjectsV2 %s/: %v", a.prefix, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), a.prefix+"/"))
		}
	}
	return keys
}

func (a s3Archive) manifests() []manifest.Stored {
	var ms []manifest.Stored
	for _, k := range a.keys() {
		if manifest.IsKey(k) {
			ms = append(ms, storedManifest(a.b.t, k, objectBytes(a.b.t, a.b.ctx, a.b.s3, a.prefix+"/"+k)))
		}
	}
	return ms
}

// clone copies every object to the prefix name, as stored.
func (a s3Archive) clone(name string) covArchive {
	for _, k := range a.keys() {
		out, err := a.b.s3.GetObject(a.b.ctx, &s3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(a.prefix + "/" + k)})
		if err != nil {
			a.b.t.Fatalf("GetObject %s: %v", k, err)
		}
		data, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			a.b.t.Fatalf("GetObject %s: %v", k, err)
		}
		a.put(name+"/"+k, data, out.ContentEncoding)
	}
	return s3Archive{b: a.b, prefix: name}
}

func (a s3Archive) put(key string, data []byte, encoding *string) {
	_, err := a.b.s3.PutObject(a.b.ctx, &s3.PutObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(key),
		Body: bytes.NewReader(data), ContentEncoding: encoding})
	if err != nil {
		a.b.t.Fatalf("PutObject %s: %v", key, err)
	}
}

func (a s3Archive) remove(key string) {
	if _, err := a.b.s3.DeleteObject(a.b.ctx, &s3.DeleteObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(a.prefix + "/" + key)}); err != nil {
		a.b.t.Fatalf("DeleteObject %s: %v", key, err)
	}
}

// lines and setLines read and write a gzip object's lines.
func (a s3Archive) lines(key string) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(objectBytes(a.b.t, a.b.ctx, a.b.s3, a.prefix+"/"+key)))
	if err != nil {
		a.b.t.Fatalf("%s: %v", key, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		a.b.t.Fatalf("%s: %v", key, err)
	}
	return data
}

func (a s3Archive) setLines(key string, data []byte) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil || zw.Close() != nil {
		a.b.t.Fatalf("gzip %s: %v", key, err)
	}
	a.put(a.prefix+"/"+key, buf.Bytes(), aws.String("gzip"))
}

// fileArchive is a file sink's directory.
type fileArchive struct {
	t   *testing.T
	dir string
}

func (a fileArchive) from() string { return "file://" + a.dir }

func (a fileArchive) manifests() []manifest.Stored {
	var ms []manifest.Stored
	err := filepath.WalkDir(filepath.Join(a.dir, manifest.Dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(a.dir, p)
		if err != nil || !manifest.IsKey(filepath.ToSlash(rel)) {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil {
			ms = append(ms, storedManifest(a.t, filepath.ToSlash(rel), data))
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.t.Fatalf("reading the manifests of %s: %v", a.dir, err)
	}
	return ms
}

func (a fileArchive) clone(name string) covArchive {
	dst := filepath.Join(filepath.Dir(a.dir), name)
	if err := os.CopyFS(dst, os.DirFS(a.dir)); err != nil {
		a.t.Fatalf("copying %s: %v", a.dir, err)
	}
	return fileArchive{t: a.t, dir: dst}
}

func (a fileArchive) remove(key string) {
	if err := os.Remove(filepath.Join(a.dir, key)); err != nil {
		a.t.Fatal(err)
	}
}

func (a fileArchive) lines(key string) []byte {
	data, err := os.ReadFile(filepath.Join(a.dir, key))
	if err != nil {
		a.t.Fatal(err)
	}
	return data
}

func (a fileArchive) setLines(key string, data []byte) {
	if err := os.WriteFile(filepath.Join(a.dir, key), data, 0o640); err != nil {
		a.t.Fatal(err)
	}
}

// covArchive is an archive the tamper test copies and changes: keys are
// relative to its root.
type covArchive interface {
	from() string // the URL verify reads it from
	manifests() []manifest.Stored
	clone(name string) covArchive
	remove(key string)
	lines(key string) []byte // an object's lines (uncompressed)
	setLines(key string, data []byte)
}

// storedManifest decodes a manifest's stored bytes.
func storedManifest(t testing.TB, key string, data []byte) manifest.Stored {
	t.Helper()
	m, err := manifest.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("manifest %s: %v", key, err)
	}
	return manifest.Stored{Key: key, Digest: manifest.Digest(data), M: m}
}

// coveredExpiries counts the expiries the manifests record.
func coveredExpiries(ms []manifest.Stored) int64 {
	var n int64
	for _, s := range ms {
		n += s.M.Events[string(event.Expired)]
	}
	return n
}

// TestCoverageKillNineVerify: 20,000 expiries over an 8-shard stream whose
// shards roll over during the run, archived to S3 by two `archiver run`
// workers sharing the stream through DynamoDB leases; one is killed with
// SIGKILL mid-run (after it recorded manifests, while it archives the
// second half as it is written) and replaced by a new worker, as ECS
// replaces a task. Every expiry reaches S3, and `archiver verify --from`
// proves the archive complete from its manifests alone: every shard
// covered from its start without a gap, every shard the stream closed
// recorded to its end, exit 0.
func TestCoverageKillNineVerify(t *testing.T) {
	t.Parallel()
	const total, lineages = 20000, 8
	b := newCovBed(t, "--ttl-interval", "200ms", "--stream-shards", strconv.Itoa(lineages), "--shard-rollover", "2000")
	sink := b.s3URL("ttl", "flush-interval", "1s", "manifest-interval", "1s")
	flags := []string{"--checkpoint", "dynamodb://leases?create=true", "--lease-duration", "3s", "--lease-renew", "1s", "--sink", sink}
	w1 := b.run("run-w1", flags...)
	// The second starts once the first is running: versitygw's posix
	// backend once answered two start-up checks putting and deleting the
	// same marker at once with 409 ExistingObjectIsDirectory.
	waitMetric(t, w1, "archiver_events_total", 0)
	w2 := b.run("run-w2", flags...)

	keys := b.expire("x", 0, total/2)
	more, w3 := killMidRun(t, b, w1, total/2, total/2, flags)
	keys = append(keys, more...)
	far := newS3Reader(b.s3, "ttl/")
	eventually.Wait(t, 3*time.Minute, "every expiry reaches S3", func() error {
		for _, p := range []*proc{w2, w3} {
			if p.exited() {
				t.Fatalf("%s exited on its own: %v\n%s", p.name, p.err, p.tail(30))
			}
		}
		if err := far.poll(t, b.ctx); err != nil {
			return err
		}
		return far.tally.allArrived(keys)
	})
	for _, p := range []*proc{w2, w3} {
		takes, _ := metricSum(p, "archiver_lease_takes_total")
		conflicts, _ := metricSum(p, "archiver_sink_conflicts_total")
		t.Logf("%s: %v leases taken, %v S3 key conflicts", p.name, takes, conflicts)
		p.term()
	}
	stopClean(t, w2)
	stopClean(t, w3)
	if err := far.poll(t, b.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(far.tally.byKey); n != total {
		t.Errorf("S3 holds %d distinct items, want the %d expired", n, total)
	}
	far.tally.checkItems(t, "S3")

	shards := describeShards(t, b.ctx, b.streams, b.stream)
	b.engine.kill() // the table and its stream are gone: the archive proves itself
	v := b.verify(b.s3URL("ttl"))
	wantComplete(t, "the archive after a kill -9", v)
	c := v.rep.Coverage
	if c.Lineages != lineages || c.PendingLines != 0 || v.rep.Events != total {
		t.Errorf("verify: %d lineages, %d lines pending, %d distinct events; want %d, 0 (every worker stopped cleanly), %d",
			c.Lineages, c.PendingLines, v.rep.Events, lineages, total)
	}
	checkShardsCovered(t, c, shards, far.tally)
	t.Logf("verify: %s", firstLine(v.text))
	t.Logf("%d manifests, %d objects listed, %d leftover copies; S3: %d lines in %d objects (%d duplicates)",
		c.Manifests, c.ObjectsListed, c.LeftoverCopies, far.tally.lines, far.objects, far.tally.duplicates())
	logSummary(t, b.work)
}

// checkShardsCovered checks verify's shards against the stream's: every
// shard the stream closed was recorded to its end, every shard holding an
// archived event was recorded, and the shards split during the run.
func checkShardsCovered(t *testing.T, c *archive.CoverageReport, shards []stypes.Shard, far *tally) {
	t.Helper()
	covered := map[string]archive.CoverageShard{}
	for _, sh := range c.Shards {
		covered[sh.Shard.Shard] = sh
	}
	archived := map[string]bool{}
	for _, at := range far.at {
		archived[at.shard] = true
	}
	closed := 0
	for _, s := range shards {
		id := aws.ToString(s.ShardId)
		sh, ok := covered[id]
		ended := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
		switch {
		case ended && (!ok || !sh.Ended):
			t.Errorf("shard %s closed in the stream: covered %v, ended %v; want recorded to its end", id, ok, sh.Ended)
		case archived[id] && !ok:
			t.Errorf("shard %s holds archived expiries but no manifest records it", id)
		}
		if ended {
			closed++
		}
	}
	if closed == 0 {
		t.Errorf("no shard of the stream's %d was closed: the run made no shard rollover", len(shards))
	}
	t.Logf("stream: %d shards, %d closed; verify: %d shards covered", len(shards), closed, len(c.Shards))
}

// killMidRun kills w with SIGKILL while it archives: once it recorded
// manifests, and then read some of the n expiries (keys x-NNNNNN from
// from) that a writer adds meanwhile and uploaded an object. It starts a replacement worker with
// flags, as ECS replaces a task, waits for the writer, and returns the
// keys written and the replacement.
func killMidRun(t *testing.T, b *covBed, w *proc, from, n int, flags []string) ([]string, *proc) {
	t.Helper()
	waitMetric(t, w, "archiver_manifests_written_total", 1)
	before := waitMetric(t, w, "archiver_events_total", 0)
	keys, exp := keyRange("x", from, n), b.clock().Add(-time.Hour).Unix()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i += 250 {
			if err := putItems(b.ctx, b.db, covTable, keys[i:min(i+250, n)], exp); err != nil {
				done <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		done <- nil
	}()
	// It read some of them; then it made an object durable that its next
	// manifest would list.
	waitMetric(t, w, "archiver_events_total", before+1)
	objects, _ := metricSum(w, "archiver_sink_objects_total")
	waitMetric(t, w, "archiver_sink_objects_total", objects+1)
	if !w.kill() {
		t.Fatalf("%s exited on its own before the kill: %v\n%s", w.name, w.err, w.tail(30))
	}
	t.Logf("killed %s (SIGKILL) while it archived the %d expiries being written", w.name, n)
	replacement := b.run("run-w3", flags...)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return keys, replacement
}

// waitMetric waits until p's /metrics counts at least want for the
// counter name (summed over its labels) and returns the count.
func waitMetric(t *testing.T, p *proc, name string, want float64) float64 {
	t.Helper()
	var sum float64
	eventually.Wait(t, time.Minute, p.name+"'s "+name, func() error {
		if p.exited() {
			t.Fatalf("%s exited on its own: %v\n%s", p.name, p.err, p.tail(30))
		}
		var err error
		if sum, err = metricSum(p, name); err != nil {
			return err
		}
		if sum < want {
			return fmt.Errorf("%s is %v, want at least %v", name, sum, want)
		}
		return nil
	})
	return sum
}

// metricSum is the counter name on p's /metrics, summed over its labels.
func metricSum(p *proc, name string) (float64, error) {
	addr := logField(p.logPath, "archiver running", "metrics_addr")
	if addr == "" {
		return 0, errors.New("not running yet")
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		if f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:]); len(f) > 0 {
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", line, err)
			}
			sum += v
		}
	}
	return sum, nil
}

// TestCoverageTamper: an archive recorded to S3 and to a file sink at once
// (two shards, four waves of expiries an hour apart on the engine's clock,
// each covered by manifests before the next), proven complete, then
// copied and changed three ways, each copy alone: a data object deleted,
// one line of another object edited so that it stays valid JSON, a
// manifest deleted. `archiver verify --from` finds each, naming the shard
// and the range, and exits 1.
func TestCoverageTamper(t *testing.T) {
	t.Parallel()
	const waves, perWave = 4, 40
	b := newCovBed(t, "--ttl-interval", "-1", "--stream-shards", "2", "--shard-rollover", "1000000")
	dir := filepath.Join(b.work, "archive", "file")
	archives := []covArchive{s3Archive{b: b, prefix: "ttl"}, fileArchive{t: t, dir: dir}}
	w := b.run("run-w1", "--checkpoint", "file://"+filepath.Join(b.work, "checkpoints.json"),
		"--sink", b.s3URL("ttl", "flush-interval", "1s", "manifest-interval", "1s"),
		"--sink", "file://"+dir+"?manifest-interval=1s")
	start := b.clock().Truncate(time.Hour)
	for i := range waves {
		b.setClock(start.Add(time.Duration(i)*time.Hour + 30*time.Minute))
		b.expire("x", i*perWave, perWave)
		b.sweep()
		d := eventually.Wait(t, time.Minute, fmt.Sprintf("wave %d covered by manifests", i+1), func() error {
			if w.exited() {
				t.Fatalf("%s exited on its own: %v\n%s", w.name, w.err, w.tail(30))
			}
			for _, a := range archives {
				if n := coveredExpiries(a.manifests()); n < int64((i+1)*perWave) {
					return fmt.Errorf("%s: manifests cover %d of %d expiries", a.from(), n, (i+1)*perWave)
				}
			}
			return nil
		})
		t.Logf("wave %d covered by manifests in both archives after %v", i+1, d.Round(time.Millisecond))
	}
	stopClean(t, w)
	for _, a := range archives {
		v := b.verify(a.from())
		wantComplete(t, a.from()+" as written", v)
		if v.rep.Events != waves*perWave {
			t.Errorf("%s: %d distinct events, want %d", a.from(), v.rep.Events, waves*perWave)
		}
	}
	for i, a := range archives {
		p := planTamper(t, a.manifests())
		for j, tc := range tamperCases(p) {
			t.Run(fmt.Sprintf("%s/%s", []string{"s3", "file"}[i], tc.name), func(t *testing.T) {
				c := a.clone(fmt.Sprintf("tamper-%d-%d", i, j))
				tc.do(t, c)
				checkTampered(t, b.verify(c.from()), tc.want, tc.also)
			})
		}
	}
}

// tamperPlan is what the tamper cases change, from an archive's manifests:
// a manifest of a shard with a predecessor and a successor (m2) and an
// object it lists, and an object a later manifest of the shard (m3) lists
// and m2 does not.
type tamperPlan struct {
	m2, m3     manifest.Stored
	obj2, obj3 string
}

// planTamper picks the plan in the first shard that has one.
func planTamper(t *testing.T, ms []manifest.Stored) tamperPlan {
	t.Helper()
	byShard := map[string][]manifest.Stored{}
	for _, s := range ms {
		if s.Key == manifest.Key(s.M) { // not a range recorded again, beside the first
			byShard[s.M.Shard] = append(byShard[s.M.Shard], s)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(byShard)) {
		sh := byShard[id]
		slices.SortFunc(sh, func(a, b manifest.Stored) int { return event.CompareSequence(a.M.To, b.M.To) })
		for i := 1; i+1 < len(sh); i++ {
			if p, ok := planAt(sh, i); ok {
				return p
			}
		}
	}
	t.Fatalf("no shard has a manifest with a predecessor and a successor listing an object, and a later one listing another (%d manifests)", len(ms))
	return tamperPlan{}
}

// planAt is the plan with m2 the shard's i-th manifest, if it lists an
// object and a later one lists another.
func planAt(sh []manifest.Stored, i int) (tamperPlan, bool) {
	if len(sh[i].M.Objects) == 0 {
		return tamperPlan{}, false
	}
	p := tamperPlan{m2: sh[i], obj2: sh[i].M.Objects[0].Key}
	listed := map[string]bool{}
	for _, o := range p.m2.M.Objects {
		listed[o.Key] = true
	}
	for _, s := range sh[i+1:] {
		for _, o := range s.M.Objects {
			if !listed[o.Key] {
				p.m3, p.obj3 = s, o.Key
				return p, true
			}
		}
	}
	return tamperPlan{}, false
}

// covFinding is a finding a tamper case must cause: its kind, shard and
// range, and the object it names ("" for none).
type covFinding struct {
	kind, shard, from, to, object string
}

// tamperCase is one change to a copy of the archive and what verify must
// find: want, and findings of the kinds in also (what the change causes
// besides: the lines of a removed manifest's range lie in a gap, its
// successor's chain breaks; a file sink's hour file is listed by both
// shards' manifests).
type tamperCase struct {
	name string
	do   func(t *testing.T, a covArchive)
	want covFinding
	also []string
}

func tamperCases(p tamperPlan) []tamperCase {
	m2, m3 := p.m2.M, p.m3.M
	return []tamperCase{
		{"delete a data object", func(t *testing.T, a covArchive) { a.remove(p.obj2) },
			covFinding{archive.FindMissing, m2.Shard, m2.From, m2.To, p.obj2}, []string{archive.FindMissing}},
		{"edit a line", func(t *testing.T, a covArchive) { editLine(t, a, p.obj3) },
			covFinding{archive.FindAltered, m3.Shard, m3.From, m3.To, p.obj3}, []string{archive.FindAltered}},
		{"delete a manifest", func(t *testing.T, a covArchive) { a.remove(p.m2.Key) },
			covFinding{manifest.FindGap, m2.Shard, m2.From, m2.To, ""}, []string{manifest.FindChain, archive.FindOutside}},
	}
}

// editLine changes one archive line of the object at key so that it stays
// valid JSON: its item's payload in capitals.
func editLine(t *testing.T, a covArchive, key string) {
	t.Helper()
	data := a.lines(key)
	old, edited := []byte(`"session data for `), []byte(`"SESSION DATA FOR `)
	i := bytes.Index(data, old)
	if i < 0 {
		t.Fatalf("%s holds no payload to edit", key)
	}
	data = slices.Concat(data[:i], edited, data[i+len(old):])
	start := bytes.LastIndexByte(data[:i], '\n') + 1
	end := i + bytes.IndexByte(data[i:], '\n')
	if !json.Valid(data[start:end]) {
		t.Fatalf("the edited line of %s is not valid JSON: %s", key, data[start:end])
	}
	a.setLines(key, data)
}

// checkTampered checks verify's answer on a tampered archive: exit 1,
// INCOMPLETE, the finding want in the JSON report and in the text one
// (its shard and range), and no finding of a kind but want's and also.
func checkTampered(t *testing.T, v *covVerify, want covFinding, also []string) {
	t.Helper()
	c := v.rep.Coverage
	if v.code != 1 || c.Verdict != archive.VerdictIncomplete || !strings.HasPrefix(firstLine(v.text), "INCOMPLETE: ") {
		t.Errorf("verify exits %d, verdict %q, first line %q; want 1, incomplete", v.code, c.Verdict, firstLine(v.text))
	}
	found := false
	for _, f := range c.Findings {
		got := covFinding{f.Kind, f.Shard, f.From, f.To, f.Object}
		if want.object != "" && strings.HasSuffix(f.Object, want.object) {
			got.object = want.object // verify names it with the archive's prefix
		}
		found = found || got == want
		if f.Kind != want.kind && !slices.Contains(also, f.Kind) {
			t.Errorf("unexpected finding %s in shard %s: %s", f.Kind, f.Shard, f.Detail)
		}
	}
	if !found {
		t.Errorf("no finding %+v among %d:\n%s", want, c.FindingsTotal, v.text)
	}
	for _, s := range []string{want.shard, want.to} {
		if !strings.Contains(v.text, s) {
			t.Errorf("the text report does not name %s:\n%s", s, v.text)
		}
	}
	t.Logf("verify: %s", firstLine(v.text))
}

// TestCoverageTrimmedStart: a shard whose first records the stream trimmed
// (its 24 h retention passed on the engine's clock) before the archiver
// first read it. The archive holds every expiry still in the stream, and
// `archiver verify --from` reports the shard's start as trimmed: the first
// record read, and its creation time, before which records were lost.
func TestCoverageTrimmedStart(t *testing.T) {
	t.Parallel()
	b := newCovBed(t, "--ttl-interval", "-1", "--stream-shards", "1", "--shard-rollover", "1000000")
	t0 := b.clock().Add(-26 * time.Hour).Truncate(time.Minute)
	b.setClock(t0)
	b.expire("gone", 0, 30)
	b.sweep()
	t1 := t0.Add(25 * time.Hour) // the first records are past the retention
	b.setClock(t1)
	kept := b.expire("kept", 0, 30)
	b.sweep()
	shard, first := firstRecord(t, b)
	if k := itemKey(event.Item(first.Dynamodb.Keys)); !strings.HasPrefix(k, "kept-") || !aws.ToTime(first.Dynamodb.ApproximateCreationDateTime).Equal(t1) {
		t.Fatalf("the stream's first record is of %s, created %v; want the first of wave kept, at %v (the others trimmed)",
			k, first.Dynamodb.ApproximateCreationDateTime, t1)
	}

	w := b.run("run-w1", "--checkpoint", "file://"+filepath.Join(b.work, "checkpoints.json"),
		"--sink", b.s3URL("ttl", "flush-interval", "1s", "manifest-interval", "1s"))
	far := newS3Reader(b.s3, "ttl/")
	eventually.Wait(t, time.Minute, "every expiry still in the stream reaches S3", func() error {
		if w.exited() {
			t.Fatalf("%s exited on its own: %v\n%s", w.name, w.err, w.tail(30))
		}
		if err := far.poll(t, b.ctx); err != nil {
			return err
		}
		return far.tally.allArrived(kept)
	})
	stopClean(t, w)

	v := b.verify(b.s3URL("ttl"))
	c := v.rep.Coverage
	seq := aws.ToString(first.Dynamodb.SequenceNumber)
	if v.code != 1 || c.FindingsTotal != 1 || !strings.HasPrefix(firstLine(v.text), "INCOMPLETE: 1 finding (1 trimmed)") {
		t.Fatalf("verify exits %d with %d findings, first line %q; want 1, one trimmed start\n%s", v.code, c.FindingsTotal, firstLine(v.text), v.text)
	}
	f := c.Findings[0]
	if f.Kind != manifest.FindTrimmed || f.Shard != shard || f.From != "" || f.To != seq || !f.Before.Equal(t1) {
		t.Errorf("finding %s in shard %s (%q, %q], before %v; want trimmed in %s up to %s, before %v", f.Kind, f.Shard, f.From, f.To, f.Before, shard, seq, t1)
	}
	for _, s := range []string{shard, seq, t1.UTC().Format(time.RFC3339), "were trimmed before the archiver first read the shard"} {
		if !strings.Contains(v.text, s) {
			t.Errorf("the text report does not say %q:\n%s", s, v.text)
		}
	}
	if len(c.Shards) != 1 || c.Shards[0].Gaps != 0 || v.rep.Events != int64(len(kept)) {
		t.Errorf("verify: %d shards, %d distinct events; want 1 shard covered without a gap after its trimmed start, %d events", len(c.Shards), v.rep.Events, len(kept))
	}
	t.Logf("verify: %s", firstLine(v.text))
}

// firstRecord is the table's one shard and the first record the stream
// still holds in it.
func firstRecord(t *testing.T, b *covBed) (string, stypes.Record) {
	t.Helper()
	shards := describeShards(t, b.ctx, b.streams, b.stream)
	if len(shards) != 1 {
		t.Fatalf("the stream has %d shards, want 1", len(shards))
	}
	id := aws.ToString(shards[0].ShardId)
	it, err := b.streams.GetShardIterator(b.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(b.stream), ShardId: aws.String(id),
		ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.streams.GetRecords(b.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
	if err != nil {
		t.Fatalf("GetRecords at the trim horizon of %s: %v", id, err)
	}
	if len(out.Records) == 0 {
		t.Fatalf("GetRecords at the trim horizon of %s: no record", id)
	}
	return id, out.Records[0]
}
