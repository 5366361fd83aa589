package s3sink

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// TestS3ChunkedObjectsAcrossReuse: object buffers are chunked, and the
// chunks of uploaded objects are reused for later ones. Objects that span
// several chunks, written from two shards at once while earlier uploads
// hand their chunks back, must each hold exactly their events, in order,
// and the events the caller held past their batches must be unchanged
// (run under -race).
func TestS3ChunkedObjectsAcrossReuse(t *testing.T) {
	v := testkit.StartVersity(t)
	for _, comp := range []string{"gzip", "zstd", "none"} {
		t.Run(comp, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			s := openS3(t, v.Endpoint, "compression="+comp+"&flush-interval=1h&flush-bytes=3MiB")
			s.c.Prefix = "chunks/" + comp
			pad := &types.AttributeValueMemberS{Value: strings.Repeat("x", 300<<10)}
			held := map[string][]string{} // shard -> event IDs in order
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, shard := range []string{"shardId-0001", "shardId-0002"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := 0; round < 4; round++ {
						evs := testkit.Events("sessions", shard, 1+round*8, 8)
						for i := range evs {
							evs[i].OldImage["pad"] = pad
						}
						a := testkit.NewAcks()
						if err := s.Write(ctx, sinkapi.Batch{ShardID: shard, Events: evs}, a.Ack("b")); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for _, e := range evs {
							held[shard] = append(held[shard], e.EventID)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			keys := v.Objects(t, "chunks/"+comp+"/")
			if len(keys) < 4 {
				t.Fatalf("%d objects, want the events cut into several per shard", len(keys))
			}
			got := map[string][]string{}
			for _, k := range keys {
				evs, _ := v.Read(t, k)
				for _, e := range evs {
					if e.OldImage["pad"].(*types.AttributeValueMemberS).Value != pad.Value {
						t.Fatalf("object %s: event %s's padding changed", k, e.EventID)
					}
					got[e.ShardID] = append(got[e.ShardID], e.EventID)
				}
			}
			for shard, ids := range held {
				if fmt.Sprint(got[shard]) != fmt.Sprint(ids) {
					t.Fatalf("shard %s: objects hold %v, want %v", shard, got[shard], ids)
				}
			}
		})
	}
}
