package s3sink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/promreg"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/parquetline"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// Outcomes of a key conflict (a 412 answer to a conditional write), the
// outcome label of archiver_sink_conflicts_total.
const (
	// ConflictSameContent: the object holds the very bytes the sink wrote.
	ConflictSameContent = "same_content"
	// ConflictSameEvents: other bytes, the same events (see [Sink]).
	ConflictSameEvents = "same_events"
	// ConflictDistinctKey: other events; the object was written under
	// the distinct key (or was already there).
	ConflictDistinctKey = "distinct_key"
	// ConflictUnresolved: the distinct key too holds other events; the
	// batches fail with a permanent error.
	ConflictUnresolved = "unresolved"
)

// maxConflictLine bounds one line read back from an existing object. An
// archive line holds at most two 400 KB items; a longer line is not one
// the sink wrote, and the object counts as holding other events.
const maxConflictLine = 8 << 20

// conflictCounter returns the archiver_sink_conflicts_total counter of a
// sink for an outcome.
type conflictCounter func(outcome string) prometheus.Counter

func newConflictCounter(reg prometheus.Registerer, sink string) conflictCounter {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_sink_conflicts_total",
		Help: "S3 object keys found taken by a conditional write, by how the conflict was resolved (same_content, same_events, distinct_key, unresolved).",
	}, []string{"sink", "outcome"})
	if reg != nil {
		vec = promreg.Register(reg, vec)
	}
	return func(outcome string) prometheus.Counter { return vec.WithLabelValues(sink, outcome) }
}

// existingMatch says how an existing object compares with an upload.
type existingMatch int

const (
	matchNone   existingMatch = iota // other events (or unreadable)
	matchEvents                      // the same event identities, other bytes
	matchBytes                       // the same bytes
)

// resolveConflict runs after a conditional PutObject of p found its key
// taken. It returns the outcome and where p's bytes (or events) now are,
// or an error: a failed request (classified as any S3 error) or a
// permanent conflict when the distinct key also holds other content.
func (s *Sink) resolveConflict(ctx context.Context, p *s3Put) (string, s3Stored, error) {
	key := aws.ToString(p.in.Key)
	checksum := base64.StdEncoding.EncodeToString(p.sum[:])
	own := s3Stored{key: key, size: int64(len(p.body)), sha256: hex.EncodeToString(p.sum[:])}
	ex, err := s.compareExisting(ctx, key, p.lines, checksum)
	if err != nil {
		return "", s3Stored{}, err
	}
	switch ex.match {
	case matchBytes:
		s.log.Info("s3 object already there with the same content", zap.String("key", key))
		return ConflictSameContent, own, nil
	case matchEvents:
		s.log.Info("s3 object already there with the same events in other bytes; counted as written", zap.String("key", key))
		return ConflictSameEvents, ex.stored, nil
	}
	if p.sameProof != nil {
		if st, ok, err := s.storedProof(ctx, key, p); err != nil || ok {
			return ConflictSameEvents, st, err
		}
	}
	again := *p.in
	again.Key = aws.String(p.alt)
	again.Body = bytes.NewReader(p.body)
	own.key = p.alt
	_, err = s.api.PutObject(ctx, &again)
	if err != nil && isPreconditionFailed(err) {
		ex, err = s.compareExisting(ctx, p.alt, p.lines, checksum)
		if err == nil && ex.match == matchNone {
			return ConflictUnresolved, s3Stored{}, sinkapi.Permanent(fmt.Errorf("%s holds other content, and so does %s: %w", key, p.alt, recorder.ErrConflict))
		}
		if err == nil && ex.match == matchEvents {
			own = ex.stored
		}
	}
	if err != nil {
		return "", s3Stored{}, fmt.Errorf("%s holds other content; writing it under %s: %w", key, p.alt, err)
	}
	s.log.Warn("s3 object key holds other content; written under a distinct key", zap.String("key", key), zap.String("written", p.alt))
	return ConflictDistinctKey, own, nil
}

// storedProof reads the manifest at key and reports whether it is the
// same proof as p's (see [recorder.SameProof]), and then where it is stored.
func (s *Sink) storedProof(ctx context.Context, key string, p *s3Put) (s3Stored, bool, error) {
	data, err := s.readManifest(ctx, s.relKey(key))
	if err != nil {
		return s3Stored{}, false, fmt.Errorf("reading existing manifest %s: %w", key, err)
	}
	if !p.sameProof(data, p.body) {
		return s3Stored{}, false, nil
	}
	sum := sha256.Sum256(data)
	s.log.Info("s3 manifest already there proving the same range; counted as written", zap.String("key", key))
	return s3Stored{key: key, size: int64(len(data)), sha256: hex.EncodeToString(sum[:])}, true, nil
}

// distinctKey is key with the first 12 hex digits of the object's SHA-256
// before its extension: REGION.SHARD-FIRST-LAST.0123456789ab.jsonl.gz.
func distinctKey(key, ext string, sum [sha256.Size]byte) string {
	return strings.TrimSuffix(key, ext) + "." + hex.EncodeToString(sum[:6]) + ext
}

// existing is how an object found at a key compares with an upload, and,
// when it holds the same events in other bytes, where those are.
type existing struct {
	match  existingMatch
	stored s3Stored
}

// compareExisting compares the object at key with an upload whose body
// has the given base64 SHA-256 and whose uncompressed lines lines returns
// (nil: compare the bytes alone, as for a manifest). The object's stored
// checksum answers when it matches; otherwise the object is read, line by
// line with lines, one line in memory at a time, and its event identities
// compared with the upload's; its size and SHA-256 are taken on the way.
func (s *Sink) compareExisting(ctx context.Context, key string, lines func() []byte, checksum string) (existing, error) {
	head, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.c.Bucket), Key: aws.String(key), ChecksumMode: s3types.ChecksumModeEnabled,
	})
	if err != nil {
		return existing{}, fmt.Errorf("checking existing object %s: %w", key, err)
	}
	if head.ChecksumSHA256 != nil && head.ChecksumType != s3types.ChecksumTypeComposite && *head.ChecksumSHA256 == checksum {
		return existing{match: matchBytes}, nil
	}
	var want map[string]bool
	if lines != nil {
		if want, err = lineIdentities(lines()); err != nil {
			return existing{}, fmt.Errorf("s3 sink: reading back its own lines: %w", err)
		}
	}
	get, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.c.Bucket), Key: aws.String(key)})
	if err != nil {
		return existing{}, fmt.Errorf("reading existing object %s: %w", key, err)
	}
	defer get.Body.Close()
	body := &recordingReader{r: get.Body, h: sha256.New()}
	same, reason := true, ""
	if want != nil {
		same, reason = sameIdentities(body, aws.ToString(get.ContentEncoding), key, want)
	}
	if body.err != nil {
		return existing{}, fmt.Errorf("reading existing object %s: %w", key, body.err)
	}
	if same {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return existing{}, fmt.Errorf("reading existing object %s: %w", key, err)
		}
		sum := body.h.Sum(nil)
		ex := existing{match: matchEvents, stored: s3Stored{key: key, size: body.n, sha256: hex.EncodeToString(sum)}}
		if base64.StdEncoding.EncodeToString(sum) == checksum {
			ex.match = matchBytes
		}
		if ex.match == matchBytes || want != nil {
			return ex, nil
		}
		reason = "other bytes"
	}
	s.log.Info("s3 object under the key holds other content", zap.String("key", key), zap.String("why", reason))
	return existing{match: matchNone}, nil
}

// recordingReader passes an object's body through, hashing and counting
// it and keeping the first read error, so that a broken connection is
// told apart from content that does not decode.
type recordingReader struct {
	r   io.Reader
	h   hash.Hash
	n   int64 // bytes read
	err error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// sameIdentities reads an object's lines, decompressed by its
// Content-Encoding or else its key's extension (gzip, zstd or none), or
// a Parquet object's rows as their lines (parquetline.Lines, the whole
// file in memory: its footer comes last), and reports whether their
// identities are exactly want; if not, it says why. It stops at the
// first identity that is not in want.
func sameIdentities(body io.Reader, encoding, key string, want map[string]bool) (bool, string) {
	if strings.HasSuffix(key, parquetline.Ext) {
		return sameParquetIdentities(body, want)
	}
	r, closeFn, err := objstore.Decompress(body, encoding, key)
	if err != nil {
		return false, err.Error()
	}
	defer closeFn()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxConflictLine)
	seen := make(map[string]bool, len(want))
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		id, err := lineIdentity(sc.Bytes())
		if err != nil {
			return false, fmt.Sprintf("line %d: %v", n, err)
		}
		if !want[id] {
			return false, "holds an event the upload does not"
		}
		seen[id] = true
	}
	if err := sc.Err(); err != nil {
		return false, err.Error()
	}
	if len(seen) != len(want) {
		return false, fmt.Sprintf("holds %d of the upload's %d events", len(seen), len(want))
	}
	return true, ""
}

// sameParquetIdentities is sameIdentities for a Parquet object.
func sameParquetIdentities(body io.Reader, want map[string]bool) (bool, string) {
	data, err := io.ReadAll(body)
	if err != nil {
		return false, err.Error()
	}
	seen := make(map[string]bool, len(want))
	errOther := errors.New("holds an event the upload does not")
	err = parquetline.Lines(data, func(n int, line []byte) error {
		id, err := lineIdentity(line)
		if err != nil {
			return fmt.Errorf("row %d: %w", n, err)
		}
		if !want[id] {
			return errOther
		}
		seen[id] = true
		return nil
	})
	if err != nil {
		return false, err.Error()
	}
	if len(seen) != len(want) {
		return false, fmt.Sprintf("holds %d of the upload's %d events", len(seen), len(want))
	}
	return true, ""
}

// lineIdentities returns the identities of the lines in data.
func lineIdentities(data []byte) (map[string]bool, error) {
	ids := map[string]bool{}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) == 0 {
			continue
		}
		id, err := lineIdentity(line)
		if err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, nil
}

// lineIdentity is what makes an archive line the same event for conflict
// resolution: Metadata.eventID, and for a dead letter also the failing
// sink (DeadLetter.sink, see [event.DeadLetter]), so that dead letters of
// one event from two sinks are both kept. A line without an event ID is
// identified by its bytes.
func lineIdentity(line []byte) (string, error) {
	var l struct {
		Metadata *struct {
			EventID string `json:"eventID"`
		} `json:"Metadata"`
		DeadLetter *struct {
			Sink string `json:"sink"`
		} `json:"DeadLetter"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return "", fmt.Errorf("not an archive line: %w", err)
	}
	if l.Metadata == nil {
		return "", errors.New("not an archive line: no Metadata")
	}
	id := "event:" + l.Metadata.EventID
	if l.Metadata.EventID == "" {
		sum := sha256.Sum256(line)
		id = "line:" + hex.EncodeToString(sum[:])
	}
	if l.DeadLetter != nil {
		id += "\x00dead-letter:" + l.DeadLetter.Sink
	}
	return id, nil
}
