package archive_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/klauspost/compress/gzip"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/s3test"
)

// TestS3Compressions reads archives the S3 sink wrote with each
// compression, across two hour partitions, and finds every event once, in
// order, with its line number.
func TestS3Compressions(t *testing.T) {
	srv := s3test.Start(t)
	for _, tc := range []struct{ compression, ext string }{
		{"gzip", ".jsonl.gz"}, {"zstd", ".jsonl.zst"}, {"none", ".jsonl"},
	} {
		t.Run(tc.compression, func(t *testing.T) {
			url := s3URL(srv, "c-"+tc.compression, "compression="+tc.compression)
			evs := events("Sessions", "shardId-0001-aa", event.Expired, 3500, 200, 0)
			write(t, url, evs[:120], evs[120:])
			a := open(t, url, archive.Options{})
			objs, err := a.Objects(testCtx(t), archive.Selection{})
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 3 { // hr=05 of batch 1; hr=06 of batches 1 and 2
				t.Fatalf("objects = %d, want 3: %+v", len(objs), objs)
			}
			for _, o := range objs {
				if !strings.HasSuffix(o.Key, tc.ext) || o.Table != "Sessions" || o.Kind != event.Expired || o.Shard != "shardId-0001-aa" {
					t.Errorf("object %+v", o)
				}
			}
			got, st := readAll(t, a, archive.Selection{})
			if want := eventIDs(evs); !slices.Equal(ids(got), want) {
				t.Fatalf("ids = %v\nwant %v", ids(got), want)
			}
			if st.Objects != 3 || st.Lines != 200 || st.Events != 200 || st.Duplicates != 0 || st.Undecodable != 0 {
				t.Errorf("stats = %+v", st)
			}
			if got[0].Line != 1 || got[1].Line != 2 {
				t.Errorf("line numbers %d, %d", got[0].Line, got[1].Line)
			}
			if p := a.Progress(); p.ObjectsDone != 3 || p.ObjectsTotal != 3 || p.Events != 200 || p.BytesDone != p.BytesTotal || p.BytesTotal == 0 {
				t.Errorf("progress = %+v", p)
			}
		})
	}
}

func eventIDs(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i := range evs {
		out[i] = evs[i].EventID
	}
	return out
}

// TestObjectsPruning: tables, kinds and the time range select partitions
// without reading objects, and events at the edges of a selected hour are
// filtered by their own time.
func TestObjectsPruning(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "p", "events=all")
	write(t, url,
		events("A", "s1", event.Expired, 3590, 20, 0),  // 05:59:50 to 06:00:09
		events("A", "s1", event.Modified, 3610, 5, 0),  // 06:00:10
		events("B", "s2", event.Expired, 7200, 10, 0),  // 07:00:00
		events("A", "s1", event.Deleted, 10800, 10, 0), // 08:00:00
	)
	a := open(t, url, archive.Options{})
	h := func(hh, mm, ss int) time.Time { return time.Date(2026, 3, 4, hh, mm, ss, 0, time.UTC) }
	for _, tc := range []struct {
		name    string
		sel     archive.Selection
		objects int
		events  int
	}{
		{"all", archive.Selection{}, 5, 45},
		{"table", archive.Selection{Tables: []string{"A"}}, 4, 35},
		{"table and kind", archive.Selection{Tables: []string{"A"}, Kinds: []event.Kind{event.Expired}}, 2, 20},
		{"kind only", archive.Selection{Kinds: []event.Kind{event.Expired}}, 3, 30},
		{"since", archive.Selection{Since: h(6, 0, 5)}, 4, 5 + 5 + 10 + 10},
		{"until", archive.Selection{Until: h(6, 0, 0)}, 1, 10},
		{"since and until, by day", archive.Selection{Tables: []string{"A"}, Kinds: []event.Kind{event.Expired, event.Modified}, Since: h(6, 0, 0), Until: h(6, 0, 12)}, 2, 12},
		{"since and until, by day, every kind", archive.Selection{Tables: []string{"A"}, Since: h(6, 0, 0), Until: h(9, 0, 0)}, 3, 10 + 5 + 10},
		{"unknown table", archive.Selection{Tables: []string{"Nope"}}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := a.Objects(testCtx(t), tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != tc.objects {
				t.Errorf("objects = %d, want %d", len(objs), tc.objects)
			}
			got, _ := readAll(t, a, tc.sel)
			if len(got) != tc.events {
				t.Errorf("events = %d, want %d", len(got), tc.events)
			}
			for _, l := range got {
				e := l.Event
				if (len(tc.sel.Tables) > 0 && !slices.Contains(tc.sel.Tables, e.Table)) ||
					(len(tc.sel.Kinds) > 0 && !slices.Contains(tc.sel.Kinds, e.Kind)) ||
					(!tc.sel.Since.IsZero() && e.ApproximateCreationTime.Before(tc.sel.Since)) ||
					(!tc.sel.Until.IsZero() && !e.ApproximateCreationTime.Before(tc.sel.Until)) {
					t.Errorf("event outside the selection: %s %s %s %s", e.EventID, e.Table, e.Kind, e.ApproximateCreationTime)
				}
			}
		})
	}
}

// TestDuplicatesAcrossOverlappingObjects: a crash re-archives a tail cut
// at other boundaries; every event comes once, in sequence order.
func TestDuplicatesAcrossOverlappingObjects(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "d", "")
	evs := events("Sessions", "s1", event.Expired, 0, 150, 7)
	write(t, url, evs[:100], evs[50:], evs[120:130])
	a := open(t, url, archive.Options{})
	got, st := readAll(t, a, archive.Selection{})
	if !slices.Equal(ids(got), eventIDs(evs)) {
		t.Fatalf("ids = %v", ids(got))
	}
	if st.Objects != 3 || st.Lines != 210 || st.Events != 150 || st.Duplicates != 60 {
		t.Errorf("stats = %+v", st)
	}
}

// TestConflictKeyObject: a batch whose key holds other events is written
// under SHARD-FIRST-LAST.HASH12.jsonl.gz; the reader reads both objects as
// one group and de-duplicates what they share.
func TestConflictKeyObject(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "k", "")
	evs := events("Sessions", "s1", event.Expired, 0, 10, 0)
	other := slices.Clone(evs)
	other[5].EventID = "replaced" // another record, of another item's expiry
	other[5].OldImage = event.Item{"pk": &types.AttributeValueMemberS{Value: "replaced"}}
	write(t, url, evs)
	write(t, url, other)
	a := open(t, url, archive.Options{})
	objs, err := a.Objects(testCtx(t), archive.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(objs, func(x, y archive.Object) int { return len(x.Suffix) - len(y.Suffix) })
	if len(objs) != 2 || objs[0].Suffix != "" || len(objs[1].Suffix) != 12 || objs[0].FirstSeq != objs[1].FirstSeq {
		t.Fatalf("objects = %+v", objs)
	}
	got, st := readAll(t, a, archive.Selection{})
	if st.Events != 11 || st.Duplicates != 9 || len(got) != 11 {
		t.Errorf("stats = %+v", st)
	}
	for i := 1; i < len(got); i++ {
		if event.CompareSequence(got[i-1].Event.SequenceNumber, got[i].Event.SequenceNumber) > 0 {
			t.Errorf("out of sequence order at %d: %v", i, ids(got))
		}
	}
}

// TestPerItemOrderAcrossKinds: one shard's kinds are separate objects
// with overlapping ranges; each item's events still come in stream order.
func TestPerItemOrderAcrossKinds(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "o", "events=all")
	var evs []event.Event
	kinds := []event.Kind{event.Inserted, event.Modified, event.Expired}
	for i := range 30 {
		evs = append(evs, events("T", "s1", kinds[i/3%3], i, 1, 3)...)
	}
	write(t, url, evs)
	a := open(t, url, archive.Options{})
	got, _ := readAll(t, a, archive.Selection{})
	if !slices.Equal(ids(got), eventIDs(evs)) {
		t.Fatalf("order = %v\nwant    %v", ids(got), eventIDs(evs))
	}
}

// TestUndecodableLines are counted and reported with their object and
// line, and the rest of the object is read.
func TestUndecodableLines(t *testing.T) {
	srv := s3test.Start(t)
	evs := events("T", "s1", event.Expired, 0, 3, 0)
	var body []byte
	body = event.AppendLine(body, &evs[0])
	body = append(body, "{not json\n\n"...)
	body = append(body, `{"Item":{},"Metadata":{"kind":"vanished"}}`+"\n"...)
	body = event.AppendLine(body, &evs[1])
	body = append(body, event.MarshalLine(&evs[2])...) // no final newline
	key := "u/table=T/kind=expired/dt=2026-03-04/hr=05/s1-100000000000000000000-100000000000000000002.jsonl"
	put(t, srv, key, body)
	put(t, srv, "u/table=T/kind=expired/dt=2026-03-04/hr=05/s1-100000000000000000003-100000000000000000003.jsonl.gz", []byte("not gzip"))
	var bad []string
	a := open(t, s3URL(srv, "u", ""), archive.Options{OnBadLine: func(obj string, line int, err error) {
		bad = append(bad, fmt.Sprintf("%s:%d", obj[strings.LastIndexByte(obj, '/')+1:], line))
	}})
	got, st := readAll(t, a, archive.Selection{})
	if !slices.Equal(ids(got), eventIDs(evs)) || got[2].Line != 6 {
		t.Errorf("events %v (last at line %d)", ids(got), got[len(got)-1].Line)
	}
	want := []string{"s1-100000000000000000000-100000000000000000002.jsonl:2", "s1-100000000000000000000-100000000000000000002.jsonl:4",
		"s1-100000000000000000003-100000000000000000003.jsonl.gz:1"}
	if !slices.Equal(bad, want) {
		t.Errorf("bad lines %v, want %v", bad, want)
	}
	if st.Undecodable != 3 || st.Lines != 5 || st.Events != 3 {
		t.Errorf("stats = %+v", st)
	}
}

// TestArchiverFolderAndStrayKeys: PREFIX/_archiver/ is skipped silently,
// a key off the layout is skipped and reported.
func TestArchiverFolderAndStrayKeys(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "f", "")
	write(t, url, events("T", "s1", event.Expired, 0, 5, 0))
	put(t, srv, "f/_archiver/preflight", []byte("x"))
	put(t, srv, "f/README.txt", []byte("hello"))
	put(t, srv, "f/table=T/kind=expired/dt=2026-03-04/hr=25/s1-1-2.jsonl", []byte("x"))
	var stray []string
	a := open(t, url, archive.Options{OnBadKey: func(key string, err error) { stray = append(stray, key) }})
	got, st := readAll(t, a, archive.Selection{})
	if len(got) != 5 || st.Objects != 1 || st.Undecodable != 0 {
		t.Errorf("events %d, stats %+v", len(got), st)
	}
	slices.Sort(stray)
	if want := []string{"f/README.txt", "f/table=T/kind=expired/dt=2026-03-04/hr=25/s1-1-2.jsonl"}; !slices.Equal(stray, want) {
		t.Errorf("stray keys %v, want %v", stray, want)
	}
}

// TestSmallBufferManyObjects: with a buffer smaller than any object,
// objects are read one at a time and everything is still read.
func TestSmallBufferManyObjects(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "m", "compression=zstd")
	var batches [][]event.Event
	var all []event.Event
	for i := range 40 {
		evs := events("T", fmt.Sprintf("shard-%02d", i), event.Expired, i*10, 10, 0)
		batches = append(batches, evs)
		all = append(all, evs...)
	}
	write(t, url, batches...)
	a := open(t, url, archive.Options{MaxBufferBytes: 1, Parallel: 3})
	got, st := readAll(t, a, archive.Selection{})
	if st.Objects != 40 || st.Events != 400 || len(got) != 400 {
		t.Fatalf("stats = %+v", st)
	}
	gotIDs, want := ids(got), eventIDs(all)
	slices.Sort(gotIDs)
	slices.Sort(want)
	if !slices.Equal(gotIDs, want) {
		t.Errorf("ids differ")
	}
}

// TestFileArchive reads what the file sink wrote: every kind in one file
// per table and hour; kinds are filtered by line, order is the file's.
func TestFileArchive(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir + "?events=all"
	var evs []event.Event
	kinds := []event.Kind{event.Inserted, event.Modified, event.Expired}
	for i := range 30 {
		evs = append(evs, events("T", "s1", kinds[i%3], 3590+i, 1, 4)...)
	}
	write(t, url, evs, events("U", "s2", event.Expired, 0, 5, 0), evs[20:]) // the last batch re-delivered
	a := open(t, "file://"+dir, archive.Options{})
	objs, err := a.Objects(testCtx(t), archive.Selection{Tables: []string{"T"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Key != "T/2026-03-04/05.jsonl" || objs[0].Kind != "" || !objs[1].Hour.Equal(t0.Add(time.Hour)) {
		t.Fatalf("objects = %+v", objs)
	}
	got, st := readAll(t, a, archive.Selection{Tables: []string{"T"}})
	if !slices.Equal(ids(got), eventIDs(evs)) || st.Duplicates != 10 {
		t.Errorf("ids %v, stats %+v", ids(got), st)
	}
	got, st = readAll(t, a, archive.Selection{Kinds: []event.Kind{event.Expired}})
	if len(got) != 15 || st.Skipped != 20 {
		t.Errorf("expired: %d events, stats %+v", len(got), st)
	}
}

// TestEventsStopsOnCallbackError: fn's error ends the read and is
// returned.
func TestEventsStopsOnCallbackError(t *testing.T) {
	dir := t.TempDir()
	write(t, "file://"+dir, events("T", "s1", event.Expired, 0, 7300, 0))
	a := open(t, "file://"+dir, archive.Options{Parallel: 2})
	stop := fmt.Errorf("enough")
	n := 0
	_, err := a.Events(testCtx(t), archive.Selection{}, func(archive.Line) error {
		n++
		if n == 10 {
			return stop
		}
		return nil
	})
	if err != stop || n != 10 {
		t.Fatalf("err %v after %d events", err, n)
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"nats://localhost:4222", "want s3://BUCKET/PREFIX or file://DIR"},
		{"s3://", "bucket"},
		{"s3://b_ad/x", "not a valid bucket name"},
		{"s3://bucket/x?nope=1", "nope: unknown parameter"},
		{"s3://bucket/x?pathstyle=true", "pathstyle: unknown parameter for s3://; did you mean path-style?"},
		{"file://", "missing path"},
		{"nats://user:pa/ss9z@localhost:4222", "want s3://BUCKET/PREFIX or file://DIR"},
	} {
		_, err := archive.Open(testCtx(t), tc.url, archive.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an error with %q", tc.url, err, tc.want)
		} else if strings.Contains(err.Error(), "ss9z") {
			t.Errorf("Open(%q) = %v shows the password", tc.url, err)
		}
	}
}

// TestSkipImages: events come without images, the same ones, and lines
// that do not decode are still found.
func TestSkipImages(t *testing.T) {
	dir := t.TempDir()
	evs := events("T", "s1", event.Expired, 0, 50, 0)
	write(t, "file://"+dir, evs)
	f, err := os.OpenFile(filepath.Join(dir, "T", "2026-03-04", "05.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Valid JSON, but N is not a number: only a full check finds it.
	bad := strings.Replace(string(event.MarshalLine(&evs[0])), `"N":"1234`, `"N":"x1234`, 1)
	f.WriteString(bad + "\n")
	f.Close()
	var bads []int
	a := open(t, "file://"+dir, archive.Options{SkipImages: true, OnBadLine: func(_ string, line int, _ error) { bads = append(bads, line) }})
	got, st := readAll(t, a, archive.Selection{})
	if !slices.Equal(ids(got), eventIDs(evs)) || st.Undecodable != 1 || !slices.Equal(bads, []int{51}) {
		t.Fatalf("ids %v, stats %+v, bad lines %v", ids(got), st, bads)
	}
	for _, l := range got {
		if e := l.Event; e.Keys != nil || e.OldImage != nil || e.NewImage != nil || e.EventName != "REMOVE" || e.ApproximateCreationTime.IsZero() {
			t.Fatalf("event %+v", e)
		}
	}
}

// TestTruncatedObject: a body that breaks off is read up to the break,
// which counts as one bad line where it happened.
func TestTruncatedObject(t *testing.T) {
	srv := s3test.Start(t)
	evs := events("T", "s1", event.Expired, 0, 2000, 0)
	var plain []byte
	for i := range evs {
		plain = event.AppendLine(plain, &evs[i])
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(plain)
	zw.Close()
	body := buf.Bytes()[:buf.Len()/2]
	key := "t/table=T/kind=expired/dt=2026-03-04/hr=05/s1-100000000000000000000-100000000000000001999.jsonl.gz"
	put(t, srv, key, body)
	var bad []string
	a := open(t, s3URL(srv, "t", ""), archive.Options{OnBadLine: func(_ string, line int, err error) { bad = append(bad, fmt.Sprint(line, ": ", err)) }})
	got, st := readAll(t, a, archive.Selection{})
	if len(got) == 0 || len(got) >= 2000 || st.Undecodable != 1 || len(bad) != 1 ||
		!strings.HasPrefix(bad[0], fmt.Sprint(len(got)+1, ": ")) {
		t.Fatalf("%d events, stats %+v, bad %v", len(got), st, bad)
	}
}

// TestDownloadRetries: S3 answers 503 now and then; the reader retries
// with backoff and reads everything.
func TestDownloadRetries(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "r", "")
	write(t, url, events("T", "s1", event.Expired, 0, 10, 0), events("T", "s2", event.Expired, 10, 10, 0))
	target, _ := neturl.Parse(srv.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	var calls atomic.Int32
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)%2 == 1 {
			http.Error(w, "<Error><Code>SlowDown</Code></Error>", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer px.Close()
	a := open(t, strings.Replace(url, srv.Endpoint, px.URL, 1), archive.Options{Retry: backoff.Policy{Min: time.Millisecond, Max: 5 * time.Millisecond}})
	got, _ := readAll(t, a, archive.Selection{})
	if len(got) != 20 || calls.Load() < 6 {
		t.Fatalf("%d events after %d requests", len(got), calls.Load())
	}
	// A 403 is not retried.
	px.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "<Error><Code>AccessDenied</Code></Error>", http.StatusForbidden)
	})
	before := calls.Load()
	if _, err := a.Objects(testCtx(t), archive.Selection{}); err == nil || calls.Load() != before+1 {
		t.Fatalf("err %v after %d requests", err, calls.Load()-before)
	}
}

// TestEventsOutliveTheirBuffers: the reader reuses its line buffers and
// its chunks of decoded lines; events kept until the whole read ended
// (objects of thousands of lines, several chunks and buffer refills each)
// are still exactly what was written. Run with -race, it also shows that
// no buffer is written while an event handed out still refers to it.
func TestEventsOutliveTheirBuffers(t *testing.T) {
	dir := t.TempDir()
	batches := [][]event.Event{events("T", "s1", event.Expired, 0, 5000, 0), events("U", "s2", event.Modified, 1000, 4000, 7)}
	write(t, "file://"+dir+"?events=all", batches...)
	want := map[string][]byte{}
	for _, evs := range batches {
		for i := range evs {
			want[evs[i].EventID] = event.MarshalLine(&evs[i])
		}
	}
	for _, skip := range []bool{false, true} {
		got, st := readAll(t, open(t, "file://"+dir, archive.Options{SkipImages: skip}), archive.Selection{})
		if len(got) != len(want) || st.Objects < 4 {
			t.Fatalf("skip images %v: %d events of %d, stats %+v", skip, len(got), len(want), st)
		}
		for _, l := range got {
			w, err := event.DecodeLine(want[l.Event.EventID])
			if err != nil {
				t.Fatal(err)
			}
			if skip {
				w.Keys, w.OldImage, w.NewImage = nil, nil, nil
			}
			if !reflect.DeepEqual(l.Event, w) {
				t.Fatalf("skip images %v: %s line %d:\ngot  %+v\nwant %+v", skip, l.Object, l.Line, l.Event, w)
			}
		}
	}
}
