package event

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// inRegion is e as another Region's stream has it: its own stream ARN,
// Region, event ID, shard, sequence number, deletion time and principal.
func inRegion(e Event, region string) Event {
	e.StreamARN = "arn:aws:dynamodb:" + region + ":000000000000:table/sessions/stream/2026-01-01T00:00:00.000"
	e.Region = region
	e.EventID = region + "-event"
	e.ShardID = "shardId-" + region
	e.SequenceNumber = "9" + e.SequenceNumber
	e.ApproximateCreationTime = e.ApproximateCreationTime.Add(1500000000)
	e.DeletedBy = DeletedByOther // a replicated delete under past-ttl
	return e
}

// TestMessageID: an expiry with its old image has the same ID in every
// Region, computed as documented; another TTL or content, another table
// or key, no old image, a dead letter and every other kind change it.
func TestMessageID(t *testing.T) {
	e := sampleEvent()
	want := func() string {
		head := string(MarshalItem(e.OldImage))
		sum := sha256.Sum256([]byte(`{"Item":` + head + `,"Keys":` + string(MarshalItem(e.Keys)) + `,"Table":"sessions"}`))
		return ExpiryIDPrefix + hex.EncodeToString(sum[:16])
	}()
	id := MessageID(&e)
	if id != want || len(id) != len(ExpiryIDPrefix)+32 {
		t.Fatalf("MessageID = %q, want %q", id, want)
	}
	west := inRegion(e, "eu-west-1")
	if got := MessageID(&west); got != id {
		t.Fatalf("another Region's record of the expiry: %q, want %q", got, id)
	}
	otherTTL := sampleEvent()
	otherTTL.OldImage = clone(otherTTL.OldImage)
	otherTTL.OldImage["expiresAt"] = &types.AttributeValueMemberN{Value: "1767322801"}
	otherTable := sampleEvent()
	otherTable.Table = "sessions2"
	otherKey := sampleEvent()
	otherKey.Keys = Item{"pk": &types.AttributeValueMemberS{Value: "other"}}
	keysOnly := sampleEvent()
	keysOnly.OldImage = nil
	dead := sampleEvent()
	dead.DeadLetter = &DeadLetter{Sink: "s3://b", Reason: ReasonPermanent}
	deleted := sampleEvent()
	deleted.Kind = Deleted
	noID := sampleEvent()
	noID.Kind, noID.EventID = Deleted, ""
	for _, tc := range []struct {
		name string
		e    Event
		want string // "" : an expiry ID other than id
	}{
		{"another TTL", otherTTL, ""},
		{"another table", otherTable, ""},
		{"another key", otherKey, ""},
		{"keys only", keysOnly, "e-1"},
		{"dead letter", dead, "e-1"},
		{"deleted", deleted, "e-1"},
		{"no event ID", noID, e.StreamARN + "/shardId-00000001/000000000000000000123"},
	} {
		got := MessageID(&tc.e)
		switch {
		case tc.want != "" && got != tc.want:
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		case tc.want == "" && (got == id || !strings.HasPrefix(got, ExpiryIDPrefix)):
			t.Errorf("%s: %q, want another expiry ID than %q", tc.name, got, id)
		}
	}
}

// TestIDHasherAppendLine: the line is AppendLine's, the ID MessageID's,
// for every kind of event, and nothing is allocated once the buffers
// have grown.
func TestIDHasherAppendLine(t *testing.T) {
	x := NewIDHasher()
	dead := sampleEvent()
	dead.DeadLetter = &DeadLetter{Sink: "s3://b", Reason: ReasonPermanent}
	insert := sampleEvent()
	insert.Kind, insert.EventName, insert.NewImage, insert.OldImage = Inserted, "INSERT", insert.OldImage, nil
	for _, e := range []Event{sampleEvent(), dead, insert} {
		out, id := x.AppendLine([]byte("prefix"), &e)
		if line := string(out[len("prefix"):id]); line != string(AppendLine(nil, &e)) {
			t.Fatalf("line %q, want AppendLine's", line)
		}
		if got := string(out[id:]); got != MessageID(&e) {
			t.Fatalf("ID %q, want %q", got, MessageID(&e))
		}
		if got := string(x.AppendMessageID([]byte("p"), &e)); got != "p"+MessageID(&e) {
			t.Fatalf("AppendMessageID %q", got)
		}
	}
	e := sampleEvent()
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf, _ = x.AppendLine(buf[:0], &e) }); n != 0 {
		t.Errorf("AppendLine allocates %v times", n)
	}
}

func clone(m Item) Item {
	out := Item{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
