package e2e

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// TestSourcePreflight is issue 19's "done when" on the real binary against
// `archiver engine` as a process: `archiver run` against a missing table,
// a table without a stream, a KEYS_ONLY stream and a dead endpoint each
// exits 1 within 30 s, its last line naming the table and the problem.
func TestSourcePreflight(t *testing.T) {
	bin := buildArchiver(t)
	work := t.TempDir()
	eng := startProc(t, work, "engine", bin, "engine", "--listen", "127.0.0.1:0", "--ttl-interval", "-1s")
	endpoint := engineEndpoint(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := enginetest.ClientAt(endpoint, "preflight")
	create := func(table string, view dtypes.StreamViewType) {
		in := &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			BillingMode:          dtypes.BillingModePayPerRequest,
			AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String(keyAttr), AttributeType: dtypes.ScalarAttributeTypeS}},
			KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String(keyAttr), KeyType: dtypes.KeyTypeHash}},
		}
		if view != "" {
			in.StreamSpecification = &dtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: view}
		}
		if _, err := db.CreateTable(ctx, in); err != nil {
			t.Fatalf("CreateTable %s: %v", table, err)
		}
	}
	create("NoStream", "")
	create("KeysOnly", dtypes.StreamViewTypeKeysOnly)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	_ = l.Close()

	for _, tc := range []struct {
		name, endpoint, table string
		says                  []string
	}{
		{"missing table", endpoint, "Missing", []string{"table Missing in us-east-1: no such table", "--wait-for-table"}},
		{"no stream", endpoint, "NoStream", []string{"table NoStream in us-east-1: no stream enabled", "StreamViewType=NEW_AND_OLD_IMAGES"}},
		{"keys only", endpoint, "KeysOnly", []string{"table KeysOnly in us-east-1: the stream carries no old image: view type KEYS_ONLY", "--allow-keys-only"}},
		{"dead endpoint", dead, "KeysOnly", []string{"table KeysOnly in us-east-1: endpoint unreachable: endpoint " + dead + " refused the connection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startProc(t, dir, "archiver", bin, "run", "--endpoint", tc.endpoint, "--table", tc.table,
				"--checkpoint", "file://"+filepath.Join(dir, "cp.json"), "--sink", "file://"+filepath.Join(dir, "out"),
				"--metrics-addr", "127.0.0.1:0")
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				t.Fatalf("archiver run still running 30 s after start:\n%s", p.tail(10))
			}
			var ee *exec.ExitError
			if !errors.As(p.err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("archiver run exited with %v, want exit code 1:\n%s", p.err, p.tail(10))
			}
			last := p.tail(1)
			for _, s := range tc.says {
				if !strings.HasPrefix(last, "archiver run: ") || !strings.Contains(last, s) {
					t.Errorf("last line %q does not say %q", last, s)
				}
			}
			if strings.Contains(last, s3SecretKey) {
				t.Errorf("last line shows the secret key: %q", last)
			}
		})
	}
}
