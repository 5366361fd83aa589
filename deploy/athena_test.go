package deploy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/s3test"
	"github.com/ttl-archiver/archiver/sinks"
)

// The archive's days in these tests: data, never compared to the clock.
var (
	athenaDay1 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	athenaDay2 = athenaDay1.AddDate(0, 0, 1)
)

const athenaPrefix = "ttl-archive"

var (
	duckqOnce sync.Once
	duckqPath string
	duckqErr  error
)

// duckqBinary finds duckq (tools/duckq, DuckDB) on $PATH or in .tools/bin,
// building it there when it is in neither place; it skips the test when it
// cannot (no C compiler, offline). CI builds it with `make tools`.
func duckqBinary(t *testing.T) string {
	t.Helper()
	duckqOnce.Do(func() {
		if p, err := exec.LookPath("duckq"); err == nil {
			duckqPath = p
			return
		}
		p, err := filepath.Abs(filepath.Join("..", ".tools", "bin", "duckq"))
		if err != nil {
			duckqErr = err
			return
		}
		if _, err := os.Stat(p); err == nil {
			duckqPath = p
			return
		}
		cmd := exec.Command("go", "build", "-o", p, ".")
		cmd.Dir = filepath.Join("..", "tools", "duckq")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			duckqErr = fmt.Errorf("building tools/duckq: %w\n%s", err, out)
			return
		}
		duckqPath = p
	})
	if duckqErr != nil {
		t.Skipf("SKIPPING ATHENA SQL TESTS: duckq is not on $PATH or in .tools/bin and could not be built (no C compiler? offline?); run `make tools`. %v", duckqErr)
	}
	return duckqPath
}

// duckResult is one query's answer as duckq prints it.
type duckResult struct {
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

// duckQuery runs the scripts, then the queries, in one DuckDB database.
func duckQuery(t *testing.T, scripts []string, queries ...string) []duckResult {
	t.Helper()
	args := []string{"-timeout", "2m"}
	for _, s := range scripts {
		args = append(args, "-f", s)
	}
	for _, q := range queries {
		args = append(args, "-q", q)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), duckqBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("duckq: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	out := make([]duckResult, len(queries))
	for i := range out {
		if err := dec.Decode(&out[i]); err != nil {
			t.Fatalf("duckq's answer to %q: %v", queries[i], err)
		}
	}
	return out
}

// rowsText renders rows one per line, values as fmt prints them.
func rowsText(r duckResult) string {
	var b strings.Builder
	for _, row := range r.Rows {
		b.WriteString(strings.TrimSuffix(strings.TrimPrefix(fmt.Sprint(row), "["), "]"))
		b.WriteByte('\n')
	}
	return b.String()
}

// athenaSetup returns the DuckDB scripts that define the archive in dir
// and the views: duckdb/table.sql pointed at dir, duckdb/compat.sql, then
// views/*.sql in file order, each run as written.
func athenaSetup(t *testing.T, dir string) []string {
	t.Helper()
	table := strings.ReplaceAll(readFile(t, "athena/duckdb/table.sql"), "ARCHIVE_DIR", filepath.ToSlash(dir))
	tablePath := filepath.Join(t.TempDir(), "table.sql")
	if err := os.WriteFile(tablePath, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	views, err := filepath.Glob("athena/views/*.sql")
	if err != nil || len(views) == 0 {
		t.Fatalf("no views in athena/views: %v", err)
	}
	return append([]string{tablePath, "athena/duckdb/compat.sql"}, views...)
}

// TestAthenaViewsOnArchive writes an archive through the S3 sink into
// versitygw, copies it to a directory with its keys as paths (what `aws s3
// sync` makes of it), and asks the views of deploy/athena the analysts'
// questions with DuckDB: expiries per day and table, TTL lag percentiles,
// an item's history. The archive holds a re-delivered tail written twice,
// which the views count once.
func TestAthenaViewsOnArchive(t *testing.T) {
	duckqBinary(t) // skip before starting anything
	dir := writeTestArchive(t)
	res := duckQuery(t, athenaSetup(t, dir),
		`SELECT count(*) FROM ttl_archive`,
		`SELECT count(*) FROM archive_events`,
		`SELECT table_name, dt, expiries, by_dynamodb_ttl, by_other FROM expiries_per_day ORDER BY table_name, dt`,
		`SELECT table_name, dt, expiries_with_ttl, lag_p50_seconds, lag_p90_seconds, lag_p99_seconds, lag_max_seconds
		 FROM ttl_lag_per_day ORDER BY table_name, dt`,
		`SELECT created_at, kind, event_name, deleted_by, ttl_value, json_extract_scalar(item, '$.plan.S')
		 FROM item_history WHERE table_name = 'sessions' AND keys['pk'].s = 'user#7' ORDER BY stream_order`,
		`SELECT kind, dt, hr, json_extract_scalar(item, '$["cart-total"].N')
		 FROM item_history WHERE table_name = 'carts' AND keys['cartId'].s = 'cart#3' AND keys['version'].n = '2'`,
		`SELECT count(*) FROM archive_events WHERE kind = 'expired' AND hr = '04'`,
		`SELECT table_name, region, count(*) FROM archive_events GROUP BY table_name, region ORDER BY table_name`,
	)
	checks := []struct{ name, want string }{
		{"lines", "126\n"}, // 10 of them copies of a re-delivered tail, 3 another Region's copies
		{"events", "113\n"},
		{"expiries per day", "" +
			"carts 2025-03-01 6 6 0\n" +
			"sessions 2025-03-01 100 90 10\n" +
			"sessions 2025-03-02 3 3 0\n"},
		// sessions, day 1: lags 1..99 s and 100.5 s; carts: 0 (left out of
		// the line), 2, 4, 6, 8 s and one keys-only event without a TTL.
		{"lag percentiles", "" +
			"carts 2025-03-01 5 4 8 8 8\n" +
			"sessions 2025-03-01 100 50 90 99 100.5\n" +
			"sessions 2025-03-02 3 20 30 30 30\n"},
		{"history of user#7", "" +
			"2025-03-01T01:10:00Z inserted INSERT <nil> <nil> free\n" +
			"2025-03-01T02:20:00Z modified MODIFY <nil> <nil> pro\n" +
			"2025-03-01T03:07:00Z expired REMOVE dynamodb-ttl 1740798413 pro\n"}, // TTL 03:06:53
		{"history of cart#3 v2", "expired 2025-03-01 12 19.99\n"},
		{"expiries in hour 04", "41\n"},
		// carts' lines name no Region: it is their streamArn's.
		{"events per Region", "carts eu-west-1 6\nsessions us-east-1 107\n"},
	}
	for i, c := range checks {
		if got := rowsText(res[i]); got != c.want {
			t.Errorf("%s: got\n%swant\n%s", c.name, got, c.want)
		}
	}
}

// TestAthenaTableMatchesDuckDB: the DuckDB table of deploy/athena/duckdb
// has the columns, types and partition columns of the Athena DDL, type for
// type (Athena's string is DuckDB's VARCHAR or JSON, <> are (), names
// compared without case), so the views read the same data in both.
func TestAthenaTableMatchesDuckDB(t *testing.T) {
	duckqBinary(t)
	dir := t.TempDir()
	writeArchiveLine(t, dir, "table=t/kind=expired/dt=2025-03-01/hr=00/s-1-1.jsonl.gz")
	res := duckQuery(t, athenaSetup(t, dir), `DESCRIBE ttl_archive`)
	var got []string
	for _, row := range res[0].Rows {
		// JSON is DuckDB's name for text that holds JSON.
		typ := strings.NewReplacer(" ", "", "json", "varchar").Replace(strings.ToLower(fmt.Sprint(row[1])))
		got = append(got, strings.ToLower(fmt.Sprint(row[0]))+" "+typ)
	}
	var want []string
	for _, c := range athenaDDLColumns(t) {
		typ := strings.NewReplacer("string", "varchar", "<", "(", ">", ")", ":", "", "`", `"`, " ", "").Replace(c[1])
		want = append(want, c[0]+" "+typ)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("DuckDB's ttl_archive:\n%s\nAthena's (translated):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// writeArchiveLine writes one event's archive line, gzipped, at rel in dir.
func writeArchiveLine(t *testing.T, dir, rel string) {
	t.Helper()
	e := event.Event{Kind: event.Expired, Table: "t", EventID: "e", EventName: "REMOVE", Keys: event.Item{"pk": &types.AttributeValueMemberS{Value: "a"}}}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(append(event.AppendLine(nil, &e), '\n')); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// athenaDDLColumns returns the columns, then the partition columns, of
// deploy/athena/table.sql as (lower-case name, type with spaces removed
// after commas and colons).
func athenaDDLColumns(t *testing.T) [][2]string {
	return ddlColumns(t, "athena/table.sql", "ttl_archive")
}

// ddlColumns returns the columns, then the partition columns, of table's
// CREATE EXTERNAL TABLE in file, as athenaDDLColumns does.
func ddlColumns(t *testing.T, file, table string) [][2]string {
	t.Helper()
	ddl := readFile(t, file)
	body := between(t, ddl, table+" (", "\n)\nPARTITIONED BY (")
	parts := between(t, ddl, "PARTITIONED BY (", ")\n")
	var cols [][2]string
	for _, c := range append(splitTopLevel(body), splitTopLevel(parts)...) {
		c = strings.Join(strings.Fields(c), " ")
		name, typ, ok := strings.Cut(c, " ")
		if !ok {
			t.Fatalf("%s: column %q has no type", file, c)
		}
		typ = strings.NewReplacer(", ", ",", ": ", ":", "< ", "<", " >", ">").Replace(typ)
		cols = append(cols, [2]string{strings.ToLower(strings.Trim(name, "`")), typ})
	}
	return cols
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		t.Fatalf("no %q", from)
	}
	out, _, ok := strings.Cut(rest, to)
	if !ok {
		t.Fatalf("no %q after %q", to, from)
	}
	return out
}

// splitTopLevel splits a column list at the commas outside <> and ().
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '<', '(':
			depth++
		case '>', ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// writeTestArchive archives the test's events with the S3 sink into
// versitygw and downloads every object under the prefix into a directory,
// each at its key below the prefix, which it returns.
func writeTestArchive(t *testing.T) string {
	return writeTestArchiveWith(t, "")
}

// writeTestArchiveWith is writeTestArchive with the S3 sink's URL
// parameters extra (e.g. "&format=parquet").
func writeTestArchiveWith(t *testing.T, extra string) string {
	t.Helper()
	ctx := t.Context()
	srv := s3test.Start(t)
	url := "s3://" + s3test.Bucket + "/" + athenaPrefix + "?endpoint=" + srv.Endpoint + "&path-style=true" + extra
	sk, _, err := sinks.Open(ctx, url, sinks.Options{AWSConfig: s3test.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	batches := athenaBatches()
	acks := make(chan error, len(batches))
	for _, b := range batches {
		if err := sk.Write(ctx, sinks.Batch{ShardID: b[0].ShardID, Events: b}, func(err error) { acks <- err }); err != nil {
			t.Fatal(err)
		}
		// One object per batch and hour, as a consumer's flush would cut them.
		if err := sk.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := sk.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for range batches {
		if err := <-acks; err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	downloadPrefix(ctx, t, srv.Client, athenaPrefix+"/", dir)
	return dir
}

func downloadPrefix(ctx context.Context, t *testing.T, c *s3.Client, prefix, dir string) {
	t.Helper()
	pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(s3test.Bucket), Prefix: aws.String(prefix)})
	n := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3test.Bucket), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(*o.Key, prefix)))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, body, 0o644); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no objects under %s", prefix)
	}
}
