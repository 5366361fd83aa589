package engine_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/engine"
)

// TestAWSCLI runs the README's engine quick start with the real AWS CLI:
// create a table with a stream, enable TTL, put an item that has already
// expired, and see it swept and its REMOVE in the stream as a service
// delete. The CLI is not a Go module; where it is not installed the test
// says so and skips.
func TestAWSCLI(t *testing.T) {
	awsBin, err := exec.LookPath("aws")
	if err != nil {
		t.Skip("the AWS CLI is not installed (apt-get install awscli); skipping the CLI walkthrough")
	}
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(awsBin, append(args, "--endpoint-url", srv.Endpoint(), "--output", "text")...)
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
			"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_DEFAULT_REGION=us-east-1",
			"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"),
			"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=",
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}

	arn := run("dynamodb", "create-table", "--table-name", "SessionData",
		"--attribute-definitions", "AttributeName=UserName,AttributeType=S", "AttributeName=SessionId,AttributeType=S",
		"--key-schema", "AttributeName=UserName,KeyType=HASH", "AttributeName=SessionId,KeyType=RANGE",
		"--billing-mode", "PAY_PER_REQUEST",
		"--stream-specification", "StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES",
		"--query", "TableDescription.LatestStreamArn")
	if !strings.HasPrefix(arn, "arn:aws:dynamodb:us-east-1:") {
		t.Fatalf("LatestStreamArn = %q", arn)
	}
	run("dynamodb", "update-time-to-live", "--table-name", "SessionData",
		"--time-to-live-specification", "Enabled=true,AttributeName=ExpirationTime")
	if got := run("dynamodb", "describe-time-to-live", "--table-name", "SessionData",
		"--query", "TimeToLiveDescription.[TimeToLiveStatus,AttributeName]"); got != "ENABLED\tExpirationTime" {
		t.Fatalf("describe-time-to-live = %q", got)
	}
	expired := time.Now().Add(-5 * time.Second).Unix()
	run("dynamodb", "put-item", "--table-name", "SessionData", "--item", fmt.Sprintf(
		`{"UserName":{"S":"alice"},"SessionId":{"S":"s1"},"ExpirationTime":{"N":"%d"}}`, expired))

	deadline := time.Now().Add(30 * time.Second)
	for run("dynamodb", "scan", "--table-name", "SessionData", "--select", "COUNT", "--query", "Count") != "0" {
		if time.Now().After(deadline) {
			t.Fatal("the expired item was not swept within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := run("dynamodbstreams", "list-streams", "--table-name", "SessionData", "--query", "Streams[0].StreamArn"); got != arn {
		t.Fatalf("list-streams = %q, want %q", got, arn)
	}
	shardID := run("dynamodbstreams", "describe-stream", "--stream-arn", arn, "--query", "StreamDescription.Shards[0].ShardId")
	it := run("dynamodbstreams", "get-shard-iterator", "--stream-arn", arn, "--shard-id", shardID,
		"--shard-iterator-type", "TRIM_HORIZON", "--query", "ShardIterator")
	got := run("dynamodbstreams", "get-records", "--shard-iterator", it,
		"--query", "Records[].[eventName,userIdentity.Type,userIdentity.PrincipalId]")
	want := "INSERT\tNone\tNone\nREMOVE\tService\tdynamodb.amazonaws.com"
	if got != want {
		t.Fatalf("stream records:\n%s\nwant:\n%s", got, want)
	}
}
