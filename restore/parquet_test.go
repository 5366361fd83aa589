package restore_test

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/restore"
	"github.com/ttl-archiver/archiver/restore/restoretest"
	"github.com/ttl-archiver/archiver/sinks"
)

// TestRestoreAndReplayFromParquetFileArchive archives expired items
// through the file sink with format=parquet, then restores them (every
// attribute type, exactly) and replays the archive into an NDJSON file
// sink: both read the Parquet archive as they read NDJSON.
func TestRestoreAndReplayFromParquetFileArchive(t *testing.T) {
	const n = 12
	b := restoretest.Start(t, engine.Options{})
	b.CreateTable("Sessions", "expires", st.StreamViewTypeNewAndOldImages)
	f := &fixture{Bed: b, dir: t.TempDir(), originals: map[string]map[string]ddb.AttributeValue{}}
	for _, it := range b.PutExpiring("Sessions", n) {
		out, err := b.DB.GetItem(b.Ctx, &dynamodb.GetItemInput{TableName: aws.String("Sessions"),
			Key: map[string]ddb.AttributeValue{"pk": it["pk"], "sk": it["sk"]}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		f.originals[keyOf(out.Item)] = out.Item
	}
	if got := b.ExpireAll(); got != n {
		t.Fatalf("swept %d items, want %d", got, n)
	}
	sk, _, err := sinks.Open(b.Ctx, "file://"+f.dir+"?format=parquet&events=all", sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.ArchiveTo(sk, "Sessions", "expires"); got != 2*n {
		t.Fatalf("archived %d events, want %d", got, 2*n)
	}
	b.CreateTable("Restored", "expires", st.StreamViewTypeNewAndOldImages)
	res := f.run(t, restore.Config{TTL: restore.TTLKeep})
	if res.Written != n || res.Failed != 0 {
		t.Fatalf("restore result %+v, want %d written", res, n)
	}
	for _, it := range f.Scan("Restored") {
		if want := f.originals[keyOf(it)]; !reflect.DeepEqual(sortItem(it), sortItem(want)) {
			t.Errorf("%s restored as %#v, want %#v", keyOf(it), it, want)
		}
	}
	rr := f.replayInto(t, "file://"+t.TempDir()+"?events=all", restore.ReplayConfig{})
	if rr.Events != 2*n || rr.Acked != 2*n || rr.Failed != 0 {
		t.Fatalf("replay result %+v, want %d events acknowledged", rr, 2*n)
	}
}
