package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
)

// Every table in these tests has a string hash key "id" and the TTL
// attribute "exp".
const (
	keyAttr = "id"
	ttlAttr = "exp"
	// preciseN is a number with DynamoDB's full 38 digits of precision,
	// already in DynamoDB's canonical form (no trailing zeros: DynamoDB
	// and the engine store 12.50 as 12.5).
	preciseN = "12.500000000000000000000000000000000001"
)

// table is every test table: hash key "id", a stream of both images, TTL
// on "exp".
func table(name string) enginetest.Table {
	return enginetest.Table{Name: name, Hash: keyAttr, TTL: ttlAttr}
}

// putItems writes one item per key with the TTL value exp (epoch seconds)
// and a small payload, 25 at a time, retrying unprocessed items.
func putItems(ctx context.Context, db *dynamodb.Client, table string, keys []string, exp int64) error {
	expS := strconv.FormatInt(exp, 10)
	for i := 0; i < len(keys); i += 25 {
		var reqs []dtypes.WriteRequest
		for _, k := range keys[i:min(i+25, len(keys))] {
			reqs = append(reqs, dtypes.WriteRequest{PutRequest: &dtypes.PutRequest{Item: map[string]dtypes.AttributeValue{
				keyAttr:   &dtypes.AttributeValueMemberS{Value: k},
				ttlAttr:   &dtypes.AttributeValueMemberN{Value: expS},
				"payload": &dtypes.AttributeValueMemberS{Value: "session data for " + k},
				"n":       &dtypes.AttributeValueMemberN{Value: preciseN},
			}}})
		}
		for attempt := 0; len(reqs) > 0; attempt++ {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dtypes.WriteRequest{table: reqs}})
			if err != nil {
				return fmt.Errorf("BatchWriteItem: %w", err)
			}
			reqs = out.UnprocessedItems[table]
			if len(reqs) > 0 {
				if attempt > 100 {
					return fmt.Errorf("BatchWriteItem: %d items still unprocessed", len(reqs))
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return nil
}

// expirer writes items whose TTL has passed (the engine's sweeper deletes
// them) in waves of new keys, and remembers the keys.
type expirer struct {
	t       testing.TB
	ctx     context.Context
	db      *dynamodb.Client
	table   string
	prefix  string
	next    int
	written keyLog
}

// wave writes n items whose TTL has passed: keys PREFIX-NNNNNN following
// the last wave's.
func (x *expirer) wave(n int) []string {
	keys := keyRange(x.prefix, x.next, n)
	x.next += n
	if err := putItems(x.ctx, x.db, x.table, keys, expiredTTL()); err != nil {
		x.t.Fatal(err)
	}
	x.written.add(keys...)
	return keys
}

// expiredTTL is a TTL value an hour in the past: the engine's TTL process
// deletes such items at its next sweep.
func expiredTTL() int64 { return time.Now().Add(-time.Hour).Unix() }

// keyRange returns n keys prefix-000000, prefix-000001, ...
func keyRange(prefix string, from, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%06d", prefix, from+i)
	}
	return keys
}

// itemKey is the "id" of an event's keys ("" if absent).
func itemKey(keys event.Item) string {
	if v, ok := keys[keyAttr].(*stypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// tally counts deliveries at a far end: per item key and per kind.
type tally struct {
	mu      sync.Mutex
	byKey   map[string]int               // key → deliveries
	kinds   map[string]event.Kind        // key → kind of its last delivery
	regions map[string]string            // key → Region of its last delivery
	events  map[string]int               // event ID → deliveries
	at      map[string]eventAt           // event ID → its stream position
	dead    map[string]*event.DeadLetter // key → DeadLetter of its last dead-lettered delivery
	lines   int
	torn    int      // lines that did not decode (see readFileSink)
	bad     []string // events whose item is not the item written (first few)
	nbad    int
}

// eventAt is where a delivered event is in its stream.
type eventAt struct{ shard, seq string }

func newTally() *tally {
	return &tally{byKey: map[string]int{}, kinds: map[string]event.Kind{}, regions: map[string]string{}, events: map[string]int{}, at: map[string]eventAt{}, dead: map[string]*event.DeadLetter{}}
}

func (ta *tally) add(ev *event.Event) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	k := itemKey(ev.Keys)
	ta.byKey[k]++
	ta.kinds[k] = ev.Kind
	ta.regions[k] = ev.Region
	ta.events[ev.EventID]++
	ta.at[ev.EventID] = eventAt{ev.ShardID, ev.SequenceNumber}
	if ev.DeadLetter != nil {
		ta.dead[k] = ev.DeadLetter
	}
	ta.lines++
	if err := checkImage(ev); err != nil {
		ta.nbad++
		if len(ta.bad) < 5 {
			ta.bad = append(ta.bad, err.Error())
		}
	}
}

// checkImage checks that an archived event carries the item exactly as
// putItems wrote it (a number with 38 significant digits keeps every one:
// nothing on the way goes through float64) and, for an expiry, the TTL
// metadata.
func checkImage(ev *event.Event) error {
	k := itemKey(ev.Keys)
	img := ev.Image()
	if v, ok := img["payload"].(*stypes.AttributeValueMemberS); !ok || v.Value != "session data for "+k {
		return fmt.Errorf("%s: payload %#v, want %q", k, img["payload"], "session data for "+k)
	}
	if v, ok := img["n"].(*stypes.AttributeValueMemberN); !ok || v.Value != preciseN {
		return fmt.Errorf("%s: n %#v, want N %s", k, img["n"], preciseN)
	}
	exp, ok := img[ttlAttr].(*stypes.AttributeValueMemberN)
	if !ok {
		return fmt.Errorf("%s: no %s attribute in the image", k, ttlAttr)
	}
	if ev.Kind == event.Expired && (ev.TTLAttribute != ttlAttr || ev.TTLValue != exp.Value || ev.TTLTime.IsZero()) {
		return fmt.Errorf("%s: TTL metadata attribute %q value %q time %v, want %q %q", k, ev.TTLAttribute, ev.TTLValue, ev.TTLTime, ttlAttr, exp.Value)
	}
	return nil
}

// checkItems fails the test if some delivered item was not the item
// written.
func (ta *tally) checkItems(t testing.TB, where string) {
	t.Helper()
	ta.mu.Lock()
	defer ta.mu.Unlock()
	if ta.nbad > 0 {
		t.Errorf("%s: %d archived events do not carry the written item, e.g.:\n%s", where, ta.nbad, strings.Join(ta.bad, "\n"))
	}
}

// missing returns how many of keys were never delivered, and the first few.
func (ta *tally) missing(keys []string) (int, []string) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	n := 0
	var first []string
	for _, k := range keys {
		if ta.byKey[k] == 0 {
			n++
			if len(first) < 5 {
				first = append(first, k)
			}
		}
	}
	return n, first
}

// duplicates is deliveries beyond the first, counted per stream record
// (event ID).
func (ta *tally) duplicates() int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	d := 0
	for _, n := range ta.events {
		d += n - 1
	}
	return d
}

// allArrived returns an error naming the missing keys, or nil.
func (ta *tally) allArrived(keys []string) error {
	if n, first := ta.missing(keys); n > 0 {
		return fmt.Errorf("%d of %d keys missing (e.g. %s)", n, len(keys), strings.Join(first, ", "))
	}
	return nil
}

// readFileSink reads every archive line a file sink wrote under dir
// (DIR/TABLE/YYYY-MM-DD/HH.jsonl), see fileSinkReader.
func readFileSink(t testing.TB, dir string) *tally {
	t.Helper()
	return newFileSinkReader(dir).poll(t)
}

// fileSinkReader reads the archive lines file sinks wrote under a directory
// incrementally: each poll decodes only the complete lines appended since
// the last one (polling a growing archive stays cheap under -race).
//
// A line that does not decode is counted as torn (a process killed
// mid-append). The restarted file sink cuts a torn tail off before it
// appends (keeping it in _archiver/torn/), and the reader reads only up to
// a newline, so a torn line it counts is one a sink left in the archive or
// glued a new line onto: never hidden, always a failure.
type fileSinkReader struct {
	dir     string
	offsets map[string]int64 // file → bytes decoded (up to a newline)
	tally   *tally
}

func newFileSinkReader(dir string) *fileSinkReader {
	return &fileSinkReader{dir: dir, offsets: map[string]int64{}, tally: newTally()}
}

// poll decodes what was appended since the last poll and returns the
// running tally. A file that shrank (a sink cut a failed append back off)
// makes it start over from scratch.
func (r *fileSinkReader) poll(t testing.TB) *tally {
	t.Helper()
	var files []string
	err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("reading file sink %s: %v", r.dir, err)
	}
	sort.Strings(files)
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		off := r.offsets[p]
		if int64(len(data)) < off {
			t.Logf("%s shrank from %d to %d bytes: reading everything again", p, off, len(data))
			*r = *newFileSinkReader(r.dir)
			return r.poll(t)
		}
		end := bytes.LastIndexByte(data, '\n') + 1
		if int64(end) <= off {
			continue
		}
		decodeLines(t, data[off:end], r.tally)
		r.offsets[p] = int64(end)
	}
	return r.tally
}

// decodeLines adds every archive line of data to ta (see readFileSink for
// torn lines).
func decodeLines(t testing.TB, data []byte, ta *tally) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		ev, err := event.DecodeLine(line)
		if err == nil {
			ta.add(&ev)
			continue
		}
		ta.mu.Lock()
		ta.torn++
		ta.mu.Unlock()
		t.Logf("archive line does not decode (%v): %.200s", err, line)
		if i := bytes.LastIndex(line, []byte(`{"Item":`)); i > 0 {
			if ev, err := event.DecodeLine(line[i:]); err == nil {
				ta.add(&ev)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scanning archive lines: %v", err)
	}
}
