package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/s3test"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks"
)

// covStore is where a test archive lives: an S3 prefix on versitygw or
// a directory; keys are relative to the archive's root.
type covStore interface {
	url() string
	// objects returns every object's bytes by key (manifests included).
	objects(t *testing.T) map[string][]byte
	put(t *testing.T, key string, body []byte)
	remove(t *testing.T, key string)
}

type s3CovStore struct {
	srv    *s3test.Server
	prefix string
}

func (s *s3CovStore) url() string {
	return "s3://" + s3test.Bucket + "/" + s.prefix + "?endpoint=" + s.srv.Endpoint + "&path-style=true&region=us-east-1"
}

func (s *s3CovStore) objects(t *testing.T) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s3test.Bucket), Prefix: aws.String(s.prefix + "/")}
	for {
		list, err := s.srv.Client.ListObjectsV2(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Contents {
			got, err := s.srv.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3test.Bucket), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(got.Body)
			got.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(aws.ToString(o.Key), s.prefix+"/")] = b
		}
		if !aws.ToBool(list.IsTruncated) {
			return out
		}
		in.ContinuationToken = list.NextContinuationToken
	}
}

func (s *s3CovStore) put(t *testing.T, key string, body []byte) {
	t.Helper()
	_, err := s.srv.Client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(s3test.Bucket),
		Key: aws.String(s.prefix + "/" + key), Body: strings.NewReader(string(body))})
	if err != nil {
		t.Fatal(err)
	}
}

func (s *s3CovStore) remove(t *testing.T, key string) {
	t.Helper()
	_, err := s.srv.Client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String(s.prefix + "/" + key)})
	if err != nil {
		t.Fatal(err)
	}
}

type dirCovStore struct{ dir string }

func (d *dirCovStore) url() string { return "file://" + d.dir }

func (d *dirCovStore) objects(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(d.dir, p)
		if err != nil || strings.HasPrefix(rel, "_archiver") {
			return err
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (d *dirCovStore) put(t *testing.T, key string, body []byte) {
	t.Helper()
	p := filepath.Join(d.dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (d *dirCovStore) remove(t *testing.T, key string) {
	t.Helper()
	if err := os.Remove(filepath.Join(d.dir, filepath.FromSlash(key))); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// covArchive builds an archive as `archiver run` with recording sinks
// writes it: events through the real sink, then, per range of a shard, a
// manifest (manifest.New, Encode) listing the objects the range's write
// created or grew, with their size and SHA-256, stored at manifest.Key
// under _manifests/ and chained to the shard's previous one.
type covArchive struct {
	t    *testing.T
	st   covStore
	prev map[string]string // stream and shard -> digest of its last manifest
	to   map[string]string // stream and shard -> To of its last manifest
}

func newCovArchive(t *testing.T, st covStore) *covArchive {
	return &covArchive{t: t, st: st, prev: map[string]string{}, to: map[string]string{}}
}

// covRange changes a range of evs, and the digest of the manifest before
// it, before its manifest is made.
type covRange func(r *manifest.Range, prev *string, evs []event.Event)

// ended makes the range its shard's last.
func ended(r *manifest.Range, _ *string, _ []event.Event) { r.Ended = true }

// trimmedStart says records before the range's first had been trimmed.
func trimmedStart(r *manifest.Range, _ *string, evs []event.Event) {
	r.Trimmed = &manifest.Trimmed{First: evs[0].SequenceNumber, Time: evs[0].ApproximateCreationTime}
}

// begunAt makes the range the first recorded of a shard read before
// recording began: it starts after from and names no previous manifest.
func begunAt(from string) covRange {
	return func(r *manifest.Range, prev *string, _ []event.Event) { r.From, *prev = from, "" }
}

// child makes the range's shard a child of parent: its first range names
// the parent's last manifest.
func (c *covArchive) child(parent string) covRange {
	return func(r *manifest.Range, prev *string, _ []event.Event) {
		r.ParentShardID = parent
		if r.From == "" {
			*prev = c.prev[r.StreamARN+" "+parent]
		}
	}
}

// write sends evs through the real sink of the archive (one batch, one
// object per kind and hour for S3) and closes it.
func (c *covArchive) write(evs []event.Event) {
	c.t.Helper()
	ctx := context.Background()
	sk, _, err := sinks.Open(ctx, c.st.url(), sinks.Options{AWSConfig: s3test.AWSConfig})
	if err != nil {
		c.t.Fatal(err)
	}
	acked := make(chan error, 1)
	if err := sk.Write(ctx, sinks.Batch{StreamARN: evs[0].StreamARN, ShardID: evs[0].ShardID, Events: evs}, func(err error) { acked <- err }); err != nil {
		c.t.Fatal(err)
	}
	if err := sk.Close(ctx); err != nil {
		c.t.Fatal(err)
	}
	if err := <-acked; err != nil {
		c.t.Fatal(err)
	}
}

// record writes evs (one shard's records after the shard's last
// manifest) and records them in a manifest, which it returns.
func (c *covArchive) record(evs []event.Event, opts ...covRange) manifest.Manifest {
	c.t.Helper()
	return c.recordWith(evs, true, opts...)
}

// recordOnly records evs in a manifest listing no object, without
// writing them: for a range whose manifest the test then deletes, leaving
// a gap whose records the archive lacks.
func (c *covArchive) recordOnly(evs []event.Event, opts ...covRange) manifest.Manifest {
	c.t.Helper()
	return c.recordWith(evs, false, opts...)
}

func (c *covArchive) recordWith(evs []event.Event, write bool, opts ...covRange) manifest.Manifest {
	c.t.Helper()
	before := c.st.objects(c.t)
	if write {
		c.write(evs)
	}
	var objs []manifest.Object
	for key, b := range c.st.objects(c.t) {
		if old, ok := before[key]; (!ok || len(old) != len(b)) && !manifest.IsKey(key) {
			sum := sha256.Sum256(b)
			objs = append(objs, manifest.Object{Key: key, Bytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:]),
				First: evs[0].SequenceNumber, Last: evs[len(evs)-1].SequenceNumber})
		}
	}
	first, last := &evs[0], &evs[len(evs)-1]
	id := first.StreamARN + " " + first.ShardID
	r := manifest.Range{StreamARN: first.StreamARN, Region: first.Region, Table: first.Table, ShardID: first.ShardID,
		From: c.to[id], To: last.SequenceNumber, FirstTime: first.ApproximateCreationTime, LastTime: last.ApproximateCreationTime,
		Records: int64(len(evs)), Events: map[event.Kind]int64{}}
	for _, e := range evs {
		r.Events[e.Kind]++
	}
	prev := c.prev[id]
	for _, o := range opts {
		o(&r, &prev, evs)
	}
	m := manifest.New(r, objs, prev, "test-worker", verifyT0.Add(48*time.Hour))
	b := manifest.Encode(m)
	key := manifest.Key(m)
	c.st.put(c.t, key, b)
	c.prev[id], c.to[id] = manifest.Digest(b), m.To
	return m
}

// covEvents are n expiries of table Sessions in region's stream, shard
// shard, sequence numbers from first, one a second from verifyT0 + first
// seconds (within one hour for first+n <= 3600).
func covEvents(region, shard string, first, n int) []event.Event {
	evs := make([]event.Event, n)
	arn := "arn:aws:dynamodb:" + region + ":000000000000:table/Sessions/stream/2026-03-04T00:00:00.000"
	for i := range evs {
		seq := first + i
		key := event.Item{"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("item-%d", seq)}}
		evs[i] = event.Event{
			Kind: event.Expired, Table: "Sessions", StreamARN: arn, Region: region, ShardID: shard,
			EventName: "REMOVE", DeletedBy: event.DeletedByTTL,
			SequenceNumber:          fmt.Sprintf("1%020d", seq),
			EventID:                 fmt.Sprintf("%s-%s-%d", region, shard, seq),
			ApproximateCreationTime: verifyT0.Add(time.Duration(seq) * time.Second),
			Keys:                    key, OldImage: key,
		}
	}
	return evs
}
