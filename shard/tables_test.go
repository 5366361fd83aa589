package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

func TestPlanTables(t *testing.T) {
	tests := []struct {
		name   string
		known  []tableView
		listed []string
		want   tablePlan
	}{
		{name: "nothing known, two listed", listed: []string{"b", "a", "a"},
			want: tablePlan{add: []string{"a", "b"}}},
		{name: "static tables stay, also unlisted", known: []tableView{{name: "s", static: true, reading: true}},
			want: tablePlan{}},
		{name: "a static table listed is not added twice", known: []tableView{{name: "s", static: true}}, listed: []string{"s"},
			want: tablePlan{}},
		{name: "listed and read: nothing", known: []tableView{{name: "a", reading: true, unread: true}}, listed: []string{"a"},
			want: tablePlan{}},
		{name: "untagged while reading: leave, readers stop first", known: []tableView{{name: "a", reading: true, unread: true}},
			want: tablePlan{leave: []string{"a"}}},
		{name: "untagged, readers stopped: let go", known: []tableView{{name: "a", leaving: true, unread: true}},
			want: tablePlan{drop: []string{"a"}}},
		{name: "untagged and idle: leave and let go at once", known: []tableView{{name: "a", unread: true}},
			want: tablePlan{leave: []string{"a"}, drop: []string{"a"}}},
		{name: "deleted with records unread: keep reading", known: []tableView{{name: "d", deleted: true, unread: true}},
			want: tablePlan{leave: []string{"d"}}},
		{name: "deleted, read to the end, a reader finishing", known: []tableView{{name: "d", leaving: true, deleted: true, reading: true}},
			want: tablePlan{}},
		{name: "deleted and read to the end: let go", known: []tableView{{name: "d", leaving: true, deleted: true}},
			want: tablePlan{drop: []string{"d"}}},
		{name: "tagged again while leaving", known: []tableView{{name: "a", leaving: true}}, listed: []string{"a"},
			want: tablePlan{back: []string{"a"}}},
		{name: "mixed", known: []tableView{{name: "s", static: true}, {name: "a"}, {name: "b", reading: true}}, listed: []string{"b", "c"},
			want: tablePlan{leave: []string{"a"}, drop: []string{"a"}, add: []string{"c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := planTables(tc.known, tc.listed)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("planTables = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// listSource is a TableSource a test changes while the walker runs.
type listSource struct {
	mu    sync.Mutex
	names []string
}

func (s *listSource) Tables(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.names), nil
}

func (s *listSource) set(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names = names
}

// logged reports whether an INFO line msg was logged with table.
func logged(logs *observer.ObservedLogs, msg, table string) bool {
	for _, e := range logs.FilterMessage(msg).All() {
		if e.ContextMap()["table"] == table {
			return true
		}
	}
	return false
}

// TestTableSource: a walker reading a TableSource's tables picks up a
// table listed later from its stream's start (also under Start Latest),
// lets go of a table no longer listed that still exists, and reads a
// deleted table's stream to its end before letting it go.
func TestTableSource(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2})
	e.createTable(t, "tab-a")
	arnB := e.createTable(t, "tab-b")
	core, logs := observer.New(zapcore.InfoLevel)
	src := &listSource{names: []string{"tab-a"}}
	rec := newRecorder(t)
	startWalker(t, Options{Streams: e.streams, Tables: e.ddb, TableSource: src, TableRefresh: 200 * time.Millisecond,
		Start: Latest, Processor: rec, Positions: rec, Logger: zap.New(core)})
	eventually.True(t, 30*time.Second, "table tab-a added", func() bool { return logged(logs, "table added", "tab-a") })
	e.put(t, "tab-b", "b", 0, 100) // before tab-b is listed: read all the same
	src.set("tab-a", "tab-b")
	eventually.True(t, 60*time.Second, "100 records of tab-b", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.byStream[arnB] >= 100
	})

	// tab-a untagged: let go although its stream never ends.
	src.set("tab-b")
	eventually.True(t, 30*time.Second, "tab-a let go", func() bool { return logged(logs, "table let go", "tab-a") })

	// tab-b deleted with records the walker may not have read yet.
	e.put(t, "tab-b", "c", 0, 100)
	if _, err := e.ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String("tab-b")}); err != nil {
		t.Fatal(err)
	}
	src.set()
	eventually.True(t, 60*time.Second, "tab-b let go", func() bool { return logged(logs, "table let go", "tab-b") })
	if d := rec.duplicates(); d != 0 {
		t.Errorf("%d duplicates", d)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.byStream[arnB] != 200 {
		t.Errorf("read %d records of deleted tab-b before letting it go, want 200", rec.byStream[arnB])
	}
}
