package shard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

func TestParseTag(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"archive=yes", "archive=yes", true},
		{"k=", "k=", true},
		{"k=a=b", "k=a=b", true},
		{"=yes", "", false},
		{"archive", "", false},
		{strings.Repeat("k", 129) + "=v", "", false},
	} {
		got, err := ParseTag(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got.String() != tc.want) {
			t.Errorf("ParseTag(%q) = %v, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// tagTable tags a table of the engine.
func tagTable(t *testing.T, db *dynamodb.Client, name string, kv ...string) {
	t.Helper()
	ctx := context.Background()
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var tags []dtypes.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		tags = append(tags, dtypes.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	if _, err := db.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: d.Table.TableArn, Tags: tags}); err != nil {
		t.Fatal(err)
	}
}

// TestTaggedTables: every tag must match (AND); a table tagged later is
// found at the next call; a matching table without a stream or without the
// old image is refused with one ERROR naming it and the fix, and counted.
func TestTaggedTables(t *testing.T) {
	e := newEnv(t, engine.Options{})
	for _, tb := range []enginetest.Table{
		{Name: "both"}, {Name: "one-tag"}, {Name: "untagged"}, {Name: "later"},
		{Name: "keys", Stream: dtypes.StreamViewTypeKeysOnly}, {Name: "nostream", NoStream: true},
	} {
		enginetest.CreateTable(t, e.ddb, tb)
	}
	tagTable(t, e.ddb, "both", "archive", "yes", "team", "a")
	tagTable(t, e.ddb, "one-tag", "archive", "yes")
	tagTable(t, e.ddb, "keys", "archive", "yes", "team", "a")
	tagTable(t, e.ddb, "nostream", "archive", "yes", "team", "a")
	core, logs := observer.New(zapcore.InfoLevel)
	reg := prometheus.NewRegistry()
	tt, err := NewTaggedTables(TaggedOptions{Client: e.ddb, Tags: []Tag{{"archive", "yes"}, {"team", "a"}},
		NeedOldImage: true, Logger: zap.New(core), Registerer: reg, TagCallsPerSecond: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for round, want := range []string{"[both]", "[both]", "[both later]"} {
		if round == 2 {
			tagTable(t, e.ddb, "later", "team", "a", "archive", "yes")
		}
		got, err := tt.Tables(ctx)
		if err != nil || fmt.Sprint(got) != want {
			t.Fatalf("round %d: Tables = %v, %v; want %s", round, got, err, want)
		}
	}
	errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errs) != 2 {
		t.Fatalf("%d ERROR lines, want 2 (keys, nostream), once each: %v", len(errs), errs)
	}
	for _, l := range errs {
		tbl, _ := l.ContextMap()["table"].(string)
		if !(tbl == "keys" && strings.Contains(l.Message, "--allow-keys-only")) && !(tbl == "nostream" && strings.Contains(l.Message, "enable DynamoDB Streams")) {
			t.Errorf("ERROR %q for table %q: want the table and the fix", l.Message, tbl)
		}
	}
	if g := metricSum(t, reg, "archiver_tables"); g != 4 {
		t.Errorf("archiver_tables sums to %v, want 4 (2 archived, 2 refused)", g)
	}
	if tt.Waiting() != "" {
		t.Errorf("Waiting() = %q with tables archived", tt.Waiting())
	}
}

// TestTaggedTablesNoneMatch: with no table carrying the tags, Tables
// lists none and says so, in a WARN and in Waiting.
func TestTaggedTablesNoneMatch(t *testing.T) {
	e := newEnv(t, engine.Options{})
	enginetest.CreateTable(t, e.ddb, enginetest.Table{Name: "plain"})
	core, logs := observer.New(zapcore.InfoLevel)
	tt, err := NewTaggedTables(TaggedOptions{Client: e.ddb, Tags: []Tag{{"archive", "yes"}}, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tt.Tables(context.Background())
	if err != nil || len(got) != 0 {
		t.Fatalf("Tables = %v, %v; want none", got, err)
	}
	const want = "no table carries tag(s) archive=yes; waiting"
	if tt.Waiting() != want || logs.FilterMessage(want).Len() != 1 {
		t.Errorf("Waiting() = %q, logs %v; want %q", tt.Waiting(), logs.All(), want)
	}
}

// hostileLister answers ListTables as an endpoint that does not follow
// DynamoDB's rules (what the engine cannot be made to do): pages holds the
// names of each page; each page's LastEvaluatedTableName is next[i]. The
// other calls go to the engine.
type hostileLister struct {
	*dynamodb.Client
	pages [][]string
	next  []string
	calls int
}

func (h *hostileLister) ListTables(_ context.Context, in *dynamodb.ListTablesInput, _ ...func(*dynamodb.Options)) (*dynamodb.ListTablesOutput, error) {
	i := 0
	if in.ExclusiveStartTableName != nil {
		i = slices.Index(h.next, *in.ExclusiveStartTableName) + 1
	}
	h.calls++
	out := &dynamodb.ListTablesOutput{TableNames: h.pages[i%len(h.pages)]}
	if n := h.next[i%len(h.next)]; n != "" {
		out.LastEvaluatedTableName = aws.String(n)
	}
	return out, nil
}

// TestTaggedTablesHostileListing: names that are no DynamoDB table names
// are left out with one WARN each, however often listed; a name listed
// twice is one table; paging that never ends fails the listing instead of
// looping.
func TestTaggedTablesHostileListing(t *testing.T) {
	e := newEnv(t, engine.Options{})
	enginetest.CreateTable(t, e.ddb, enginetest.Table{Name: "good"})
	tagTable(t, e.ddb, "good", "archive", "yes")
	bad := []string{"../etc", "a/b", "", "x", strings.Repeat("n", 256), "tab\tle", "ünïcode", "sp ace", "good\x00"}
	h := &hostileLister{Client: e.ddb, pages: [][]string{append([]string{"good"}, bad[:4]...), append([]string{"good"}, bad[4:]...)}, next: []string{"p1", ""}}
	core, logs := observer.New(zapcore.InfoLevel)
	tt, err := NewTaggedTables(TaggedOptions{Client: h, Tags: []Tag{{"archive", "yes"}}, Logger: zap.New(core), TagCallsPerSecond: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		got, err := tt.Tables(context.Background())
		if err != nil || fmt.Sprint(got) != "[good]" {
			t.Fatalf("round %d: Tables = %q, %v; want [good]", round, got, err)
		}
	}
	warned := logs.FilterMessageSnippet("no DynamoDB table name").All()
	if len(warned) != len(bad) {
		t.Errorf("%d WARN lines for %d bad names (want one each, once): %v", len(warned), len(bad), warned)
	}
	loop := &hostileLister{Client: e.ddb, pages: [][]string{{"good"}, {"good"}}, next: []string{"p1", "p2"}}
	tt, err = NewTaggedTables(TaggedOptions{Client: loop, Tags: []Tag{{"archive", "yes"}}, TagCallsPerSecond: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tt.Tables(context.Background()); err == nil || !strings.Contains(err.Error(), "still paging") {
		t.Errorf("endless paging: %v, want the listing to fail", err)
	}
	if loop.calls != maxListPages {
		t.Errorf("%d ListTables calls, want %d", loop.calls, maxListPages)
	}
}
