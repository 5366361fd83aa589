package restore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/natstest"
	"github.com/ttl-archiver/archiver/internal/s3test"
	"github.com/ttl-archiver/archiver/restore"
	"github.com/ttl-archiver/archiver/restore/restoretest"
	"github.com/ttl-archiver/archiver/sinks"
)

// fixture is an engine whose table Sessions had n items of every type
// expire, archived under dir, with the originals as DynamoDB returned
// them before they expired.
type fixture struct {
	*restoretest.Bed
	dir       string
	originals map[string]map[string]ddb.AttributeValue // by pk/sk
	puts      *putCounter
}

// putCounter counts PutItem requests per table and can throttle them.
type putCounter struct {
	mu       sync.Mutex
	n        int
	throttle int // the next this many PutItems are throttled
}

func (p *putCounter) hook(op string, _ *http.Request) error {
	if op != "PutItem" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.throttle > 0 {
		p.throttle--
		return engine.Throttle()
	}
	return nil
}

func (p *putCounter) count() int { p.mu.Lock(); defer p.mu.Unlock(); return p.n }

func newFixture(t *testing.T, n int, view st.StreamViewType) *fixture {
	t.Helper()
	pc := &putCounter{}
	b := restoretest.Start(t, engine.Options{Hooks: engine.Hooks{OnRequest: pc.hook}})
	b.CreateTable("Sessions", "expires", view)
	f := &fixture{Bed: b, dir: t.TempDir(), originals: map[string]map[string]ddb.AttributeValue{}, puts: pc}
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
	if got := b.Archive("Sessions", "expires", f.dir); got != 2*n {
		t.Fatalf("archived %d events, want %d (INSERT and REMOVE of each)", got, 2*n)
	}
	b.CreateTable("Restored", "expires", st.StreamViewTypeNewAndOldImages)
	return f
}

func keyOf(it map[string]ddb.AttributeValue) string {
	return it["pk"].(*ddb.AttributeValueMemberS).Value + "/" + it["sk"].(*ddb.AttributeValueMemberN).Value
}

// run restores the archive's expired items of Sessions with cfg.
func (f *fixture) run(t *testing.T, cfg restore.Config) restore.Result {
	t.Helper()
	res, err := f.tryRun(cfg)
	if err != nil {
		t.Fatalf("restore: %v (result %+v)", err, res)
	}
	return res
}

func (f *fixture) tryRun(cfg restore.Config) (restore.Result, error) {
	a, err := archive.Open(f.Ctx, "file://"+f.dir, archive.Options{})
	if err != nil {
		return restore.Result{}, err
	}
	cfg.DB = f.DB
	if cfg.Table == "" {
		cfg.Table = "Restored"
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return restoretest.T0.Add(time.Hour) }
	}
	sel := archive.Selection{Tables: []string{"Sessions"}, Kinds: []event.Kind{event.Expired}}
	return restore.Run(f.Ctx, cfg, restore.ArchiveSource(a, sel, nil))
}

// sortSets orders set members so items compare as DynamoDB compares them.
func sortSets(v ddb.AttributeValue) ddb.AttributeValue {
	switch x := v.(type) {
	case *ddb.AttributeValueMemberSS:
		s := slices.Clone(x.Value)
		slices.Sort(s)
		return &ddb.AttributeValueMemberSS{Value: s}
	case *ddb.AttributeValueMemberNS:
		s := slices.Clone(x.Value)
		slices.Sort(s)
		return &ddb.AttributeValueMemberNS{Value: s}
	case *ddb.AttributeValueMemberBS:
		s := slices.Clone(x.Value)
		slices.SortFunc(s, bytes.Compare)
		return &ddb.AttributeValueMemberBS{Value: s}
	case *ddb.AttributeValueMemberL:
		l := make([]ddb.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = sortSets(e)
		}
		return &ddb.AttributeValueMemberL{Value: l}
	case *ddb.AttributeValueMemberM:
		return &ddb.AttributeValueMemberM{Value: sortItem(x.Value)}
	}
	return v
}

func sortItem(it map[string]ddb.AttributeValue) map[string]ddb.AttributeValue {
	out := make(map[string]ddb.AttributeValue, len(it))
	for k, v := range it {
		out[k] = sortSets(v)
	}
	return out
}

// TestRestoreRoundTripEveryTypeInEachTTLMode is the round trip: items of
// every DynamoDB type expire in the engine, are archived through the file
// sink, and are restored into a new table identical to the originals
// except the TTL attribute, as the mode says.
func TestRestoreRoundTripEveryTypeInEachTTLMode(t *testing.T) {
	const n = 30
	f := newFixture(t, n, st.StreamViewTypeNewAndOldImages)
	now := restoretest.T0.Add(time.Hour)
	cases := []struct {
		name string
		mode restore.TTLMode
		ttl  func(orig ddb.AttributeValue) (ddb.AttributeValue, bool)
	}{
		{"extend", restore.TTLExtend, func(ddb.AttributeValue) (ddb.AttributeValue, bool) {
			return &ddb.AttributeValueMemberN{Value: fmt.Sprint(now.Add(48 * time.Hour).Unix())}, true
		}},
		{"keep", restore.TTLKeep, func(o ddb.AttributeValue) (ddb.AttributeValue, bool) { return o, true }},
		{"remove", restore.TTLRemove, func(ddb.AttributeValue) (ddb.AttributeValue, bool) { return nil, false }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := "Restored_" + c.name
			f.CreateTable(table, "expires", "")
			res := f.run(t, restore.Config{Table: table, TTL: c.mode, TTLExtend: 48 * time.Hour})
			if res.Written != n || res.Exists != 0 || res.Failed != 0 || res.NoImage != 0 {
				t.Fatalf("result %+v, want %d written", res, n)
			}
			got := f.Scan(table)
			if len(got) != n {
				t.Fatalf("%d items restored, want %d", len(got), n)
			}
			for _, it := range got {
				orig := f.originals[keyOf(it)]
				want := map[string]ddb.AttributeValue{}
				for k, v := range orig {
					want[k] = v
				}
				if v, ok := c.ttl(orig["expires"]); ok {
					want["expires"] = v
				} else {
					delete(want, "expires")
				}
				if !reflect.DeepEqual(sortItem(it), sortItem(want)) {
					t.Errorf("%s restored as\n%#v\nwant\n%#v", keyOf(it), it, want)
				}
			}
		})
	}
}

func TestRestoreNeverClobbersUnlessOverwrite(t *testing.T) {
	f := newFixture(t, 10, st.StreamViewTypeNewAndOldImages)
	for _, i := range []int{1, 2, 3} {
		it := restoretest.Item(i, 0)
		it["s"] = &ddb.AttributeValueMemberS{Value: "newer"}
		if _, err := f.DB.PutItem(f.Ctx, &dynamodb.PutItemInput{TableName: aws.String("Restored"), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	res := f.run(t, restore.Config{})
	if res.Written != 7 || res.Exists != 3 {
		t.Fatalf("result %+v: want 7 written, 3 skipped as existing", res)
	}
	for _, it := range f.Scan("Restored") {
		sk := it["sk"].(*ddb.AttributeValueMemberN).Value
		s := it["s"].(*ddb.AttributeValueMemberS).Value
		if (sk == "1" || sk == "2" || sk == "3") != (s == "newer") {
			t.Errorf("item %s has s=%q", sk, s)
		}
	}
	res = f.run(t, restore.Config{Overwrite: true})
	if res.Written != 10 || res.Exists != 0 {
		t.Fatalf("overwrite: result %+v, want 10 written", res)
	}
	for _, it := range f.Scan("Restored") {
		if s := it["s"].(*ddb.AttributeValueMemberS).Value; s == "newer" {
			t.Errorf("item %s was not overwritten", keyOf(it))
		}
	}
}

func TestRestoreDryRunWritesNothing(t *testing.T) {
	f := newFixture(t, 5, st.StreamViewTypeNewAndOldImages)
	before := f.puts.count()
	var out bytes.Buffer
	res := f.run(t, restore.Config{DryRun: &out, Parallel: 3})
	if f.puts.count() != before || len(f.Scan("Restored")) != 0 {
		t.Fatal("a dry run wrote")
	}
	if res.WouldWrite != 5 || res.Written != 0 {
		t.Errorf("result %+v", res)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("dry run printed %q", out.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, `{"pk":{"S":"user#`) || !strings.HasSuffix(l, "} put if absent") {
			t.Errorf("dry-run line %q", l)
		}
	}
}

func TestRestoreKeysOnlyArchiveSkipsAndCounts(t *testing.T) {
	f := newFixture(t, 4, st.StreamViewTypeKeysOnly)
	res := f.run(t, restore.Config{})
	if res.NoImage != 4 || res.Written != 0 {
		t.Errorf("result %+v: want 4 without image", res)
	}
}

func TestRestoreRateCapsWrites(t *testing.T) {
	f := newFixture(t, 12, st.StreamViewTypeNewAndOldImages)
	start := time.Now()
	res := f.run(t, restore.Config{Rate: 20})
	el := time.Since(start)
	if res.Written != 12 {
		t.Fatalf("result %+v", res)
	}
	// 12 writes at 20/s with a burst of 2: at least 10 intervals of 50ms.
	if el < 450*time.Millisecond {
		t.Errorf("12 writes at --rate 20 took %s", el)
	}
}

func TestRestoreBacksOffThrottling(t *testing.T) {
	f := newFixture(t, 6, st.StreamViewTypeNewAndOldImages)
	f.puts.mu.Lock()
	f.puts.throttle = 25 // more than the SDK's own retries absorb
	f.puts.mu.Unlock()
	res := f.run(t, restore.Config{Backoff: backoff.Policy{Min: time.Millisecond, Max: 5 * time.Millisecond}})
	if res.Written != 6 || res.Throttled == 0 {
		t.Errorf("result %+v: want 6 written after throttling", res)
	}
	if n := len(f.Scan("Restored")); n != 6 {
		t.Errorf("%d items restored", n)
	}
}

func TestRestoreSelectsByKeyAndWhere(t *testing.T) {
	f := newFixture(t, 21, st.StreamViewTypeNewAndOldImages)
	k, err := restore.ParseKey("pk=user#3")
	if err != nil {
		t.Fatal(err)
	}
	w, err := restore.ParseWhere("sk >= 10 AND contains(ss, 'b') AND m.nested.ns = m.nested.ns")
	if err != nil {
		t.Fatal(err)
	}
	res := f.run(t, restore.Config{Select: &restore.Selection{Keys: []restore.KeyMatch{k}, Where: w}})
	// user#3 holds sk 3, 10, 17; the where keeps 10 and 17.
	got := f.Scan("Restored")
	var sks []string
	for _, it := range got {
		sks = append(sks, keyOf(it))
	}
	slices.Sort(sks)
	if !slices.Equal(sks, []string{"user#3/10", "user#3/17"}) || res.NotSelected != 19 || res.Written != 2 {
		t.Errorf("restored %v, result %+v", sks, res)
	}
}

var errStop = errors.New("stop")

func TestRestoreResumeSkipsRecordedEvents(t *testing.T) {
	f := newFixture(t, 10, st.StreamViewTypeNewAndOldImages)
	file := t.TempDir() + "/resume"
	var seen atomic.Int64
	a, err := archive.Open(f.Ctx, "file://"+f.dir, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := restore.ArchiveSource(a, archive.Selection{Tables: []string{"Sessions"}, Kinds: []event.Kind{event.Expired}}, nil)
	stopAfter4 := func(ctx context.Context, fn func(*event.Event) error) error {
		return src(ctx, func(e *event.Event) error {
			if seen.Add(1) > 4 {
				return errStop
			}
			return fn(e)
		})
	}
	if _, err := restore.Run(f.Ctx, restore.Config{DB: f.DB, Table: "Restored", ResumeFile: file, Overwrite: true}, stopAfter4); err != errStop {
		t.Fatalf("first run: %v", err)
	}
	first := len(f.Scan("Restored"))
	if first != 4 {
		t.Fatalf("first run wrote %d items", first)
	}
	before := f.puts.count()
	res := f.run(t, restore.Config{ResumeFile: file, Overwrite: true})
	if res.Resumed != int64(first) || res.Written != int64(10-first) || f.puts.count()-before != 10-first {
		t.Errorf("resumed run: %+v, %d PutItems; first run wrote %d", res, f.puts.count()-before, first)
	}
	if _, err := f.tryRun(restore.Config{Table: "Restored", ResumeFile: file}); err != nil {
		t.Fatal(err)
	}
	f.CreateTable("Other", "expires", "")
	if _, err := f.tryRun(restore.Config{Table: "Other", ResumeFile: file}); err == nil || !strings.Contains(err.Error(), `"Restored"`) {
		t.Errorf("a resume file of another table: %v", err)
	}
}

// TestReplayIntoJetStreamTwiceIsDeduplicated replays the archive's
// expiries into a JetStream stream twice: the second replay finds every
// message ID in the stream and sends nothing; the stream keeps one copy
// of each.
func TestReplayIntoJetStreamTwiceIsDeduplicated(t *testing.T) {
	f := newFixture(t, 15, st.StreamViewTypeNewAndOldImages)
	addr := natstest.Start(t).Addr()
	for round := 1; round <= 2; round++ {
		sk, kinds, err := sinks.Open(f.Ctx, "nats://"+addr+"?subject=archive.{table}.{kind}&create-stream=REPLAY", sinks.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := archive.Open(f.Ctx, "file://"+f.dir, archive.Options{})
		if err != nil {
			t.Fatal(err)
		}
		src := restore.ArchiveSource(a, archive.Selection{Tables: []string{"Sessions"}}, nil)
		res, err := restore.Replay(f.Ctx, restore.ReplayConfig{Sink: sk, Kinds: kinds, BatchSize: 4}, src)
		if cerr := sk.Close(f.Ctx); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		sent, held := int64(15), int64(0)
		if round == 2 {
			sent, held = 0, 15
		}
		if res.Events != 30 || res.NotWanted != 15 || res.Sent != sent || res.Acked != sent || res.InStream != held || res.Failed != 0 {
			t.Errorf("round %d: %+v", round, res)
		}
		if n := natstest.StreamMessages(t, addr, "REPLAY"); n != 15 {
			t.Errorf("round %d: the stream holds %d messages, want 15", round, n)
		}
	}
}

// TestRestoreOutcomeDoesNotDependOnWriters archives one key that lived
// and expired twice: with conditional writes the first life is restored,
// with --overwrite the last, whatever the number of writers.
func TestRestoreOutcomeDoesNotDependOnWriters(t *testing.T) {
	b := restoretest.Start(t, engine.Options{})
	b.CreateTable("Sessions", "expires", st.StreamViewTypeNewAndOldImages)
	b.PutExpiring("Sessions", 40)
	b.ExpireAll()
	second := restoretest.Item(5, restoretest.T0.Add(3*time.Minute).Unix())
	second["s"] = &ddb.AttributeValueMemberS{Value: "second life"}
	if _, err := b.DB.PutItem(b.Ctx, &dynamodb.PutItemInput{TableName: aws.String("Sessions"), Item: second}); err != nil {
		t.Fatal(err)
	}
	b.Clock.Set(restoretest.T0.Add(4 * time.Minute))
	if n, err := b.Srv.Engine().SweepTTL(b.Ctx); err != nil || n != 1 {
		t.Fatalf("second sweep: %d, %v", n, err)
	}
	dir := t.TempDir()
	b.Archive("Sessions", "expires", dir)
	f := &fixture{Bed: b, dir: dir}
	for _, c := range []struct {
		overwrite bool
		parallel  int
		want      string
	}{{false, 1, "first"}, {false, 8, "first"}, {true, 1, "second life"}, {true, 8, "second life"}} {
		table := fmt.Sprintf("R_%v_%d", c.overwrite, c.parallel)
		b.CreateTable(table, "expires", "")
		res := f.run(t, restore.Config{Table: table, Overwrite: c.overwrite, Parallel: c.parallel})
		out, err := b.DB.GetItem(b.Ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]ddb.AttributeValue{"pk": second["pk"], "sk": second["sk"]}})
		if err != nil {
			t.Fatal(err)
		}
		got := out.Item["s"].(*ddb.AttributeValueMemberS).Value
		if (c.want == "first") == (got == "second life") {
			t.Errorf("overwrite=%v parallel=%d: restored %q (%+v)", c.overwrite, c.parallel, got, res)
		}
	}
}

// TestRestoreFromS3ArchiveOnVersity archives through the real S3 sink
// into versitygw and restores from the s3:// archive, every type intact.
func TestRestoreFromS3ArchiveOnVersity(t *testing.T) {
	s3 := s3test.Start(t)
	b := restoretest.Start(t, engine.Options{})
	b.CreateTable("Sessions", "expires", st.StreamViewTypeNewAndOldImages)
	orig := b.PutExpiring("Sessions", 12)
	b.ExpireAll()
	url := "s3://" + s3test.Bucket + "/arch?endpoint=" + s3.Endpoint + "&region=us-east-1&path-style=true&events=all"
	sk, _, err := sinks.Open(b.Ctx, url, sinks.Options{AWSConfig: s3test.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	b.ArchiveTo(sk, "Sessions", "expires")
	b.CreateTable("Restored", "expires", "")
	a, err := archive.Open(b.Ctx, url, archive.Options{AWSConfig: s3test.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	res, err := restore.Run(b.Ctx, restore.Config{DB: b.DB, Table: "Restored", TTL: restore.TTLKeep},
		restore.ArchiveSource(a, archive.Selection{Tables: []string{"Sessions"}, Kinds: []event.Kind{event.Expired}}, nil))
	if err != nil || res.Written != 12 {
		t.Fatalf("restore: %+v, %v", res, err)
	}
	got := map[string]map[string]ddb.AttributeValue{}
	for _, it := range b.Scan("Restored") {
		got[keyOf(it)] = it
	}
	for _, it := range orig {
		if g := got[keyOf(it)]; !reflect.DeepEqual(sortItem(g), sortItem(normalized(it))) {
			t.Errorf("%s restored as %#v", keyOf(it), g)
		}
	}
}

// normalized is an item as DynamoDB returns it: numbers without
// exponent (the one item attribute written as 1e3).
func normalized(it map[string]ddb.AttributeValue) map[string]ddb.AttributeValue {
	out := map[string]ddb.AttributeValue{}
	for k, v := range it {
		out[k] = v
	}
	l := out["l"].(*ddb.AttributeValueMemberL)
	out["l"] = &ddb.AttributeValueMemberL{Value: []ddb.AttributeValue{l.Value[0], &ddb.AttributeValueMemberN{Value: "1000"}, l.Value[2]}}
	return out
}

// TestRestoreGivesNoTTLToAnItemThatHadNone restores a deleted item that
// never had a TTL: the default extension does not add one.
func TestRestoreGivesNoTTLToAnItemThatHadNone(t *testing.T) {
	b := restoretest.Start(t, engine.Options{})
	b.CreateTable("Sessions", "expires", st.StreamViewTypeNewAndOldImages)
	it := restoretest.Item(1, 0)
	delete(it, "expires")
	key := map[string]ddb.AttributeValue{"pk": it["pk"], "sk": it["sk"]}
	if _, err := b.DB.PutItem(b.Ctx, &dynamodb.PutItemInput{TableName: aws.String("Sessions"), Item: it}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB.DeleteItem(b.Ctx, &dynamodb.DeleteItemInput{TableName: aws.String("Sessions"), Key: key}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b.Archive("Sessions", "expires", dir)
	b.CreateTable("Restored", "expires", "")
	a, err := archive.Open(b.Ctx, "file://"+dir, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := restore.Run(b.Ctx, restore.Config{DB: b.DB, Table: "Restored"},
		restore.ArchiveSource(a, archive.Selection{Kinds: []event.Kind{event.Deleted}}, nil))
	if err != nil || res.Written != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	out, err := b.DB.GetItem(b.Ctx, &dynamodb.GetItemInput{TableName: aws.String("Restored"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Item["expires"]; ok || len(out.Item) != len(it) {
		t.Errorf("restored %v", out.Item)
	}
}
