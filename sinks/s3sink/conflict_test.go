package s3sink

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

func compressAs(t testing.TB, compression string, data []byte) []byte {
	t.Helper()
	switch compression {
	case "gzip":
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(data)
		zw.Close()
		return b.Bytes()
	case "zstd":
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(data, nil)
	}
	return data
}

func deadLetterFrom(sink, msg string) func(*event.Event) {
	return func(e *event.Event) {
		e.DeadLetter = &event.DeadLetter{Sink: sink, Reason: event.ReasonPermanent, Error: msg, Attempts: 1}
	}
}

// conflictCounts returns archiver_sink_conflicts_total by outcome.
func conflictCounts(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "archiver_sink_conflicts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestS3KeyConflicts writes a batch whose key versitygw already holds. The
// same events in other bytes (another rendering, another compression,
// dead letters of the same sink with another error) count as written; other
// events, dead letters of another sink, or a foreign object send the upload
// to a distinct key, and nothing is overwritten or lost. A distinct key
// that is taken too is resolved by the same rule.
func TestS3KeyConflicts(t *testing.T) {
	v := testkit.StartVersity(t)
	evs := testkit.Events("t", "s", 1, 3)
	noTTLAttribute := func(e *event.Event) { e.TTLAttribute = "" }
	for i, tc := range []struct {
		name        string
		compression string
		upload      func(*event.Event) // applied to the events written (nil: none)
		existing    []byte             // uncompressed content at the key
		encoding    bool               // stored with Content-Encoding (else the extension says)
		existingAlt []byte             // content at the distinct key (nil: none)
		outcome     string
		permanent   bool
	}{
		{name: "same events without ttlAttribute, gzip", compression: "gzip", existing: testkit.RenderLines(evs, noTTLAttribute), encoding: true, outcome: ConflictSameEvents},
		{name: "same events without ttlAttribute, zstd", compression: "zstd", existing: testkit.RenderLines(evs, noTTLAttribute), encoding: true, outcome: ConflictSameEvents},
		{name: "same events, gzip by extension only", compression: "gzip", existing: testkit.RenderLines(evs, noTTLAttribute), outcome: ConflictSameEvents},
		{name: "same events in another order, uncompressed", compression: "none", existing: testkit.RenderLines([]event.Event{evs[2], evs[0], evs[1]}, nil), outcome: ConflictSameEvents},
		{name: "same bytes", compression: "none", existing: testkit.RenderLines(evs, nil), outcome: ConflictSameContent},
		{name: "other events", compression: "gzip", existing: testkit.RenderLines(testkit.Events("t", "s", 50, 3), nil), encoding: true, outcome: ConflictDistinctKey},
		{name: "fewer events", compression: "gzip", existing: testkit.RenderLines(evs[:2], nil), encoding: true, outcome: ConflictDistinctKey},
		{name: "not archive lines", compression: "gzip", existing: []byte("other\n"), outcome: ConflictDistinctKey},
		{name: "dead letters of the same sink", compression: "gzip", upload: deadLetterFrom("nats://a:4222", "too big"), existing: testkit.RenderLines(evs, deadLetterFrom("nats://a:4222", "other words")), encoding: true, outcome: ConflictSameEvents},
		{name: "dead letters of another sink", compression: "gzip", upload: deadLetterFrom("nats://b:4222", "too big"), existing: testkit.RenderLines(evs, deadLetterFrom("nats://a:4222", "too big")), encoding: true, outcome: ConflictDistinctKey},
		{name: "dead letters and archive lines", compression: "gzip", existing: testkit.RenderLines(evs, deadLetterFrom("nats://a:4222", "too big")), encoding: true, outcome: ConflictDistinctKey},
		{name: "distinct key already written", compression: "none", existing: testkit.RenderLines(evs[:1], nil), existingAlt: testkit.RenderLines(evs, nil), outcome: ConflictDistinctKey},
		{name: "distinct key holds the same events", compression: "none", existing: testkit.RenderLines(evs[:1], nil), existingAlt: testkit.RenderLines(evs, noTTLAttribute), outcome: ConflictDistinctKey},
		{name: "distinct key holds other events", compression: "none", existing: testkit.RenderLines(evs[:1], nil), existingAlt: testkit.RenderLines(evs[1:], nil), outcome: ConflictUnresolved, permanent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			reg := prometheus.NewRegistry()
			prefix := fmt.Sprintf("conflict%d", i)
			s, err := New(ctx, objstore.S3Config{Bucket: "archive", Prefix: prefix, Endpoint: v.Endpoint, PathStyle: true, Compression: tc.compression, FlushInterval: time.Hour, RetryBase: time.Millisecond},
				sinkapi.Options{AWSConfig: testkit.AWSConfig, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			key := s.Key("t", event.Expired, "us-east-1", "s", testkit.Start, evs[0].SequenceNumber, evs[2].SequenceNumber)
			upload := testkit.RenderLines(evs, tc.upload)
			stored := map[string][]byte{key: compressAs(t, tc.compression, tc.existing)}
			if tc.existingAlt != nil {
				// Without compression the upload's bytes are its lines.
				stored[distinctKey(key, s.ext, sha256.Sum256(upload))] = tc.existingAlt
			}
			for k, body := range stored {
				in := &s3.PutObjectInput{Bucket: aws.String("archive"), Key: aws.String(k), Body: bytes.NewReader(body)}
				if tc.encoding {
					in.ContentEncoding = aws.String(tc.compression)
				}
				if _, err := v.Client.PutObject(ctx, in); err != nil {
					t.Fatal(err)
				}
			}
			written := append([]event.Event(nil), evs...)
			for i := range written {
				if tc.upload != nil {
					tc.upload(&written[i])
				}
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: written}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			err = a.WaitAck(t, "b")
			if tc.permanent {
				if !sinkapi.IsPermanent(err) || !errors.Is(err, recorder.ErrConflict) || !strings.Contains(err.Error(), key) {
					t.Fatalf("ack error %v, want a permanent conflict naming the key", err)
				}
			} else if err != nil {
				t.Fatalf("ack error %v, want success", err)
			}
			if got := conflictCounts(t, reg); len(got) != 1 || got[tc.outcome] != 1 {
				t.Fatalf("conflicts counted %v, want one %s", got, tc.outcome)
			}
			checkConflictObjects(t, v, prefix, key, s.ext, stored, tc.outcome, evs)
			if !tc.permanent {
				checkConflictRecorded(t, v, s, prefix, key, evs)
			}
		})
	}
}

// checkConflictRecorded records the range of the events written and
// checks that its manifest lists the one object holding them after the
// conflict, with the size and SHA-256 of its stored bytes: the object at
// the key (its own bytes or another version's), or the one at the
// distinct key.
func checkConflictRecorded(t *testing.T, v *testkit.Versity, s *Sink, prefix, key string, evs []event.Event) {
	t.Helper()
	rg := testkit.RangeOf(evs[0], "", "", evs[2].SequenceNumber)
	if err := s.Record(testkit.Ctx(t), rg); err != nil {
		t.Fatal(err)
	}
	a := s3Archive{v, prefix}
	var data []string
	for _, k := range a.Keys(t, "") {
		if !strings.HasPrefix(k, manifest.Dir) {
			data = append(data, k)
		}
	}
	want := s.relKey(key)
	if len(data) == 2 {
		want = data[0] // the distinct key (the key's name with a digest sorts first)
	}
	testkit.CheckListed(t, a, testkit.LastManifest(t, a, rg).M, want)
}

var distinctKeyPattern = regexp.MustCompile(`^(.*)\.([0-9a-f]{12})(\.jsonl(\.gz|\.zst)?|\.parquet)$`)

// checkConflictObjects checks that the objects stored before the write are
// untouched and that the upload's events are where the outcome says: at a
// distinct key named after its content's SHA-256 for distinct_key when the
// distinct key was free, nowhere new otherwise.
func checkConflictObjects(t *testing.T, v *testkit.Versity, prefix, key, ext string, stored map[string][]byte, outcome string, evs []event.Event) {
	t.Helper()
	ctx := testkit.Ctx(t)
	keys := v.Objects(t, prefix+"/")
	var added []string
	for _, k := range keys {
		out, err := v.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("archive"), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want, ok := stored[k]; ok {
			if !bytes.Equal(body, want) {
				t.Fatalf("%s was overwritten", k)
			}
			continue
		}
		added = append(added, k)
		m := distinctKeyPattern.FindStringSubmatch(k)
		sum := sha256.Sum256(body)
		if m == nil || m[1]+m[3] != key || m[3] != ext || m[2] != hex.EncodeToString(sum[:6]) {
			t.Fatalf("new object %s is not %s with its SHA-256 before the extension", k, key)
		}
		got, _ := v.Read(t, k)
		var ids []string
		for _, e := range got {
			ids = append(ids, e.EventID)
		}
		sort.Strings(ids)
		if want := []string{evs[0].EventID, evs[1].EventID, evs[2].EventID}; strings.Join(ids, ",") != strings.Join(want, ",") {
			t.Fatalf("%s holds %v, want %v", k, ids, want)
		}
	}
	wantAdded := 0
	if outcome == ConflictDistinctKey && len(stored) == 1 {
		wantAdded = 1
	}
	if len(added) != wantAdded {
		t.Fatalf("objects added %v, want %d", added, wantAdded)
	}
}

func TestLineIdentity(t *testing.T) {
	e := testkit.Events("t", "s", 1, 1)[0]
	line := func(edit func(*event.Event)) []byte {
		return bytes.TrimSuffix(testkit.RenderLines([]event.Event{e}, edit), []byte("\n"))
	}
	noID := func(e *event.Event) { e.EventID = "" }
	for _, tc := range []struct {
		name string
		a, b []byte
		same bool
	}{
		{"another rendering", line(nil), line(func(e *event.Event) { e.TTLAttribute, e.SizeBytes = "", 0 }), true},
		{"another event", line(nil), line(func(e *event.Event) { e.EventID = "other" }), false},
		{"dead letter vs archive line", line(nil), line(deadLetterFrom("s3://a", "x")), false},
		{"dead letters of one sink", line(deadLetterFrom("s3://a", "x")), line(deadLetterFrom("s3://a", "y")), true},
		{"dead letters of two sinks", line(deadLetterFrom("s3://a", "x")), line(deadLetterFrom("s3://b", "x")), false},
		{"no event ID, same bytes", line(noID), line(noID), true},
		{"no event ID, other bytes", line(noID), line(func(e *event.Event) { noID(e); e.TTLAttribute = "" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := lineIdentity(tc.a)
			if err != nil {
				t.Fatal(err)
			}
			b, err := lineIdentity(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if (a == b) != tc.same {
				t.Fatalf("identities %q and %q: same = %v, want %v", a, b, a == b, tc.same)
			}
		})
	}
	for _, bad := range []string{"other", "{}", `{"Item":{}}`, "[1]"} {
		if id, err := lineIdentity([]byte(bad)); err == nil {
			t.Errorf("lineIdentity(%q) = %q, want an error", bad, id)
		}
	}
}

// TestS3ConflictResolutionIsBounded: when reading the existing object back
// keeps failing, the upload is tried MaxAttempts times and then fails with
// an error that is not permanent; when the role may not read it, at once
// with a permanent error. The proxy injects the failing answers.
func TestS3ConflictResolutionIsBounded(t *testing.T) {
	v := testkit.StartVersity(t)
	px := testkit.StartProxy(t, v.Endpoint)
	evs := testkit.Events("t", "s", 1, 2)
	for i, tc := range []struct {
		name      string
		status    int
		code      string
		puts      int32
		permanent bool
	}{
		{"GET keeps failing", http.StatusServiceUnavailable, "ServiceUnavailable", 3, false},
		{"GET denied", http.StatusForbidden, "AccessDenied", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			prefix := fmt.Sprintf("bounded%d", i)
			s, err := New(ctx, objstore.S3Config{Bucket: "archive", Prefix: prefix, Endpoint: px.URL, PathStyle: true, Compression: "none", MaxAttempts: 3, RetryBase: time.Millisecond},
				sinkapi.Options{AWSConfig: testkit.AWSConfig})
			if err != nil {
				t.Fatal(err)
			}
			key := s.Key("t", event.Expired, "us-east-1", "s", testkit.Start, evs[0].SequenceNumber, evs[1].SequenceNumber)
			if _, err := v.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("archive"), Key: aws.String(key), Body: strings.NewReader("other\n")}); err != nil {
				t.Fatal(err)
			}
			var puts atomic.Int32
			px.SetFault(func(w http.ResponseWriter, r *http.Request, _ func(http.ResponseWriter)) bool {
				switch r.Method {
				case http.MethodPut:
					puts.Add(1)
				case http.MethodGet, http.MethodHead:
					w.WriteHeader(tc.status)
					if r.Method == http.MethodGet {
						fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, tc.code)
					}
					return true
				}
				return false
			})
			defer px.SetFault(nil)
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			n, err := a.Get("b")
			if n != 1 || err == nil || sinkapi.IsPermanent(err) != tc.permanent {
				t.Fatalf("%d acks, err %v; want one error, permanent %v", n, err, tc.permanent)
			}
			if got := puts.Load(); got != tc.puts {
				t.Fatalf("%d PUTs, want %d", got, tc.puts)
			}
			if keys := v.Objects(t, prefix+"/"); len(keys) != 1 {
				t.Fatalf("objects %v, want only the one that was there", keys)
			}
		})
	}
}
