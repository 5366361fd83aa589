package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/demo"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/manifest"
)

// archiverProc is `archiver run` as a subprocess of the test.
type archiverProc struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

// runProc starts `archiver run` with args in a clean environment (no AWS
// credentials: the loopback endpoint gets placeholders); the test's end
// kills it.
func runProc(t *testing.T, args ...string) *archiverProc {
	t.Helper()
	dir := t.TempDir()
	p := &archiverProc{cmd: exec.Command(os.Args[0], append([]string{"run", "--metrics-addr", "127.0.0.1:0"}, args...)...),
		out: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = []string{"ARCHIVER_TEST_MAIN=1", "HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("archiver %v output:\n%s", args, p.out.String())
		}
	})
	return p
}

// alive fails the test when the archiver exited.
func (p *archiverProc) alive(t *testing.T) {
	select {
	case err := <-p.exited:
		t.Fatalf("archiver exited early: %v", err)
	default:
	}
}

// stop sends SIGTERM and waits for exit 0.
func (p *archiverProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("archiver exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("archiver still running 60s after SIGTERM")
	}
}

// sessionTable creates a SessionData-shaped table with TTL, tagged with
// kv (none: untagged), and writes n items whose TTL has passed.
func sessionTable(t *testing.T, ctx context.Context, ddb *dynamodb.Client, name string, n int, kv ...string) {
	t.Helper()
	if _, err := demo.CreateSessionTable(ctx, ddb, name); err != nil {
		t.Fatal(err)
	}
	if len(kv) > 0 {
		d, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		var tags []ddbtypes.Tag
		for i := 0; i+1 < len(kv); i += 2 {
			tags = append(tags, ddbtypes.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
		}
		if _, err := ddb.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: d.Table.TableArn, Tags: tags}); err != nil {
			t.Fatal(err)
		}
	}
	putExpired(t, ctx, ddb, name, n)
}

// expiredIn counts the distinct expired events of one table in the file
// sink's folder, and the events of any other kind.
func expiredIn(t *testing.T, archive, table string) (expired, other int) {
	t.Helper()
	for kind, ids := range readArchive(t, filepath.Join(archive, table)) {
		if kind == "expired" {
			expired = len(ids)
		} else {
			other += len(ids)
		}
	}
	return expired, other
}

// TestRunTablesTagged: `run --tables-tagged archive=yes` with two tagged
// tables at start, a third created with the tag while it runs and one
// untagged table archives every expired item of the three tagged tables
// and none of the untagged one, and no user delete.
func TestRunTablesTagged(t *testing.T) {
	ctx := t.Context()
	bed := enginetest.Start(t, engine.Options{TTLInterval: 100 * time.Millisecond, StreamShards: 2})
	const n = 60
	sessionTable(t, ctx, bed.DynamoDB, "tagged-one", n, "archive", "yes")
	sessionTable(t, ctx, bed.DynamoDB, "tagged-two", n, "archive", "yes", "team", "a")
	sessionTable(t, ctx, bed.DynamoDB, "untagged", n)
	sessionTable(t, ctx, bed.DynamoDB, "tagged-no", n, "archive", "no")
	archive := filepath.Join(t.TempDir(), "archive")
	p := runProc(t, "--endpoint", bed.Server.Endpoint(), "--tables-tagged", "archive=yes", "--tables-refresh", "2s",
		"--checkpoint", "dynamodb://leases?create=true", "--worker-id", "w1", "--sink", "file://"+archive)
	eventually.True(t, 60*time.Second, "the two tagged tables archived", func() bool {
		p.alive(t)
		one, _ := expiredIn(t, archive, "tagged-one")
		two, _ := expiredIn(t, archive, "tagged-two")
		return one == n && two == n
	})
	// Created and tagged while run runs; its items expire before it is
	// found: they must be read from the stream's start.
	sessionTable(t, ctx, bed.DynamoDB, "tagged-later", n, "archive", "yes")
	eventually.True(t, 60*time.Second, "the table tagged later archived", func() bool {
		p.alive(t)
		later, _ := expiredIn(t, archive, "tagged-later")
		return later == n
	})
	p.stop(t)
	for _, table := range []string{"tagged-one", "tagged-two", "tagged-later", "untagged", "tagged-no"} {
		want := n
		if !strings.HasPrefix(table, "tagged-") || table == "tagged-no" {
			want = 0
		}
		if expired, other := expiredIn(t, archive, table); expired != want || other != 0 {
			t.Errorf("table %s: %d expired and %d other events archived, want %d and 0", table, expired, other, want)
		}
	}
	if !strings.Contains(p.out.String(), `"table added"`) {
		t.Error("no INFO line \"table added\"")
	}
	if ws := manifestWriters(t, archive); len(ws) != 1 || ws["w1"] == 0 {
		t.Errorf("the manifests name the writers %v, want w1 alone (--worker-id)", ws)
	}
}

// manifestWriters counts the coverage manifests under archive by the
// worker they name.
func manifestWriters(t *testing.T, archive string) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := filepath.WalkDir(filepath.Join(archive, manifest.Dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		m, err := manifest.Decode(f)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out[m.Writer]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunTablesTaggedWaits: with no table carrying the tag, run starts,
// says it waits, and archives a table as soon as it is tagged.
func TestRunTablesTaggedWaits(t *testing.T) {
	ctx := t.Context()
	bed := enginetest.Start(t, engine.Options{TTLInterval: 100 * time.Millisecond})
	archive := filepath.Join(t.TempDir(), "archive")
	p := runProc(t, "--endpoint", bed.Server.Endpoint(), "--tables-tagged", "archive=yes", "--tables-refresh", "1s",
		"--checkpoint", "file://"+filepath.Join(t.TempDir(), "cp.json"), "--sink", "file://"+archive)
	eventually.True(t, 30*time.Second, "the waiting line", func() bool {
		p.alive(t)
		return strings.Contains(p.out.String(), "no table carries tag(s) archive=yes; waiting")
	})
	addr := regexp.MustCompile(`"metrics_addr":"([^"]+)"`).FindStringSubmatch(p.out.String())
	if addr == nil {
		t.Fatal("no metrics_addr in the archiver's log")
	}
	if code, body := getReadyz(t, addr[1]); code != http.StatusServiceUnavailable || !strings.Contains(body, "no table carries tag(s) archive=yes; waiting") {
		t.Errorf("/readyz while waiting = %d %q, want 503 saying it waits", code, body)
	}
	const n = 20
	sessionTable(t, ctx, bed.DynamoDB, "first", n, "archive", "yes")
	eventually.True(t, 60*time.Second, "the tagged table archived", func() bool {
		p.alive(t)
		got, _ := expiredIn(t, archive, "first")
		return got == n
	})
	eventually.True(t, 30*time.Second, "/readyz 200", func() bool {
		code, _ := getReadyz(t, addr[1])
		return code == http.StatusOK
	})
	p.stop(t)
}

// getReadyz returns /readyz's status and body.
func getReadyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRunCheckpointNamespaces: two deployments with different
// --checkpoint-namespace share one lease table and each archives every
// expired item (in one namespace they would split the shards).
func TestRunCheckpointNamespaces(t *testing.T) {
	ctx := t.Context()
	bed := enginetest.Start(t, engine.Options{TTLInterval: 100 * time.Millisecond, StreamShards: 3})
	const n = 90
	sessionTable(t, ctx, bed.DynamoDB, "SessionData", n)
	var procs []*archiverProc
	var dirs []string
	for _, ns := range []string{"blue", "green"} {
		dir := filepath.Join(t.TempDir(), ns)
		dirs = append(dirs, dir)
		procs = append(procs, runProc(t, "--endpoint", bed.Server.Endpoint(), "--table", "SessionData",
			"--checkpoint", "dynamodb://leases?create=true", "--checkpoint-namespace", ns, "--worker-id", "w-"+ns,
			"--sink", "file://"+dir))
	}
	for i, dir := range dirs {
		eventually.True(t, 60*time.Second, "every item archived by "+dir, func() bool {
			procs[i].alive(t)
			got, _ := expiredIn(t, dir, "SessionData")
			return got == n
		})
	}
	for _, p := range procs {
		p.stop(t)
	}
}
