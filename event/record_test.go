package event

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestAppendStreamRecord(t *testing.T) {
	created := time.Unix(1767322800, 500_000_000)
	full := types.Record{
		AwsRegion: aws.String("eu-west-1"), EventID: aws.String("e-1"), EventName: "BOGUS",
		EventSource: aws.String("aws:dynamodb"), EventVersion: aws.String("1.1"),
		UserIdentity: &types.Identity{PrincipalId: aws.String("dynamodb.amazonaws.com"), Type: aws.String("Service")},
		Dynamodb: &types.StreamRecord{
			ApproximateCreationDateTime: &created, Keys: Item{"pk": &types.AttributeValueMemberS{Value: "a"}},
			OldImage: everyType(), SequenceNumber: aws.String("12x"), SizeBytes: aws.Int64(99),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	}
	tests := []struct {
		name string
		rec  types.Record
		want map[string]any // top-level members, compared after a JSON round trip
	}{
		{"empty", types.Record{}, map[string]any{}},
		{"no dynamodb", types.Record{EventName: "INSERT", EventID: aws.String("x")},
			map[string]any{"eventName": "INSERT", "eventID": "x"}},
		{"full", full, map[string]any{
			"awsRegion": "eu-west-1", "eventID": "e-1", "eventName": "BOGUS", "eventSource": "aws:dynamodb",
			"eventVersion": "1.1", "userIdentity": map[string]any{"principalId": "dynamodb.amazonaws.com", "type": "Service"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := AppendStreamRecord(nil, &tc.rec)
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("invalid JSON %s: %v", out, err)
			}
			delete(got, "dynamodb")
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v\n%s", got, tc.want, out)
			}
		})
	}
	var body struct {
		Dynamodb struct {
			ApproximateCreationDateTime json.Number
			Keys, OldImage              json.RawMessage
			SequenceNumber              string
			SizeBytes                   int64
			StreamViewType              string
		} `json:"dynamodb"`
	}
	dec := json.NewDecoder(bytes.NewReader(AppendStreamRecord(nil, &full)))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		t.Fatal(err)
	}
	d := body.Dynamodb
	if d.ApproximateCreationDateTime != "1767322800.5" || d.SequenceNumber != "12x" || d.SizeBytes != 99 || d.StreamViewType != "NEW_AND_OLD_IMAGES" {
		t.Fatalf("dynamodb members: %+v", d)
	}
	old, err := UnmarshalItem(d.OldImage)
	if err != nil || !reflect.DeepEqual(old, full.Dynamodb.OldImage) {
		t.Fatalf("OldImage does not round-trip: %v", err)
	}
}
