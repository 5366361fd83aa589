package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks"
)

const (
	archiveBenchShards = 4
	archiveBenchHours  = 6
)

// archiveSizes are the events of the bench archive and the rounds.
type archiveSizes struct{ events, rounds int }

func archiveSizesFor(tiny bool) archiveSizes {
	if tiny {
		return archiveSizes{events: 400, rounds: 1}
	}
	return archiveSizes{events: 100_000, rounds: 3}
}

// runArchiveBench measures the read `archiver verify` makes (archive.Events
// with verify's archive.Verifier) over a file:// archive
// of gzip objects the S3 sink rendered, against a plain loop that reads
// and gunzips the same files, in MB/s of compressed bytes.
func runArchiveBench(ctx context.Context, w io.Writer, tiny bool) error {
	sz := archiveSizesFor(tiny)
	dir, err := os.MkdirTemp("", "archive-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files, size, err := writeBenchArchive(ctx, dir, sz.events)
	if err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	lines, err := gunzipLoop(files) // and the files are in the page cache
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "archive: %d events in %d gzip objects, %.1f MB compressed, %.1f MB of lines (S3 sink layout in a directory)\n",
		sz.events, len(files), float64(size)/1e6, float64(lines)/1e6)
	mb := float64(size) / 1e6
	loop, ceil, read, cov := &rates{mb: mb, events: sz.events}, &rates{mb: mb, events: sz.events}, &rates{mb: mb, events: sz.events}, &rates{mb: mb, events: sz.events}
	for range sz.rounds {
		if err := loop.time(func() (int64, error) { _, err := gunzipLoop(files); return int64(sz.events), err }); err != nil {
			return err
		}
		if err := ceil.time(func() (int64, error) { return verifyCeiling(files) }); err != nil {
			return err
		}
		if err := read.time(func() (int64, error) { return verifyRead(ctx, dir, false) }); err != nil {
			return err
		}
		if err := cov.time(func() (int64, error) { return verifyRead(ctx, dir, true) }); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "  read + gunzip loop:                   %s\n", loop)
	fmt.Fprintf(w, "  ceiling (loop + lines, JSON, IDs):    %s\n", ceil)
	fmt.Fprintf(w, "  verify (archive.Events + Verifier):   %s, decoding on every core\n", read)
	fmt.Fprintf(w, "  verify + Coverage (as archiver verify: manifests, SHA-256, lines): %s\n", cov)
	fmt.Fprintf(w, "  coverage: %+.0f%% CPU per event, %+.0f%% wall (medians)\n", 100*(benchkit.Median(cov.usEv)/benchkit.Median(read.usEv)-1), 100*(read.wall()/cov.wall()-1))
	fmt.Fprintf(w, "  ratio verify / loop: %.0f%% (target >= 70%%); per CPU second %.0f%%\n", 100*read.wall()/loop.wall(), 100*read.cpu()/loop.cpu())
	fmt.Fprintf(w, "  per CPU second: verify / ceiling %.0f%%, ceiling / loop %.0f%%; load average %s\n",
		100*read.cpu()/ceil.cpu(), 100*ceil.cpu()/loop.cpu(), benchkit.LoadAvg())
	return nil
}

// rates are the MB/s and MB per CPU second of the rounds of one reader of
// the bench archive, and its CPU microseconds per event.
type rates struct {
	mb                 float64
	events             int // every round must read them all
	perS, perCPU, usEv []float64
}

// time runs one round of fn (which returns the events it read) after a
// GC, and records it.
func (r *rates) time(fn func() (int64, error)) error {
	benchkit.Settle()
	start, cpu := time.Now(), benchkit.SelfCPU()
	n, err := fn()
	if err != nil {
		return err
	}
	if n != int64(r.events) {
		return fmt.Errorf("read %d events, want %d", n, r.events)
	}
	wall, used := time.Since(start).Seconds(), (benchkit.SelfCPU() - cpu).Seconds()
	r.perS, r.perCPU, r.usEv = append(r.perS, r.mb/wall), append(r.perCPU, r.mb/used), append(r.usEv, used*1e6/float64(n))
	return nil
}

func (r *rates) wall() float64 { return benchkit.Median(r.perS) }
func (r *rates) cpu() float64  { return benchkit.Median(r.perCPU) }

func (r *rates) String() string {
	return fmt.Sprintf("%6.1f MB/s, %6.1f MB per CPU second (%.2f us CPU per event; medians of %d)",
		r.wall(), r.cpu(), benchkit.Median(r.usEv), len(r.perS))
}

// gunzipLoop reads and decompresses every file, one after the other, and
// returns the decompressed bytes.
func gunzipLoop(files []string) (int64, error) {
	var total int64
	var zr *gzip.Reader
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(b))
		} else {
			err = zr.Reset(bytes.NewReader(b))
		}
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(io.Discard, zr)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// verifyRead reads the archive as `archiver verify` does (its
// archive.Verifier: every line checked against its key, every event
// counted per partition; with coverage, its archive.Coverage too: the
// manifests read and proven, every object's stored bytes hashed, every
// line placed in its shard's coverage) and counts its events.
func verifyRead(ctx context.Context, dir string, coverage bool) (int64, error) {
	v := archive.NewVerifier()
	o := v.Hook(archive.Options{SkipImages: true})
	var cov *archive.Coverage
	if coverage {
		cov = archive.NewCoverage(archive.Selection{})
		o = cov.Hook(o)
	}
	a, err := archive.Open(ctx, "file://"+dir, o)
	if err != nil {
		return 0, err
	}
	if cov != nil {
		if err := cov.Load(ctx, a); err != nil {
			return 0, err
		}
	}
	st, err := a.Events(ctx, archive.Selection{}, func(l archive.Line) error {
		v.Event(&l.Event)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if r := v.Finish(a.URL(), st); r.Undecodable > 0 || len(r.Mismatches) > 0 || len(r.StrayKeys) > 0 {
		return 0, fmt.Errorf("%d lines do not decode, %d objects do not match their keys, %d keys off the layout", r.Undecodable, len(r.Mismatches), len(r.StrayKeys))
	}
	if cov != nil {
		if r := cov.Finish(); r.Verdict != archive.VerdictComplete || r.ObjectsVerified == 0 {
			return 0, fmt.Errorf("coverage: %s", r.Summary)
		}
	}
	return st.Events, nil
}

// writeBenchArchive renders n events with the real S3 sink (gzip) into
// dir, with a coverage manifest per object as a recording sink writes
// them, and returns the data files and their total size.
func writeBenchArchive(ctx context.Context, dir string, n int) ([]string, int64, error) {
	c := sinks.S3Config{Bucket: "bench", FlushInterval: time.Hour}
	sk, err := sinks.NewS3WithClient(c, dirS3{dir}, sinks.Options{NoManifests: true})
	if err != nil {
		return nil, 0, err
	}
	per := n / archiveBenchShards
	for s := range archiveBenchShards {
		shard := "shardId-0000000" + strconv.Itoa(s)
		evs := benchArchiveEvents(shard, s*per, per)
		if err := sk.Write(ctx, sinks.Batch{ShardID: shard, Events: evs}, nil); err != nil {
			return nil, 0, err
		}
	}
	if err := sk.Close(ctx); err != nil {
		return nil, 0, err
	}
	var files []string
	var size int64
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files, size = append(files, p), size+info.Size()
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return files, size, writeBenchManifests(dir, files)
}

// writeBenchManifests records each object of the bench archive in a
// manifest of its own, chained per shard in sequence order.
func writeBenchManifests(dir string, files []string) error {
	objs := make([]archive.Object, 0, len(files))
	for _, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			return err
		}
		o, err := archive.ParseKey(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		o.Key = filepath.ToSlash(rel)
		objs = append(objs, o)
	}
	slices.SortFunc(objs, func(a, b archive.Object) int {
		return cmp.Or(strings.Compare(a.Shard, b.Shard), event.CompareSequence(a.FirstSeq, b.FirstSeq))
	})
	prev := map[string]string{} // shard -> digest of its last manifest
	to := map[string]string{}
	for _, o := range objs {
		body, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(o.Key)))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		r := manifest.Range{StreamARN: benchStreamARN, Region: "us-east-1", Table: o.Table, ShardID: o.Shard, From: to[o.Shard], To: o.LastSeq}
		m := manifest.New(r, []manifest.Object{{Key: o.Key, Bytes: int64(len(body)), SHA256: hex.EncodeToString(sum[:]), First: o.FirstSeq, Last: o.LastSeq}},
			prev[o.Shard], "bench", time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC))
		enc := manifest.Encode(m)
		p := filepath.Join(dir, filepath.FromSlash(manifest.Key(m)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, enc, 0o644); err != nil {
			return err
		}
		prev[o.Shard], to[o.Shard] = manifest.Digest(enc), m.To
	}
	return nil
}

// benchStreamARN is the stream the bench archive's events were read from.
const benchStreamARN = "arn:aws:dynamodb:us-east-1:000000000000:table/SessionData/stream/2026-03-04T00:00:00.000"

// benchArchiveEvents are expired session items of one shard, spread over
// archiveBenchHours hours.
func benchArchiveEvents(shard string, first, n int) []event.Event {
	t0 := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	step := time.Duration(archiveBenchHours) * time.Hour / time.Duration(n)
	evs := make([]event.Event, n)
	for i := range evs {
		id := first + i
		keys := event.Item{
			"UserName":  &types.AttributeValueMemberS{Value: "user" + strconv.Itoa(id%997)},
			"SessionId": &types.AttributeValueMemberS{Value: "session-" + strconv.Itoa(id)},
		}
		old := event.Item{
			"UserName": keys["UserName"], "SessionId": keys["SessionId"],
			"CreationTime":   &types.AttributeValueMemberN{Value: "1772582400"},
			"ExpirationTime": &types.AttributeValueMemberN{Value: "1772586000"},
			"SessionInfo": &types.AttributeValueMemberM{Value: event.Item{
				"device": &types.AttributeValueMemberS{Value: "laptop"},
				"pages":  &types.AttributeValueMemberN{Value: strconv.Itoa(id % 50)},
				"cart":   &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "sku-" + strconv.Itoa(id)}}},
			}},
		}
		created := t0.Add(time.Duration(i) * step)
		evs[i] = event.Event{
			Kind: event.Expired, Table: "SessionData", ShardID: shard, EventName: "REMOVE", DeletedBy: event.DeletedByTTL, Region: "us-east-1",
			StreamARN:      benchStreamARN,
			SequenceNumber: fmt.Sprintf("1%020d", id), EventID: fmt.Sprintf("%032x", id),
			ApproximateCreationTime: created, Keys: keys, OldImage: old, SizeBytes: 180,
			TTLAttribute: "ExpirationTime", TTLValue: "1772586000", TTLTime: time.Unix(1772586000, 0).UTC(), TTLLag: created.Sub(time.Unix(1772586000, 0)),
		}
	}
	return evs
}

// dirS3 is the S3 sink's client writing objects as files under a
// directory (keys become paths), so the bench reads the sink's real
// objects without an S3 server.
type dirS3 struct{ dir string }

var errDirS3 = errors.New("not served by the bench's directory store")

func (d dirS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	p := filepath.Join(d.dir, filepath.FromSlash(*in.Key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	return &s3.PutObjectOutput{}, os.WriteFile(p, b, 0o644)
}

func (dirS3) HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	return nil, errDirS3
}

func (dirS3) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return nil, errDirS3
}

func (dirS3) HeadBucket(context.Context, *s3.HeadBucketInput, ...func(*s3.Options)) (*s3.HeadBucketOutput, error) {
	return nil, errDirS3
}

func (dirS3) DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	return nil, errDirS3
}

// verifyCeiling is the least work any verify of the bench archive must
// do, on one goroutine: the loop's read and gunzip, then every line found
// (bufio's ReadSlice, no copy), checked to be one JSON object (jsonValue,
// syntax only: no UTF-8 check, nothing built), and its event ID found and
// added to a set of 16-byte IDs. It returns the distinct events.
func verifyCeiling(files []string) (int64, error) {
	var zr *gzip.Reader
	br := bufio.NewReaderSize(nil, 1<<20)
	seen := map[[16]byte]struct{}{}
	idKey := []byte(`"eventID":"`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(b))
		} else {
			err = zr.Reset(bytes.NewReader(b))
		}
		if err != nil {
			return 0, err
		}
		br.Reset(zr)
		for {
			line, err := br.ReadSlice('\n')
			if len(line) > 0 {
				line = bytes.TrimSuffix(line, []byte("\n"))
				end, ok := jsonValue(line, 0)
				i := bytes.Index(line, idKey)
				if !ok || end != len(line) || line[0] != '{' || i < 0 || len(line) < i+len(idKey)+33 {
					return 0, fmt.Errorf("%s: not a JSON object with an event ID: %.80q", f, line)
				}
				var id [16]byte
				if _, err := hex.Decode(id[:], line[i+len(idKey):i+len(idKey)+32]); err != nil {
					return 0, err
				}
				seen[id] = struct{}{}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, err
			}
		}
	}
	return int64(len(seen)), nil
}

// jsonValue checks the JSON value at b[i:] (RFC 8259 syntax, no
// whitespace, as the sinks write) and returns where it ends.
func jsonValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		if j := bytes.IndexByte(b[i+1:], '"'); j >= 0 && bytes.IndexByte(b[i+1:i+1+j], '\\') < 0 {
			return i + j + 2, true
		}
		for i++; i < len(b); i++ {
			switch b[i] {
			case '"':
				return i + 1, true
			case '\\':
				i++
			}
		}
		return i, false
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i++
		if i < len(b) && b[i] == closer {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i, ok = jsonValue(b, i); !ok || i >= len(b) || b[i-1] != '"' || b[i] != ':' {
					return i, false
				}
				i++
			}
			if i, ok = jsonValue(b, i); !ok || i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i++
			case closer:
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(b[i:], []byte(lit)) {
				return i + len(lit), true
			}
		}
		return i, false
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
			j++
		}
		return j, true
	}
	return i, false
}
