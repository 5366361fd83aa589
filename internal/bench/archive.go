package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

const (
	archiveBenchEvents = 100_000
	archiveBenchShards = 4
	archiveBenchHours  = 6
	archiveBenchRounds = 3
)

// runArchiveBench measures the read `archiver verify` makes (archive.Events
// with verify's archive.Verifier) over a file:// archive
// of gzip objects the S3 sink rendered, against a plain loop that reads
// and gunzips the same files, in MB/s of compressed bytes.
func runArchiveBench(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "archive-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files, size, err := writeBenchArchive(ctx, dir)
	if err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	fmt.Fprintf(w, "archive: %d events in %d gzip objects, %.1f MB compressed (S3 sink layout in a directory)\n",
		archiveBenchEvents, len(files), float64(size)/1e6)
	var loopR, readR, loopC, readC []float64
	mb := float64(size) / 1e6
	for range archiveBenchRounds {
		settle()
		start, cpu := time.Now(), cpuSeconds()
		if _, err := gunzipLoop(files); err != nil {
			return err
		}
		loopR, loopC = append(loopR, mb/time.Since(start).Seconds()), append(loopC, mb/(cpuSeconds()-cpu))
		settle()
		start, cpu = time.Now(), cpuSeconds()
		n, err := verifyRead(ctx, dir)
		if err != nil {
			return err
		}
		readR, readC = append(readR, mb/time.Since(start).Seconds()), append(readC, mb/(cpuSeconds()-cpu))
		if n != archiveBenchEvents {
			return fmt.Errorf("read %d events, want %d", n, archiveBenchEvents)
		}
	}
	fmt.Fprintf(w, "  read + gunzip loop:                 %7.1f MB/s (median of %d; %.1f MB per CPU second)\n", median(loopR), archiveBenchRounds, median(loopC))
	fmt.Fprintf(w, "  verify (archive.Events + Verifier): %7.1f MB/s (median of %d; %.1f MB per CPU second, decoding on every core)\n", median(readR), archiveBenchRounds, median(readC))
	fmt.Fprintf(w, "  ratio verify / loop: %.0f%% (target >= 70%%); per CPU second %.0f%%; load average %s\n",
		100*median(readR)/median(loopR), 100*median(readC)/median(loopC), loadAvg())
	return nil
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
// counted per partition) and counts its events.
func verifyRead(ctx context.Context, dir string) (int64, error) {
	v := archive.NewVerifier()
	a, err := archive.Open(ctx, "file://"+dir, v.Hook(archive.Options{SkipImages: true}))
	if err != nil {
		return 0, err
	}
	st, err := a.Events(ctx, archive.Selection{}, func(l archive.Line) error {
		v.Event(&l.Event)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if r := v.Finish(a.URL(), st); r.Undecodable > 0 || len(r.Mismatches) > 0 {
		return 0, fmt.Errorf("%d lines do not decode, %d objects do not match their keys", r.Undecodable, len(r.Mismatches))
	}
	return st.Events, nil
}

// writeBenchArchive renders the events with the real S3 sink (gzip) into
// dir and returns the files and their total size.
func writeBenchArchive(ctx context.Context, dir string) ([]string, int64, error) {
	c := sinks.S3Config{Bucket: "bench", FlushInterval: time.Hour}
	sk, err := sinks.NewS3WithClient(c, dirS3{dir}, sinks.Options{})
	if err != nil {
		return nil, 0, err
	}
	per := archiveBenchEvents / archiveBenchShards
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
	return files, size, err
}

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
			Kind: event.Expired, Table: "SessionData", ShardID: shard, EventName: "REMOVE", DeletedBy: event.DeletedByTTL,
			StreamARN:      "arn:aws:dynamodb:us-east-1:000000000000:table/SessionData/stream/2026-03-04T00:00:00.000",
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
