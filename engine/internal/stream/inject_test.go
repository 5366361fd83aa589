package stream

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// TestInject: an injected record lands in the shard named (not the one its
// key hashes to), with its images kept as given and its sequence number
// after the stream's last; closed and unknown shards and non-object keys
// are refused.
func TestInject(t *testing.T) {
	e := newEnv(t, Options{Shards: 4})
	s := e.reg.Create("", "t", KeysOnly)
	shards := s.Shards()
	for _, sh := range shards {
		seq, err := e.reg.Inject(s.ARN(), sh.ID, EncodedChange{
			EventName: "MODIFY", Keys: []byte(` {"pk": {"S": "same"}} `), New: []byte(`{"pk":{"S":"same"},"n":{"N":"x"}}`), Size: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		recs := e.readShard(t, s.ARN(), sh.ID, 0)
		if len(recs) != 1 || aws.ToString(recs[0].Dynamodb.SequenceNumber) != seq || recs[0].EventName != types.OperationTypeModify {
			t.Fatalf("shard %s: %+v, want the one injected record %s", sh.ID, recs, seq)
		}
		if n, ok := recs[0].Dynamodb.NewImage["n"].(*types.AttributeValueMemberN); !ok || n.Value != "x" {
			t.Fatalf("NewImage %+v, want it kept on a KEYS_ONLY stream", recs[0].Dynamodb.NewImage)
		}
	}
	if _, err := e.reg.Inject(s.ARN(), "shardId-00000000000000000000-00000000", EncodedChange{EventName: "INSERT", Keys: []byte(`{}`)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown shard: %v, want ErrNotFound", err)
	}
	if _, err := e.reg.Inject(s.ARN(), shards[0].ID, EncodedChange{EventName: "INSERT", Keys: []byte(`[]`)}); err == nil || !strings.Contains(err.Error(), "Keys is not a JSON object") {
		t.Fatalf("array keys: %v", err)
	}
	if _, err := e.reg.Inject(s.ARN(), shards[0].ID, EncodedChange{EventName: "INSERT", Keys: []byte(`{}`), Old: []byte(`{`)}); err == nil || !strings.Contains(err.Error(), "OldImage") {
		t.Fatalf("broken OldImage: %v", err)
	}
	if err := e.reg.Split(s.ARN(), shards[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reg.Inject(s.ARN(), shards[0].ID, EncodedChange{EventName: "INSERT", Keys: []byte(`{}`)}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("closed shard: %v", err)
	}
}
