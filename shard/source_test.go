package shard

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// closedPort is the URL of a loopback port nothing listens on.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

// TestCheckSources: each way a source can be wrong fails with its own
// error, naming the table, stream or endpoint; what is right passes.
func TestCheckSources(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1, Hooks: engine.Hooks{
		OnRequest: func(op string, r *http.Request) error {
			switch auth := r.Header.Get("Authorization"); {
			case strings.Contains(auth, "Credential=badkey/"):
				return &engine.Error{Code: "UnrecognizedClientException", Message: "The security token included in the request is invalid."}
			case strings.Contains(auth, "Credential=nopermission/"):
				return &engine.Error{Code: "AccessDeniedException", Message: "User is not authorized to perform: dynamodb:" + op}
			}
			return nil
		}}})
	db := bed.DynamoDB
	enginetest.CreateTable(t, db, enginetest.Table{Name: "Full", TTL: "expires"})
	enginetest.CreateTable(t, db, enginetest.Table{Name: "OldOnly", Stream: dtypes.StreamViewTypeOldImage, TTL: "expires"})
	enginetest.CreateTable(t, db, enginetest.Table{Name: "KeysOnly", Stream: dtypes.StreamViewTypeKeysOnly, TTL: "expires"})
	enginetest.CreateTable(t, db, enginetest.Table{Name: "NewOnly", Stream: dtypes.StreamViewTypeNewImage, TTL: "expires"})
	enginetest.CreateTable(t, db, enginetest.Table{Name: "NoStream", NoStream: true, TTL: "expires"})
	streams := newEnv(t, engine.Options{}).streams // another engine: no stream of srv's is there
	dead := closedPort(t)

	for _, tc := range []struct {
		name     string
		c        SourceCheck
		want     error    // nil: passes
		mentions []string // in the error
	}{
		{"full image", SourceCheck{TableNames: []string{"Full", "OldOnly"}, RequireStream: true, NeedOldImage: true}, nil, nil},
		{"no such table", SourceCheck{TableNames: []string{"Full", "Nope"}, RequireStream: true}, ErrNoSuchTable, []string{"table Nope", "no such table"}},
		{"no stream", SourceCheck{TableNames: []string{"NoStream"}, RequireStream: true}, ErrStreamDisabled,
			[]string{"table NoStream", "no stream enabled", "--table-name NoStream", "StreamViewType=NEW_AND_OLD_IMAGES"}},
		{"no stream, none needed", SourceCheck{TableNames: []string{"NoStream"}}, nil, nil},
		{"keys only", SourceCheck{TableNames: []string{"KeysOnly"}, RequireStream: true, NeedOldImage: true}, ErrNoOldImage,
			[]string{"table KeysOnly", "view type KEYS_ONLY", "--table-name KeysOnly", "StreamViewType=NEW_AND_OLD_IMAGES", "new ARN"}},
		{"new image", SourceCheck{TableNames: []string{"NewOnly"}, RequireStream: true, NeedOldImage: true}, ErrNoOldImage, []string{"table NewOnly", "view type NEW_IMAGE"}},
		{"keys only allowed", SourceCheck{TableNames: []string{"KeysOnly"}, RequireStream: true, NeedOldImage: true, AllowKeysOnly: true}, nil, nil},
		{"keys only, no removals wanted", SourceCheck{TableNames: []string{"KeysOnly"}, RequireStream: true}, nil, nil},
		{"dead endpoint", SourceCheck{Tables: enginetest.ClientAt(dead, "test"), TableNames: []string{"Full"}, Endpoint: dead}, ErrUnreachable,
			[]string{"table Full", "endpoint " + dead, "refused the connection"}},
		{"credentials refused", SourceCheck{Tables: bed.Client("badkey"), TableNames: []string{"Full"}}, ErrCredentials,
			[]string{"table Full", "credentials refused", "UnrecognizedClientException"}},
		{"access denied", SourceCheck{Tables: bed.Client("nopermission"), TableNames: []string{"Full"}}, ErrAccessDenied,
			[]string{"table Full", "access denied", "dynamodb:DescribeTable"}},
		{"no such stream", SourceCheck{Streams: streams, StreamARNs: []string{"arn:aws:dynamodb:us-east-1:000000000000:table/X/stream/2026-01-01T00:00:00.000"}},
			ErrNoSuchStream, []string{"stream arn:aws:dynamodb:us-east-1:000000000000:table/X/stream/", "no such stream"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.c.Tables == nil {
				tc.c.Tables = db
			}
			_, err := CheckSources(t.Context(), tc.c)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckSources: %v", err)
				}
				return
			}
			var se *SourceError
			if !errors.Is(err, tc.want) || !errors.As(err, &se) {
				t.Fatalf("CheckSources = %v, want a *SourceError matching %v", err, tc.want)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			t.Log(err)
			if strings.Contains(err.Error(), enginetest.Secret) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line without secrets: %q", err)
			}
		})
	}
}

// TestCheckSourcesStreamARN: an explicit stream ARN is described, and its
// view type checked as a table's is.
func TestCheckSourcesStreamARN(t *testing.T) {
	env := newEnv(t, engine.Options{})
	enginetest.CreateTable(t, env.ddb, enginetest.Table{Name: "KeysOnly", Stream: dtypes.StreamViewTypeKeysOnly})
	out, err := env.ddb.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String("KeysOnly")})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	got, err := CheckSources(t.Context(), SourceCheck{Streams: env.streams, StreamARNs: []string{arn}})
	if err != nil || len(got) != 1 || got[0].Table != "KeysOnly" || got[0].ViewType != "KEYS_ONLY" {
		t.Fatalf("CheckSources = %+v, %v", got, err)
	}
	if got, err := CheckTables(t.Context(), SourceCheck{Streams: env.streams, StreamARNs: []string{arn}, NeedOldImage: true}); err != nil || len(got) != 0 {
		t.Fatalf("CheckTables looked at a stream ARN: %+v, %v", got, err)
	}
	_, err = CheckSources(t.Context(), SourceCheck{Streams: env.streams, StreamARNs: []string{arn}, NeedOldImage: true})
	if !errors.Is(err, ErrNoOldImage) || !strings.Contains(err.Error(), "stream "+arn) || !strings.Contains(err.Error(), "--table-name KeysOnly") {
		t.Fatalf("CheckSources = %v, want ErrNoOldImage naming the stream and its table", err)
	}
}

// TestCheckSourcesWarnings: TTL off and an accepted keys-only stream are
// WARNs naming the table.
func TestCheckSourcesWarnings(t *testing.T) {
	env := newEnv(t, engine.Options{})
	enginetest.CreateTable(t, env.ddb, enginetest.Table{Name: "TTLOff"})
	enginetest.CreateTable(t, env.ddb, enginetest.Table{Name: "TTLOn", Stream: dtypes.StreamViewTypeKeysOnly, TTL: "expires"})
	core, logs := observer.New(zapcore.WarnLevel)
	_, err := CheckSources(t.Context(), SourceCheck{Tables: env.ddb, TableNames: []string{"TTLOff", "TTLOn"}, RequireStream: true,
		NeedOldImage: true, AllowKeysOnly: true, WarnTTLOff: true, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.ContextMap()["table"].(string)+": "+e.Message)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "TTLOff: the table's TTL is off") || !strings.HasPrefix(got[1], "TTLOn: the stream carries no old image") {
		t.Fatalf("warnings: %q", got)
	}
}

// TestCheckSourcesWaitsForTable: with WaitForTable, a table created while
// the check waits passes; one that never comes fails once the wait is over.
func TestCheckSourcesWaitsForTable(t *testing.T) {
	env := newEnv(t, engine.Options{})
	core, logs := observer.New(zapcore.InfoLevel)
	fast := backoff.Policy{Min: time.Millisecond, Max: 20 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		_, err := CheckSources(t.Context(), SourceCheck{Tables: env.ddb, TableNames: []string{"Later"}, RequireStream: true,
			WaitForTable: time.Hour, Backoff: fast, Logger: zap.New(core)})
		done <- err
	}()
	eventually.True(t, 30*time.Second, "the check to wait for the table", func() bool {
		return logs.FilterMessage("waiting for the table").FilterField(zap.String("table", "Later")).Len() > 0
	})
	enginetest.CreateTable(t, env.ddb, enginetest.Table{Name: "Later"})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("CheckSources after the table came: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("CheckSources still waiting a minute after the table came")
	}

	_, err := CheckSources(t.Context(), SourceCheck{Tables: env.ddb, TableNames: []string{"Never"}, RequireStream: true,
		WaitForTable: 50 * time.Millisecond, Backoff: fast})
	if !errors.Is(err, ErrNoSuchTable) || !strings.Contains(err.Error(), "waited 50ms") {
		t.Fatalf("CheckSources for a table that never comes = %v", err)
	}
	_, err = CheckSources(t.Context(), SourceCheck{Tables: enginetest.ClientAt(closedPort(t), "test"), TableNames: []string{"Later"},
		WaitForTable: time.Hour, Backoff: fast})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("CheckSources against a dead endpoint while waiting = %v, want ErrUnreachable at once", err)
	}
}
