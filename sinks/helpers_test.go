package sinks

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

var testStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// testEvents returns n expired events of one shard with sequence numbers
// first, first+1, ...; each item carries every attribute type.
func testEvents(table, shard string, first, n int) []event.Event {
	evs := make([]event.Event, n)
	for i := range evs {
		seq := first + i
		pk := fmt.Sprintf("user#%s#%06d", shard, seq)
		keys := event.Item{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberN{Value: fmt.Sprint(seq)}}
		old := event.Item{
			"pk":        keys["pk"],
			"sk":        keys["sk"],
			"expiresAt": &types.AttributeValueMemberN{Value: "1772600000"},
			"blob":      &types.AttributeValueMemberB{Value: []byte{byte(seq), 0, 0xff}},
			"tags":      &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
			"nested":    &types.AttributeValueMemberM{Value: event.Item{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberBOOL{Value: true}}}}},
			"price":     &types.AttributeValueMemberN{Value: "12.500000000000000000000000000000000001"},
		}
		evs[i] = event.Event{
			Kind:                    event.Expired,
			Table:                   table,
			StreamARN:               "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-03-04T00:00:00.000",
			Region:                  "us-east-1",
			ShardID:                 shard,
			SequenceNumber:          fmt.Sprintf("%021d", seq),
			EventID:                 fmt.Sprintf("%s-%s-%d", table, shard, seq),
			EventName:               "REMOVE",
			ApproximateCreationTime: testStart.Add(time.Duration(seq) * time.Millisecond),
			Keys:                    keys,
			OldImage:                old,
			SizeBytes:               200,
			TTLAttribute:            "expiresAt",
			TTLValue:                "1772600000",
			TTLTime:                 time.Unix(1772600000, 0).UTC(),
			TTLLag:                  3 * time.Second,
		}
	}
	return evs
}

// acks records acknowledgements.
type acks struct {
	mu    sync.Mutex
	calls map[string]int
	errs  map[string]error
	order []string
}

func newAcks() *acks { return &acks{calls: map[string]int{}, errs: map[string]error{}} }

func (a *acks) ack(id string) Ack {
	return func(err error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.calls[id]++
		a.errs[id] = err
		a.order = append(a.order, id)
	}
}

func (a *acks) get(id string) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[id], a.errs[id]
}

// waitAck polls until batch id was acknowledged and returns its error.
func (a *acks) waitAck(t testing.TB, id string) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := a.get(id); n > 0 {
			if n > 1 {
				t.Fatalf("batch %s acknowledged %d times", id, n)
			}
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("batch %s not acknowledged within 30s", id)
	return nil
}

func (a *acks) all() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.calls {
		out[k] = v
	}
	return out
}

// bodyEventID is the event ID of an archive line (a message's body).
func bodyEventID(t testing.TB, line []byte) string {
	t.Helper()
	e, err := event.DecodeLine(line)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return e.EventID
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type typesS = types.AttributeValueMemberS
