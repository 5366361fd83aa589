package s3sink

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// Lister is the listing an S3 sink's client needs to find, on a shard's
// first Record in a process, the manifest its range follows (*s3.Client
// has it). It is apart from [API] so that clients written for the sink
// before manifests still build; such a client's Record fails.
type Lister interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// errNoLister is Record's error when the sink's client cannot list.
var errNoLister = errors.New("the S3 client cannot list objects (no ListObjectsV2)")

// Record makes a manifest of r durable in the archive, under
// PREFIX/_manifests/ (see [manifest.Key]), and returns once S3 confirmed
// it. It lists every object the sink made durable holding events of r's
// shard in (From, To] (keys without the prefix, sizes and SHA-256 of the
// bytes as stored; after a key conflict, the object that holds the
// events), and names the previous manifest of the shard's lineage: the
// one this sink last recorded for the shard when it ends at From, or
// else the one the archive holds (for From "", the parent's last, ended
// one). The manifest is written with If-None-Match: *; a manifest of the
// same range with other bytes already there puts it at
// [manifest.ConflictKey] (a shard's last, empty range (To, To], whose
// key the range before it holds, goes there first). Called only once every event of the shard up to
// To was acknowledged, so every object holding them is durable and
// tracked. On failure the range stays as it was: call again with the
// same From. A sink opened with manifests=false returns
// [recorder.ErrNotRecording].
func (s *Sink) Record(ctx context.Context, r manifest.Range) error {
	if s.rec == nil {
		return recorder.ErrNotRecording
	}
	return s.rec.Record(ctx, r)
}

// RecordDue reports whether the shard's range is due to be recorded: the
// sink made manifest-objects objects of it durable since its last
// manifest, or manifest-interval passed since that manifest (or since the
// sink first heard of the shard). It never blocks on I/O.
func (s *Sink) RecordDue(streamARN, shardID string) bool {
	return s.rec != nil && s.rec.Due(streamARN, shardID)
}

// track books an uploaded object for its shard's next manifest.
func (s *Sink) track(bf *s3Buffer, stored s3Stored) {
	if s.rec == nil {
		return
	}
	s.rec.Track(recorder.ShardRef{Stream: bf.stream, Shard: bf.key.shard}, manifest.Object{Key: s.relKey(stored.key), Bytes: stored.size,
		SHA256: stored.sha256, First: bf.first, Last: bf.last})
}

// rootKey is a key relative to the archive's root (as manifests name
// objects) with the prefix; relKey is the reverse.
func (s *Sink) rootKey(rel string) string {
	if s.c.Prefix == "" {
		return rel
	}
	return s.c.Prefix + "/" + rel
}

func (s *Sink) relKey(key string) string {
	if s.c.Prefix == "" {
		return key
	}
	return strings.TrimPrefix(key, s.c.Prefix+"/")
}

func (s *Sink) listManifests(ctx context.Context, prefix string) ([]string, error) {
	l, ok := s.api.(Lister)
	if !ok {
		return nil, errNoLister
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.c.Bucket), Prefix: aws.String(s.rootKey(prefix))}
	var keys []string
	for {
		out, err := l.ListObjectsV2(ctx, in)
		if err != nil {
			err = fmt.Errorf("listing s3://%s/%s: %w", s.c.Bucket, aws.ToString(in.Prefix), err)
			if permanentS3(err) { // no such bucket, access denied: as for a put
				err = sinkapi.Permanent(err)
			}
			return nil, err
		}
		for _, o := range out.Contents {
			keys = append(keys, s.relKey(aws.ToString(o.Key)))
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return keys, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

func (s *Sink) readManifest(ctx context.Context, key string) ([]byte, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.c.Bucket), Key: aws.String(s.rootKey(key))})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(io.LimitReader(out.Body, recorder.MaxBytes+1))
}

// putManifest writes a manifest as the sink writes an object
// (If-None-Match, its encryption, the same retries and conflict
// resolution, compared by bytes, or as the same proof: see
// [recorder.SameProof]; the digest returned is the stored bytes'), in the
// bucket's default storage class: a manifest is read back by the next
// process, which an archive storage class would refuse.
func (s *Sink) putManifest(ctx context.Context, m manifest.Manifest, data []byte) (string, string, error) {
	sum := sha256.Sum256(data)
	key, alt := recorder.Keys(m, data)
	in := &s3.PutObjectInput{
		Bucket:         aws.String(s.c.Bucket),
		Key:            aws.String(s.rootKey(key)),
		IfNoneMatch:    aws.String("*"),
		ContentType:    aws.String("application/json"),
		ContentLength:  aws.Int64(int64(len(data))),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}
	s.encrypt(in)
	stored, err := s.send(ctx, &s3Put{in: in, body: data, sum: sum, alt: s.rootKey(alt), sameProof: recorder.SameProof})
	if err != nil {
		return "", "", err
	}
	return s.relKey(stored.key), stored.sha256, nil
}
