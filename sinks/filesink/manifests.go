package filesink

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/internal/serial"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// Record makes a manifest of r durable in DIR/_manifests/ (see
// [manifest.Key]): written to a temporary file beside it, fsynced, renamed
// and its folder fsynced. It lists every file the sink appended events of
// r's shard to since the shard's last manifest, each with its size after
// the shard's last append to it and the SHA-256 of that prefix: files
// grow, and a prefix is what a reader can check later. Everything else is
// as [S3Sink.Record]: the previous manifest remembered or found in DIR, a
// manifest that does not decode passed over with a warning, other bytes
// at the key written beside it at [manifest.ConflictKey], other bytes
// there too a permanent error. A sink opened with manifests=false returns
// [recorder.ErrNotRecording]; a closed one, [sinkapi.ErrClosed].
func (s *Sink) Record(ctx context.Context, r manifest.Range) error {
	if s.rec == nil {
		return recorder.ErrNotRecording
	}
	// WhileOpen keeps Close from releasing DIR.
	return s.queue.WhileOpen(func() error { return s.rec.Record(ctx, r) })
}

// RecordDue reports whether the shard's range is due to be recorded (see
// [S3Sink.RecordDue]; a file sink's objects are the files a shard
// appended to, so its manifests mostly follow manifest-interval).
func (s *Sink) RecordDue(streamARN, shardID string) bool {
	return s.rec != nil && s.rec.Due(streamARN, shardID)
}

// fileDigest is the running SHA-256 of the first size bytes of a file the
// sink appends to, the file named rel below DIR: an append adds its bytes
// to it, so a manifest's prefix digest costs no second read of the file.
type fileDigest struct {
	rel  string
	h    hash.Hash
	size int64
}

// object is the file as a manifest lists it: its durable size and the
// SHA-256 of those bytes.
func (d *fileDigest) object() manifest.Object {
	return manifest.Object{Key: d.rel, Bytes: d.size, SHA256: hex.EncodeToString(d.h.Sum(nil))}
}

// digestTo makes path's running digest cover its first start bytes (where
// the next append begins): the one kept from the sink's last append, or,
// for a file the sink starts appending to (or one that changed
// meanwhile), hashed from the file once.
func (s *Sink) digestTo(path string, f *os.File, start int64) error {
	if d := s.digests[path]; d != nil && d.size == start {
		return nil
	}
	rel, err := filepath.Rel(s.dir, path)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, start))
	if err != nil {
		return fmt.Errorf("reading %s for its SHA-256: %w", path, err)
	}
	if len(s.digests) >= 4*maxOpenFiles {
		for p := range s.digests {
			if _, open := s.files[p]; !open {
				delete(s.digests, p)
			}
		}
	}
	s.digests[path] = &fileDigest{rel: filepath.ToSlash(rel), h: h, size: n}
	return nil
}

// trackRuns books, for each batch's shard, the files its runs were
// appended to (those in durable) with their durable size and digest.
func (s *Sink) trackRuns(reqs []serial.Req, rendered []*fileLines, durable map[string]manifest.Object) {
	for i, r := range reqs {
		if len(rendered[i].runs) == 0 {
			continue
		}
		ref := recorder.ShardRef{Stream: cmp.Or(r.Batch.StreamARN, r.Batch.Events[0].StreamARN), Shard: cmp.Or(r.Batch.ShardID, r.Batch.Events[0].ShardID)}
		for _, run := range rendered[i].runs {
			o, ok := durable[run.path]
			if !ok {
				continue
			}
			o.First, o.Last = r.Batch.Events[run.first].SequenceNumber, r.Batch.Events[run.last].SequenceNumber
			s.rec.Track(ref, o)
		}
	}
}

func (s *Sink) listManifests(_ context.Context, prefix string) ([]string, error) {
	dir, name := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir, name = prefix[:i], prefix[i+1:]
	}
	names, err := s.root.list(dir)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, n := range names {
		if strings.HasPrefix(n, name) && strings.HasSuffix(n, ".json") {
			keys = append(keys, dir+"/"+n)
		}
	}
	return keys, nil
}

func (s *Sink) readManifest(_ context.Context, key string) ([]byte, error) {
	return s.root.readFile(key, recorder.MaxBytes+1)
}

// putManifest writes data at the first of [recorder.Keys], or at the
// second when the first holds other bytes (see [fileRoot.writeNew]) that
// are not the same proof (see [recorder.SameProof]). It returns the stored
// bytes' digest.
func (s *Sink) putManifest(_ context.Context, m manifest.Manifest, data []byte) (string, string, error) {
	key, alt := recorder.Keys(m, data)
	for _, k := range []string{key, alt} {
		existing, found, err := s.root.writeNew(k, data, recorder.MaxBytes+1)
		if err != nil {
			return "", "", classifyFileError(err)
		}
		if !found || bytes.Equal(existing, data) {
			return k, manifest.Digest(data), nil
		}
		if recorder.SameProof(existing, data) {
			return k, manifest.Digest(existing), nil
		}
	}
	return "", "", sinkapi.Permanent(fmt.Errorf("%s holds another manifest, and so does %s: %w", filepath.Join(s.dir, key), filepath.Join(s.dir, alt), recorder.ErrConflict))
}
