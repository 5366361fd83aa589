package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

const (
	sinksBenchNATSRecords = 50_000
	sinksBenchS3Records   = 200_000
	sinksBenchShards      = 4
	sinksBenchRounds      = 7
	sinksBenchBatch       = 250
	sinksBenchFlushBytes  = 8 << 20
	sinksBenchS3Access    = "AKIABENCHARCHIVER"
	sinksBenchS3Secret    = "bench-secret-for-versitygw-only"
)

// runSinksBench measures records/s through the NATS JetStream sink beside a
// raw PublishAsync loop of the same messages, and through the S3 sink (gzip)
// into versitygw beside a raw PutObject loop of the same object bytes. Both
// baselines run in the same process, on the same servers, right before.
func runSinksBench(ctx context.Context, w io.Writer) error {
	var errs []error
	if err := sinksBenchNATS(ctx, w); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if err := sinksBenchS3(ctx, w); err != nil {
		errs = append(errs, fmt.Errorf("s3: %w", err))
	}
	return errors.Join(errs...)
}

// sinksBenchEvents makes n expired events spread over the shards, each with
// a typical session item (~400 bytes as an archive line).
func sinksBenchEvents(prefix string, n int) [][]event.Event {
	perShard := make([][]event.Event, sinksBenchShards)
	t0 := time.Now().UTC().Truncate(time.Hour)
	for i := 0; i < n; i++ {
		shard := i % sinksBenchShards
		seq := i / sinksBenchShards
		keys := event.Item{"pk": &stypes.AttributeValueMemberS{Value: fmt.Sprintf("session#%s#%09d", prefix, i)}}
		perShard[shard] = append(perShard[shard], event.Event{
			Kind:                    event.Expired,
			Table:                   "sessions",
			StreamARN:               "arn:aws:dynamodb:us-east-1:000000000000:table/sessions/stream/bench",
			Region:                  "us-east-1",
			ShardID:                 fmt.Sprintf("shardId-%s-%04d", prefix, shard),
			SequenceNumber:          fmt.Sprintf("%021d", 1000+seq),
			EventID:                 fmt.Sprintf("%s-%d", prefix, i),
			EventName:               "REMOVE",
			ApproximateCreationTime: t0.Add(time.Duration(seq) * time.Microsecond),
			Keys:                    keys,
			OldImage: event.Item{
				"pk":        keys["pk"],
				"user":      &stypes.AttributeValueMemberS{Value: fmt.Sprintf("user-%d", i%5000)},
				"expiresAt": &stypes.AttributeValueMemberN{Value: fmt.Sprint(1767322800 + i)},
				"cart":      &stypes.AttributeValueMemberL{Value: []stypes.AttributeValue{&stypes.AttributeValueMemberS{Value: "sku-1"}, &stypes.AttributeValueMemberN{Value: "2"}}},
				"flags":     &stypes.AttributeValueMemberSS{Value: []string{"beta", "mobile"}},
				"token":     &stypes.AttributeValueMemberB{Value: bytes.Repeat([]byte{byte(i)}, 32)},
			},
			TTLAttribute: "expiresAt",
			TTLValue:     fmt.Sprint(1767322800 + i),
			TTLTime:      time.Unix(int64(1767322800+i), 0).UTC(),
			TTLLag:       90 * time.Second,
		})
	}
	return perShard
}

// sinksBenchWrite writes every shard's events in batches, one goroutine per
// shard (as the consumer does: shards run in parallel, each in order), and
// waits for every acknowledgement.
func sinksBenchWrite(ctx context.Context, s sinks.Sink, perShard [][]event.Event) error {
	var acks, writers sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	ack := func(err error) {
		if err != nil {
			fail(err)
		}
		acks.Done()
	}
	for _, evs := range perShard {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for off := 0; off < len(evs); off += sinksBenchBatch {
				end := min(off+sinksBenchBatch, len(evs))
				acks.Add(1)
				if err := s.Write(ctx, sinks.Batch{ShardID: evs[0].ShardID, Events: evs[off:end]}, ack); err != nil {
					acks.Done()
					fail(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	if err := s.Flush(ctx); err != nil {
		return err
	}
	acks.Wait()
	return firstErr
}

// sinksBenchRatio prints the sink's best round beside the baseline's and
// the median of the rounds' own ratios (paired[i]: sink / baseline in round
// i), the figure the target is judged on: a round runs both on the same
// machine state, so load from elsewhere cancels out.
func sinksBenchRatio(w io.Writer, name string, sinkRate, rawRate float64, baseline string, paired []float64) {
	fmt.Fprintf(w, "%-28s %10.0f records/s   %s %10.0f records/s   ratio: median of %d rounds %5.1f%% (target >= 70%%), best against best %5.1f%% (rounds: %s)\n",
		name, sinkRate, baseline, rawRate, len(paired), 100*median(slices.Clone(paired)), 100*sinkRate/rawRate, percents(paired))
}

func sinksBenchNATS(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "sinks-bench-nats")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(30 * time.Second) {
		return errors.New("nats-server did not start")
	}
	url := srv.ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"archiver.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return err
	}

	// format=envelope: the raw loop below sends the envelope's headers, so
	// both sides carry the same bytes (cloudevents, the default, adds the
	// ce- headers, about 570 bytes a message).
	s, _, err := sinks.Open(ctx, url+"?subject=archiver.{table}.{kind}&format=envelope", sinks.Options{})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	// Rounds alternate raw and sink, so that load from elsewhere on the
	// machine hits both alike; each starts from an empty stream. Every
	// round publishes new event IDs (JetStream would drop repeats as
	// duplicates).
	var rawRate, sinkRate float64
	var paired []float64
	for round := 0; round < sinksBenchRounds; round++ {
		if err := stream.Purge(ctx); err != nil {
			return err
		}
		// The same messages the sink sends (subject, headers, envelope),
		// made up front so the loop measures the broker alone.
		var msgs []*nats.Msg
		for _, evs := range sinksBenchEvents(fmt.Sprintf("raw%d", round), sinksBenchNATSRecords) {
			for i := range evs {
				e := &evs[i]
				h := nats.Header{}
				h.Set(jetstream.MsgIDHeader, e.EventID)
				h.Set(sinks.HeaderTable, e.Table)
				h.Set(sinks.HeaderKind, string(e.Kind))
				h.Set(sinks.HeaderKeys, string(event.MarshalItem(e.Keys)))
				h.Set(sinks.HeaderShard, e.ShardID)
				h.Set(sinks.HeaderSequence, e.SequenceNumber)
				h.Set(sinks.HeaderEventName, e.EventName)
				msgs = append(msgs, &nats.Msg{Subject: "archiver.sessions.expired", Header: h, Data: event.MarshalLine(e)})
			}
		}
		settle()
		start := time.Now()
		for _, m := range msgs {
			if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
				return err
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
		raw := float64(len(msgs)) / time.Since(start).Seconds()
		rawRate = max(rawRate, raw)

		evs := sinksBenchEvents(fmt.Sprintf("sink%d", round), sinksBenchNATSRecords)
		settle()
		start = time.Now()
		if err := sinksBenchWrite(ctx, s, evs); err != nil {
			return err
		}
		sink := float64(sinksBenchNATSRecords) / time.Since(start).Seconds()
		sinkRate = max(sinkRate, sink)
		paired = append(paired, sink/raw)
	}
	sinksBenchRatio(w, "nats jetstream sink", sinkRate, rawRate, "raw PublishAsync", paired)
	return nil
}

// sinksBenchVersitygw starts versitygw (from $PATH or .tools/bin; `make
// bench` builds it) on a free loopback port.
func sinksBenchVersitygw(dir string) (endpoint string, stop func(), err error) {
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		bin = filepath.Join(".tools", "bin", "versitygw")
		if _, serr := os.Stat(bin); serr != nil {
			return "", nil, fmt.Errorf("versitygw not on $PATH or in .tools/bin: run make tools")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--access", sinksBenchS3Access, "--secret", sinksBenchS3Secret, "--port", addr, "--quiet", "posix", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() { cmd.Process.Kill(); <-exited }
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr, stop, nil
		}
		select {
		case <-exited:
			return "", nil, fmt.Errorf("versitygw exited: %s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("versitygw did not listen within 30s")
		}
	}
}

func sinksBenchS3(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "sinks-bench-s3")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	endpoint, stop, err := sinksBenchVersitygw(dir)
	if err != nil {
		return err
	}
	defer stop()
	awsConfig := func(ctx context.Context, region string) (aws.Config, error) {
		return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(sinksBenchS3Access, sinksBenchS3Secret, "")}, nil
	}
	cfg, _ := awsConfig(ctx, "us-east-1")
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		return err
	}

	// Baselines: the objects the sink would write (lines cut per shard at
	// flush-bytes, gzip), built up front, then PutObject with the sink's
	// upload concurrency: of those compressed bytes, of the lines
	// compressed in the loop, and of the lines uncompressed.
	raw := sinksBenchEvents("raw", sinksBenchS3Records)
	type object struct {
		key   string
		body  []byte
		lines []byte // the uncompressed archive lines
	}
	var objects []object
	for _, evs := range raw {
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
			objects = append(objects, object{key, z.Bytes(), append([]byte(nil), buf...)})
			buf, first = buf[:0], last+1
			return nil
		}
		for i := range evs {
			buf = event.AppendLine(buf, &evs[i])
			if len(buf) >= sinksBenchFlushBytes {
				if err := cut(i); err != nil {
					return err
				}
			}
		}
		if len(buf) > 0 {
			if err := cut(len(evs) - 1); err != nil {
				return err
			}
		}
	}
	// mode: "raw" uploads the compressed objects as they are, "gzip"
	// compresses the lines first, "plain" uploads the lines uncompressed.
	putAll := func(prefix, mode string) (float64, error) {
		settle()
		start := time.Now()
		work := make(chan object)
		errc := make(chan error, 4)
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for o := range work {
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
					_, err := client.PutObject(ctx, in)
					if err != nil {
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
		return float64(sinksBenchS3Records) / time.Since(start).Seconds(), nil
	}
	s, _, err := sinks.Open(ctx, "s3://bench/sink?endpoint="+endpoint+"&path-style=true&flush-bytes=8MiB", sinks.Options{AWSConfig: awsConfig})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	// Rounds run the three baselines and the sink in turn.
	var rawRate, gzipRate, plainRate, sinkRate float64
	var pairedRaw, pairedGzip, pairedPlain []float64
	for round := 0; round < sinksBenchRounds; round++ {
		raw, err := putAll(fmt.Sprintf("raw%d/", round), "raw")
		if err != nil {
			return err
		}
		rawRate = max(rawRate, raw)
		gz, err := putAll(fmt.Sprintf("rawgzip%d/", round), "gzip")
		if err != nil {
			return err
		}
		gzipRate = max(gzipRate, gz)
		plain, err := putAll(fmt.Sprintf("rawplain%d/", round), "plain")
		if err != nil {
			return err
		}
		plainRate = max(plainRate, plain)
		evs := sinksBenchEvents(fmt.Sprintf("sink%d", round), sinksBenchS3Records)
		settle()
		start := time.Now()
		if err := sinksBenchWrite(ctx, s, evs); err != nil {
			return err
		}
		sink := float64(sinksBenchS3Records) / time.Since(start).Seconds()
		sinkRate = max(sinkRate, sink)
		pairedRaw = append(pairedRaw, sink/raw)
		pairedGzip = append(pairedGzip, sink/gz)
		pairedPlain = append(pairedPlain, sink/plain)
	}

	sinksBenchRatio(w, "s3 sink (gzip, versitygw)", sinkRate, rawRate, "raw PutObject", pairedRaw)
	sinksBenchRatio(w, "s3 sink (gzip, versitygw)", sinkRate, gzipRate, "gzip+PutObject", pairedGzip)
	sinksBenchRatio(w, "s3 sink (gzip, versitygw)", sinkRate, plainRate, "PutObject, lines uncompressed", pairedPlain)
	fmt.Fprintf(w, "%-28s %d objects, %.1f MiB compressed for %d records\n", "", len(objects), float64(sinksBenchTotal(objects, func(o object) int { return len(o.body) }))/(1<<20), sinksBenchS3Records)
	return nil
}

func sinksBenchTotal[T any](xs []T, f func(T) int) int {
	n := 0
	for _, x := range xs {
		n += f(x)
	}
	return n
}
