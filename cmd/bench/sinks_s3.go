package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

// sinksObject is an object the S3 sink would write: its key, gzip body
// and the uncompressed archive lines.
type sinksObject struct {
	key   string
	body  []byte
	lines []byte
}

// sinksBenchS3 measures the S3 sink (gzip) into versitygw beside three
// baselines, in rounds that run the baselines and the sink in turn:
// PutObject with the sink's upload concurrency of the objects the sink
// would write (lines cut per shard at flush-bytes, gzip, built up front),
// of the lines compressed in the loop, and of the lines uncompressed.
func sinksBenchS3(ctx context.Context, w io.Writer, sz sinksSizes) error {
	dir, err := os.MkdirTemp("", "sinks-bench-s3")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	endpoint, stop, err := benchkit.StartVersitygw(ctx, dir)
	if err != nil {
		return err
	}
	defer stop()
	client := benchkit.S3(endpoint)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		return err
	}
	objects, err := sinksS3Objects(sinksBenchEvents("raw", sz.s3Records))
	if err != nil {
		return err
	}
	if err := sinksBenchParquet(w, sz, objects); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	awsConfig := func(ctx context.Context, region string) (aws.Config, error) {
		return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(benchkit.S3Key, benchkit.S3Secret, "")}, nil
	}
	s, _, err := sinks.Open(ctx, "s3://bench/sink?endpoint="+endpoint+"&path-style=true&flush-bytes=8MiB", sinks.Options{AWSConfig: awsConfig})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	return sinksS3Rounds(ctx, w, sz, s, func(prefix, mode string) (float64, error) {
		return sinksPutAll(ctx, client, objects, prefix, mode, sz.s3Records)
	}, objects)
}

// sinksS3Rounds runs the rounds of the three baselines (putAll in its
// modes) and the sink s, and prints the sink against each.
func sinksS3Rounds(ctx context.Context, w io.Writer, sz sinksSizes, s sinks.Sink, putAll func(prefix, mode string) (float64, error), objects []sinksObject) error {
	modes := []struct{ prefix, mode, name string }{{"raw", "raw", "raw PutObject"}, {"rawgzip", "gzip", "gzip+PutObject"},
		{"rawplain", "plain", "PutObject, lines uncompressed"}}
	best := make([]float64, len(modes))
	paired := make([][]float64, len(modes))
	rates := make([]float64, len(modes))
	var sinkRate float64
	for round := 0; round < sz.rounds; round++ {
		for i, m := range modes {
			r, err := putAll(fmt.Sprintf("%s%d/", m.prefix, round), m.mode)
			if err != nil {
				return err
			}
			rates[i], best[i] = r, max(best[i], r)
		}
		evs := sinksBenchEvents(fmt.Sprintf("sink%d", round), sz.s3Records)
		benchkit.Settle()
		start := time.Now()
		if err := sinksBenchWrite(ctx, s, evs); err != nil {
			return err
		}
		sink := float64(sz.s3Records) / time.Since(start).Seconds()
		sinkRate = max(sinkRate, sink)
		for i := range modes {
			paired[i] = append(paired[i], sink/rates[i])
		}
	}
	for i, m := range modes {
		sinksBenchRatio(w, "s3 sink (gzip, versitygw)", sinkRate, best[i], m.name, paired[i])
	}
	fmt.Fprintf(w, "%-28s %d objects, %.1f MiB compressed for %d records\n", "", len(objects), float64(sinksBenchTotal(objects, func(o sinksObject) int { return len(o.body) }))/(1<<20), sz.s3Records)
	return nil
}

// sinksS3Objects cuts each shard's lines into objects at flush-bytes, as
// the sink does, and gzips them.
func sinksS3Objects(perShard [][]event.Event) ([]sinksObject, error) {
	var objects []sinksObject
	for _, evs := range perShard {
		var buf []byte
		first := 0
		cut := func(last int) error {
			var z bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&z, gzip.DefaultCompression)
			if _, err := zw.Write(buf); err != nil {
				return err
			}
			if err := zw.Close(); err != nil {
				return err
			}
			key := fmt.Sprintf("%s-%s-%s.jsonl.gz", evs[0].ShardID, evs[first].SequenceNumber, evs[last].SequenceNumber)
			objects = append(objects, sinksObject{key, z.Bytes(), append([]byte(nil), buf...)})
			buf, first = buf[:0], last+1
			return nil
		}
		for i := range evs {
			buf = event.AppendLine(buf, &evs[i])
			if len(buf) >= sinksBenchFlushBytes {
				if err := cut(i); err != nil {
					return nil, err
				}
			}
		}
		if len(buf) > 0 {
			if err := cut(len(evs) - 1); err != nil {
				return nil, err
			}
		}
	}
	return objects, nil
}

// sinksPutAll puts every object under prefix from 4 goroutines (the
// sink's upload concurrency) and returns records/s of the records they
// hold. mode: "raw" uploads the compressed objects as they are, "gzip"
// compresses the lines first, "plain" uploads the lines uncompressed.
func sinksPutAll(ctx context.Context, client *s3.Client, objects []sinksObject, prefix, mode string, records int) (float64, error) {
	benchkit.Settle()
	start := time.Now()
	work := make(chan sinksObject)
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if _, err := client.PutObject(ctx, sinksPutInput(o, prefix, mode)); err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	for _, o := range objects {
		work <- o
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	return float64(records) / time.Since(start).Seconds(), nil
}

// sinksPutInput is the PutObject of o under prefix in mode (see sinksPutAll).
func sinksPutInput(o sinksObject, prefix, mode string) *s3.PutObjectInput {
	in := &s3.PutObjectInput{
		Bucket: aws.String("bench"), Key: aws.String(prefix + o.key), Body: bytes.NewReader(o.body),
		ContentType: aws.String("application/x-ndjson"), ContentEncoding: aws.String("gzip"),
	}
	switch mode {
	case "gzip":
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.DefaultCompression)
		zw.Write(o.lines)
		zw.Close()
		in.Body = bytes.NewReader(z.Bytes())
	case "plain":
		in.Body, in.ContentEncoding = bytes.NewReader(o.lines), nil
	}
	return in
}
