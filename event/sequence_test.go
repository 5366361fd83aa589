package event

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestLastSequence(t *testing.T) {
	seq := func(s string) types.Record { return types.Record{Dynamodb: &types.StreamRecord{SequenceNumber: &s}} }
	tests := []struct {
		recs      []types.Record
		want      string
		wantAfter int
	}{
		{nil, "", 0},
		{[]types.Record{seq("5"), seq("7")}, "7", 0},
		{[]types.Record{seq("5"), {}, seq("x1")}, "5", 2},
		{[]types.Record{{}, {Dynamodb: &types.StreamRecord{}}}, "", 2},
	}
	for _, tc := range tests {
		got, after := LastSequence(tc.recs)
		if got != tc.want || after != tc.wantAfter {
			t.Errorf("LastSequence = %q, %d; want %q, %d", got, after, tc.want, tc.wantAfter)
		}
	}
}
