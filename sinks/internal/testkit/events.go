// Package testkit is what the sinks' tests share: events and
// acknowledgements, a versitygw S3 and a proxy in front of it, an embedded
// nats-server, and the reading of an archive's coverage manifests. Only
// tests import it.
package testkit

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// Start is the time [Events]' creation times count from (a millisecond
// a sequence number).
var Start = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// Events returns n expired events of one shard with sequence numbers
// first, first+1, ...; each item carries every attribute type.
func Events(table, shard string, first, n int) []event.Event {
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
			ApproximateCreationTime: Start.Add(time.Duration(seq) * time.Millisecond),
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

// Acks records acknowledgements.
type Acks struct {
	mu    sync.Mutex
	calls map[string]int
	errs  map[string]error
	order []string
}

// NewAcks returns an empty record of acknowledgements.
func NewAcks() *Acks { return &Acks{calls: map[string]int{}, errs: map[string]error{}} }

// Ack returns the acknowledgement of batch id, which records its call.
func (a *Acks) Ack(id string) sinkapi.Ack {
	return func(err error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.calls[id]++
		a.errs[id] = err
		a.order = append(a.order, id)
	}
}

// Get returns how often batch id was acknowledged, and its last error.
func (a *Acks) Get(id string) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[id], a.errs[id]
}

// WaitAck polls until batch id was acknowledged and returns its error.
func (a *Acks) WaitAck(t testing.TB, id string) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := a.Get(id); n > 0 {
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

// All returns how often each batch was acknowledged.
func (a *Acks) All() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.calls {
		out[k] = v
	}
	return out
}

// BodyEventID is the event ID of an archive line (a message's body).
func BodyEventID(t testing.TB, line []byte) string {
	t.Helper()
	e, err := event.DecodeLine(line)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return e.EventID
}

// Ctx is a context that ends with the test, or after two minutes.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Seq is the sequence number of [Events]' event n.
func Seq(n int) string { return fmt.Sprintf("%021d", n) }

// SameEvent reports whether a and b are the same event, times compared
// as instants.
func SameEvent(a, b event.Event) bool {
	if !a.ApproximateCreationTime.Equal(b.ApproximateCreationTime) || !a.TTLTime.Equal(b.TTLTime) {
		return false
	}
	a.ApproximateCreationTime, a.TTLTime = b.ApproximateCreationTime, b.TTLTime
	return reflect.DeepEqual(a, b)
}

// AssertRejected checks that err is a *sinkapi.RejectedError listing
// exactly indexes, permanent, and mentioning cause.
func AssertRejected(t testing.TB, err error, indexes []int, cause string) {
	t.Helper()
	var rej *sinkapi.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("ack error %v, want a *RejectedError", err)
	}
	if !reflect.DeepEqual(rej.Indexes, indexes) {
		t.Fatalf("rejected %v, want %v", rej.Indexes, indexes)
	}
	if !sinkapi.IsPermanent(err) || !strings.Contains(err.Error(), cause) {
		t.Fatalf("rejection %v: want it permanent and naming %q", err, cause)
	}
}

// RenderLines is the archive lines of evs, each changed by edit first
// (nil: as they are).
func RenderLines(evs []event.Event, edit func(*event.Event)) []byte {
	var out []byte
	for _, e := range evs {
		if edit != nil {
			edit(&e)
		}
		out = event.AppendLine(out, &e)
	}
	return out
}

// WantPreflightError checks that err is a *sinkapi.PreflightError of
// sink and check whose one-line message mentions every string in mentions.
func WantPreflightError(t testing.TB, err error, sink, check string, mentions ...string) *sinkapi.PreflightError {
	t.Helper()
	var pe *sinkapi.PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("preflight error %v, want a *PreflightError", err)
	}
	if pe.Sink != sink || pe.Check != check {
		t.Fatalf("preflight failed sink %q check %q, want %q %q: %v", pe.Sink, pe.Check, sink, check, err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("message is not one line: %q", msg)
	}
	for _, m := range append([]string{sink, check}, mentions...) {
		if !strings.Contains(msg, m) {
			t.Fatalf("message %q does not mention %q", msg, m)
		}
	}
	return pe
}

// FailingWriter is an io.Writer whose every Write fails.
type FailingWriter struct{}

// Write fails.
func (FailingWriter) Write([]byte) (int, error) { return 0, errors.New("disk on fire") }
