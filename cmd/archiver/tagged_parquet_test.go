package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/parquet-go/parquet-go"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/natstest"
)

// TestRunTablesTaggedParquetNATS is issue 29's done-when: `run
// --tables-tagged archive=yes` with two tagged tables at start, a third
// created with the tag 8 s after start and one untagged table writes
// every expired item of the three tagged tables, none of the untagged,
// to `file://DIR?format=parquet` as Parquet that a reader knowing no
// schema reads back (columns found by name in the file's own schema), and
// to `nats://…&msg-ttl=1h`, where every message carries Nats-TTL.
func TestRunTablesTaggedParquetNATS(t *testing.T) {
	ctx := t.Context()
	bed := enginetest.Start(t, engine.Options{TTLInterval: 100 * time.Millisecond, StreamShards: 2})
	ns := natstest.Start(t)
	const n = 40
	sessionTable(t, ctx, bed.DynamoDB, "tagged-one", n, "archive", "yes")
	sessionTable(t, ctx, bed.DynamoDB, "tagged-two", n, "archive", "yes")
	sessionTable(t, ctx, bed.DynamoDB, "untagged", n)
	dir := filepath.Join(t.TempDir(), "archive")
	p := runProc(t, "--endpoint", bed.Server.Endpoint(), "--tables-tagged", "archive=yes",
		"--checkpoint", "dynamodb://leases?create=true", "--worker-id", "w1",
		"--sink", "file://"+dir+"?format=parquet",
		"--sink", "nats://"+ns.Addr()+"?subject=ttl.{table}.{kind}&create-stream=TTL&msg-ttl=1h&events=expired")
	time.Sleep(8 * time.Second) // the third table comes 8 s after start, as the issue has it
	p.alive(t)
	sessionTable(t, ctx, bed.DynamoDB, "tagged-later", n, "archive", "yes")
	tagged := []string{"tagged-one", "tagged-two", "tagged-later"}
	eventually.True(t, 90*time.Second, "every tagged table's expiries in Parquet", func() bool {
		p.alive(t)
		got := parquetExpiries(t, dir)
		for _, table := range tagged {
			if len(got[table]) != n {
				return false
			}
		}
		return true
	})
	eventually.True(t, 30*time.Second, "every expiry on JetStream", func() bool {
		return natstest.StreamMessages(t, ns.Addr(), "TTL") == 3*n
	})
	p.stop(t)
	got := parquetExpiries(t, dir)
	for _, table := range append(tagged, "untagged") {
		want := n
		if table == "untagged" {
			want = 0
		}
		if len(got[table]) != want {
			t.Errorf("table %s: %d expired items in Parquet, want %d", table, len(got[table]), want)
		}
	}
	if len(got) != len(tagged) {
		t.Errorf("Parquet holds tables %v, want only %v", got, tagged)
	}
	checkNatsTTL(t, ns.Addr(), 3*n)
}

// parquetExpiries reads every .parquet file under dir knowing no schema:
// it finds the columns table, kind, event_name and event_id by name in
// each file's own schema and returns, by table, the event IDs of the
// expired REMOVEs (no user delete may be among them: kind says who).
func parquetExpiries(t *testing.T, dir string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return nil
		}
		for _, r := range readParquetColumns(t, path, "table", "kind", "event_id") {
			if r[1] != "expired" {
				t.Errorf("%s: a %s event, only expiries were asked for", path, r[1])
				continue
			}
			if out[r[0]] == nil {
				out[r[0]] = map[string]bool{}
			}
			out[r[0]][r[2]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readParquetColumns returns the named (required, top-level) string
// columns of every row of the Parquet file at path.
func readParquetColumns(t *testing.T, path string, names ...string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	idx := make([]int, len(names))
	for i, name := range names {
		leaf, ok := pf.Schema().Lookup(name)
		if !ok {
			t.Fatalf("%s: no column %q in the file's schema", path, name)
		}
		idx[i] = leaf.ColumnIndex
	}
	var out [][]string
	rows := pf.Schema() // the file's own schema: no Go type of ours
	r := parquet.NewReader(f, rows)
	defer r.Close()
	for {
		row := make(parquet.Row, 0, 64)
		rs := []parquet.Row{row}
		k, err := r.ReadRows(rs)
		if k == 1 {
			vals := make([]string, len(names))
			rs[0].Range(func(col int, v []parquet.Value) bool {
				for i, c := range idx {
					if c == col && len(v) > 0 {
						vals[i] = v[0].String()
					}
				}
				return true
			})
			out = append(out, vals)
		}
		if err != nil {
			break
		}
	}
	return out
}

// checkNatsTTL reads the TTL stream's want messages and checks each
// carries Nats-TTL 3600 (msg-ttl=1h).
func checkNatsTTL(t *testing.T, addr string, want int) {
	t.Helper()
	_, js := natstest.Connect(t, addr)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "TTL", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for seen < want {
		batch, err := cons.Fetch(want-seen, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if v := m.Headers().Get("Nats-TTL"); v != "3600" {
				t.Fatalf("message %d on %s: Nats-TTL %q, want 3600", seen+got, m.Subject(), v)
			}
		}
		if got == 0 {
			t.Fatalf("read %d of %d messages", seen, want)
		}
		seen += got
	}
}
