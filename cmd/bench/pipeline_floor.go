package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/shard"
)

// The floor: the CPU of the least work a lossless archiver must do for the
// records the pipeline bench's archiver archived, measured part by part on
// the same records in the same run:
//
//   - decode: GetRecords calls decoded with shard.FastGetRecords (the HTTP
//     client's work included);
//   - render: each expiry turned into an event and rendered twice, once as
//     the NATS payload and once as the S3 line (the same bytes the sinks
//     produce), into reused buffers;
//   - publish: one JetStream async publish per event (Nats-Msg-Id header
//     only) and waiting for every acknowledgement, with nats.go's own
//     PublishMsgAsync;
//   - upload: gzip (the sink's library and level) and PutObject of objects
//     holding as many records as the archiver's objects did.
//
// The floor runs in a child process of its own (this binary re-executed
// with ARCHIVER_BENCH_FLOOR set), because the engine and the NATS server
// run inside the bench process and their CPU must not count. It reads one
// shard at a time and finishes each part of a batch before the next starts
// (acknowledgements included), so getrusage deltas around a part are that
// part's CPU, its garbage collection included. The same child in "drain"
// mode is a plain aws-sdk-go-v2 drain (the SDK's own decoder), the second
// view of the archiver's CPU.

// floorEnv carries the JSON floorSpec to the child.
const floorEnv = "ARCHIVER_BENCH_FLOOR"

// floorSpec tells the child what to read and where to write.
type floorSpec struct {
	Mode       string // "floor" or "drain"
	Endpoint   string // the engine
	Table      string
	NATSURL    string
	S3Endpoint string
	Bucket     string
	// RecordsPerObject is how many records an S3 object holds (the
	// archiver's average in the same run).
	RecordsPerObject int
}

// floorResult is the child's answer: CPU per part over Records.
type floorResult struct {
	Records int           // stream records read
	Events  int           // expiries rendered, published and uploaded
	Objects int           // S3 objects
	Decode  time.Duration // CPU of GetRecords (the whole call)
	Render  time.Duration
	Publish time.Duration
	Upload  time.Duration
	Wall    time.Duration
}

func (r floorResult) sum() time.Duration { return r.Decode + r.Render + r.Publish + r.Upload }

func init() {
	spec := os.Getenv(floorEnv)
	if spec == "" {
		return
	}
	res, err := floorChild(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

// runFloor runs the floor child with spec and returns its figures.
func runFloor(ctx context.Context, spec floorSpec) (floorResult, error) {
	self, err := os.Executable()
	if err != nil {
		return floorResult{}, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return floorResult{}, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), floorEnv+"="+string(b), "AWS_EC2_METADATA_DISABLED=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return floorResult{}, fmt.Errorf("floor child (%s): %v\n%s", spec.Mode, err, benchkit.Tail(stderr.String(), 2000))
	}
	var res floorResult
	if err := json.Unmarshal(out, &res); err != nil {
		return floorResult{}, fmt.Errorf("floor child (%s) answered %q: %w", spec.Mode, out, err)
	}
	return res, nil
}

// floorRun holds the child's clients and reused buffers.
type floorRun struct {
	spec    floorSpec
	streams *dynamodbstreams.Client
	js      jetstream.JetStream
	s3      *s3.Client
	res     floorResult

	natsBuf []byte // NATS payloads of one batch
	natsEnd []int
	ids     []string
	object  []byte // the S3 object being filled
	objRecs int
	objSeq  int
	gz      *gzip.Writer
	gzOut   bytes.Buffer
}

func floorChild(specJSON string) (floorResult, error) {
	var spec floorSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return floorResult{}, err
	}
	ctx := context.Background()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(spec.Endpoint) })
	fr := &floorRun{spec: spec}
	fr.streams = dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(spec.Endpoint)
		if spec.Mode == "floor" {
			shard.FastGetRecords(o)
		}
	})
	arn, shards, err := floorShards(ctx, ddb, fr.streams, spec.Table)
	if err != nil {
		return floorResult{}, err
	}
	if spec.Mode == "floor" {
		if err := fr.connect(ctx); err != nil {
			return floorResult{}, err
		}
	}
	began := time.Now()
	for _, sh := range shards {
		if err := fr.readShard(ctx, arn, sh); err != nil {
			return floorResult{}, err
		}
	}
	if fr.objRecs > 0 {
		t0 := benchkit.SelfCPU()
		if err := fr.putObject(ctx); err != nil {
			return floorResult{}, err
		}
		fr.res.Upload += benchkit.SelfCPU() - t0
	}
	fr.res.Wall = time.Since(began)
	return fr.res, nil
}

// connect opens NATS (a stream of its own) and S3 for the floor.
func (fr *floorRun) connect(ctx context.Context) error {
	nc, err := nats.Connect(fr.spec.NATSURL)
	if err != nil {
		return err
	}
	fr.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(plWindow))
	if err != nil {
		return err
	}
	if _, err := fr.js.CreateStream(ctx, jetstream.StreamConfig{Name: "FLOOR", Subjects: []string{"floor.>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		return err
	}
	fr.s3 = benchkit.S3(fr.spec.S3Endpoint)
	fr.gz, err = gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression)
	return err
}

// floorShards lists the stream's shards.
func floorShards(ctx context.Context, ddb *dynamodb.Client, c *dynamodbstreams.Client, table string) (*string, []streamtypes.Shard, error) {
	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, nil, err
	}
	arn := desc.Table.LatestStreamArn
	var shards []streamtypes.Shard
	var start *string
	for {
		out, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn, ExclusiveStartShardId: start})
		if err != nil {
			return nil, nil, err
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if start = out.StreamDescription.LastEvaluatedShardId; start == nil {
			return arn, shards, nil
		}
	}
}

// readShard reads one shard to its current end, doing each part of the
// floor on every batch in turn.
func (fr *floorRun) readShard(ctx context.Context, arn *string, sh streamtypes.Shard) error {
	it, err := fr.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId,
		ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return err
	}
	for iter := it.ShardIterator; iter != nil; {
		t0 := benchkit.SelfCPU()
		out, err := fr.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		fr.res.Decode += benchkit.SelfCPU() - t0
		if err != nil {
			return err
		}
		if len(out.Records) == 0 {
			return nil // an open shard read to its current end
		}
		fr.res.Records += len(out.Records)
		iter = out.NextShardIterator
		if fr.spec.Mode == "floor" {
			if err := fr.batch(ctx, *arn, *sh.ShardId, out.Records); err != nil {
				return err
			}
		}
	}
	return nil
}

// batch renders, publishes and uploads one GetRecords batch's expiries.
func (fr *floorRun) batch(ctx context.Context, arn, shardID string, recs []streamtypes.Record) error {
	t0 := benchkit.SelfCPU()
	fr.natsBuf, fr.natsEnd, fr.ids = fr.natsBuf[:0], fr.natsEnd[:0], fr.ids[:0]
	for _, r := range recs {
		ev, err := event.Decode(fr.spec.Table, arn, shardID, r, "ExpirationTime")
		if err != nil {
			return err
		}
		if ev.Kind != event.Expired {
			continue
		}
		fr.natsBuf = event.AppendLine(fr.natsBuf, &ev)
		fr.natsEnd = append(fr.natsEnd, len(fr.natsBuf))
		fr.ids = append(fr.ids, ev.EventID)
		fr.object = event.AppendLine(fr.object, &ev)
		fr.objRecs++
	}
	t1 := benchkit.SelfCPU()
	fr.res.Render += t1 - t0
	subject := "floor." + fr.spec.Table + ".expired"
	start := 0
	for i, end := range fr.natsEnd {
		m := &nats.Msg{Subject: subject, Header: nats.Header{jetstream.MsgIDHeader: {fr.ids[i]}}, Data: fr.natsBuf[start:end]}
		if _, err := fr.js.PublishMsgAsync(m); err != nil {
			return err
		}
		start = end
	}
	select {
	case <-fr.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return errors.New("floor: publishes not acknowledged within a minute")
	}
	t2 := benchkit.SelfCPU()
	fr.res.Publish += t2 - t1
	fr.res.Events += len(fr.natsEnd)
	if fr.objRecs >= fr.spec.RecordsPerObject {
		if err := fr.putObject(ctx); err != nil {
			return err
		}
		fr.res.Upload += benchkit.SelfCPU() - t2
	}
	return nil
}

// putObject gzips the object being filled and puts it.
func (fr *floorRun) putObject(ctx context.Context) error {
	fr.gzOut.Reset()
	fr.gz.Reset(&fr.gzOut)
	if _, err := fr.gz.Write(fr.object); err != nil {
		return err
	}
	if err := fr.gz.Close(); err != nil {
		return err
	}
	fr.objSeq++
	_, err := fr.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(fr.spec.Bucket),
		Key:             aws.String(fmt.Sprintf("floor/%s/%06d.jsonl.gz", fr.spec.Table, fr.objSeq)),
		Body:            bytes.NewReader(fr.gzOut.Bytes()),
		ContentLength:   aws.Int64(int64(fr.gzOut.Len())),
		ContentEncoding: aws.String("gzip"),
		IfNoneMatch:     aws.String("*"),
	})
	fr.object, fr.objRecs = fr.object[:0], 0
	fr.res.Objects++
	return err
}

// printFloor prints the floor's parts per record and the archiver's CPU
// per record against their sum.
func printFloor(w io.Writer, archiverCPU time.Duration, archived int, f floorResult) {
	per := func(d time.Duration, n int) float64 { return d.Seconds() * 1e6 / float64(max(n, 1)) }
	// Decoding is per stream record (the phase-2 items' INSERTs are in the
	// stream too); the rest is per expiry. A backlog record is one expiry.
	dec, ren, pub, up := per(f.Decode, f.Records), per(f.Render, f.Events), per(f.Publish, f.Events), per(f.Upload, f.Events)
	floor := dec + ren + pub + up
	fmt.Fprintf(w, "  floor (a child process doing only what a lossless archiver must: %d stream records, %d expiries, %d objects):\n",
		f.Records, f.Events, f.Objects)
	fmt.Fprintf(w, "    decode %.1f + render %.1f + publish&ack %.1f + gzip&put %.1f = %.1f µs per expiry\n", dec, ren, pub, up, floor)
	a := per(archiverCPU, archived)
	fmt.Fprintf(w, "  archiver CPU over the backlog: %.1f µs/record (%s for %d) = %.2fx the floor (target <= 1.5x)\n",
		a, archiverCPU.Round(time.Millisecond), archived, a/floor)
}
