package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// unparseable are ways to make a record the SDK cannot parse, each with the
// bytes its raw record must then hold: an attribute of the old image set to
// a number where a string belongs, a B that is not base64, a value with two
// type members.
var unparseable = []struct {
	name string
	val  any
	raw  string
}{
	{"number where a string belongs", map[string]any{"S": json.Number("1")}, `"bad":{"S":1}`},
	{"B that is not base64", map[string]any{"B": "!!!"}, `"bad":{"B":"!!!"}`},
	{"two type members", map[string]any{"N": "1", "S": "a"}, `"bad":{"N":"1","S":"a"}`},
}

// spoil is a corruption (corruptingFront) that makes a record unparseable
// with val, and remembers its sequence number in seqs.
func spoil(val any, mu *sync.Mutex, seqs map[string]bool) func(rec map[string]any) {
	return func(rec map[string]any) {
		d := rec["dynamodb"].(map[string]any)
		d["OldImage"].(map[string]any)["bad"] = val
		mu.Lock()
		seqs[d["SequenceNumber"].(string)] = true
		mu.Unlock()
	}
}

// TestChaosUnparseableRecords: among 600 expiries, three records the SDK
// cannot parse (one of each kind), with a file dead-letter sink. Each goes
// to the dead-letter sink as kind undecodable with its raw bytes, every
// other item reaches the archive, and after a graceful stop the
// checkpoints pass everything delivered.
func TestChaosUnparseableRecords(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t, 1)
	keys := keyRange("f", 0, 600)
	var mu sync.Mutex
	seqs := map[string]bool{}
	corrupt := map[string]func(map[string]any){}
	var bad []string
	for i, u := range unparseable {
		k := keys[100+200*i]
		bad = append(bad, k)
		corrupt[k] = spoil(u.val, &mu, seqs)
	}
	env.startCorrupted(corrupt)
	for range 3 {
		env.wave(200)
	}
	env.written.drop(bad)
	dead := newFileSinkReader(env.deadDir())
	eventually.Wait(t, 60*time.Second, "the unparseable records reach the dead-letter sink", func() error {
		return dead.poll(t).allArrived(bad)
	})
	arch := env.finish()
	dl := dead.poll(t)
	if lost, _ := arch.missing(bad); lost != len(bad) {
		t.Errorf("archive: an unparseable record was archived as an event")
	}
	for i, k := range bad {
		d := dl.dead[k]
		switch {
		case dl.kinds[k] != event.Undecodable:
			t.Errorf("dead letter of %s: kind %q, want %q", k, dl.kinds[k], event.Undecodable)
		case d == nil || d.Reason != event.ReasonUndecodable || d.Error == "":
			t.Errorf("dead letter of %s: %+v, want reason %q and an error", k, d, event.ReasonUndecodable)
		case !bytes.Contains(d.Record, []byte(unparseable[i].raw)):
			t.Errorf("dead letter of %s: raw record %s, want it as read, with %s", k, d.Record, unparseable[i].raw)
		}
	}
	if len(dl.byKey) != len(bad) {
		t.Errorf("dead-letter sink holds %d keys, want only the %d unparseable records", len(dl.byKey), len(bad))
	}
	far := union(arch, dl)
	noDuplicates(t, "archive and dead-letter sink", far)
	checkCovered(t, "archive and dead-letter sink", env.checkpoints(), far)
}

// TestChaosUnparseableRecordWithoutDeadLetter: without a dead-letter sink,
// for each kind of unparseable record, its shard is reported stuck
// (archiver_shards_stuck), the record never reaches the archive, and the
// checkpoint of its shard never passes it.
func TestChaosUnparseableRecordWithoutDeadLetter(t *testing.T) {
	t.Parallel()
	for _, u := range unparseable {
		t.Run(u.name, func(t *testing.T) {
			env := newFaultEnv(t, 1)
			var mu sync.Mutex
			seqs := map[string]bool{}
			k := keyRange("f", 0, 100)[50]
			front := corruptingFront(t, env, map[string]func(map[string]any){k: spoil(u.val, &mu, seqs)})
			env.configure = func(inst string, c *consumer.Config) {
				c.Streams = enginetest.StreamsClientAt(front, "reader-"+inst)
				c.StuckAfter, c.StuckLogInterval = time.Millisecond, time.Second
			}
			env.start()
			env.wave(100)
			eventually.Wait(t, 60*time.Second, "the shard reported stuck", func() error {
				if n := env.gauge("archiver_shards_stuck"); n != 1 {
					return fmt.Errorf("archiver_shards_stuck = %v", n)
				}
				return nil
			})
			env.stopAll()
			if _, ok := env.farEnd().byKey[k]; ok {
				t.Errorf("the unparseable record %s reached the archive", k)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seqs) != 1 {
				t.Fatalf("the record was corrupted at %d sequence numbers, want 1", len(seqs))
			}
			var seq string
			for s := range seqs {
				seq = s
			}
			sh := env.shardHolding(seq)
			if cp := env.checkpoints()[sh]; cp.Finished || event.CompareSequence(cp.SequenceNumber, seq) >= 0 {
				t.Errorf("shard %s: checkpoint %+v passed the unparseable record %s", sh, cp, seq)
			}
		})
	}
}

// gauge is the sum of a gauge over the workers' registries.
func (env *faultEnv) gauge(name string) float64 {
	env.mu.Lock()
	defer env.mu.Unlock()
	sum := 0.0
	for _, reg := range env.regs {
		mfs, err := reg.Gather()
		if err != nil {
			env.t.Fatalf("gathering metrics: %v", err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					sum += m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// shardHolding is the shard whose records (read from the engine itself,
// not through the corrupting front) include sequence number seq.
func (env *faultEnv) shardHolding(seq string) string {
	for _, s := range env.shards() {
		it, err := env.streams.GetShardIterator(env.ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(env.stream), ShardId: s.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			env.t.Fatal(err)
		}
		for next := it.ShardIterator; next != nil; {
			out, err := env.streams.GetRecords(env.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
			if err != nil {
				env.t.Fatal(err)
			}
			for _, r := range out.Records {
				if aws.ToString(r.Dynamodb.SequenceNumber) == seq {
					return aws.ToString(s.ShardId)
				}
			}
			if len(out.Records) == 0 {
				break
			}
			next = out.NextShardIterator
		}
	}
	env.t.Fatalf("no shard holds %s", seq)
	return ""
}
