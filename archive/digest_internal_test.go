package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
)

// TestDigestOf: one pass gives the whole body's SHA-256 and each prefix's
// asked for, in any order, repeated or out of range.
func TestDigestOf(t *testing.T) {
	body := []byte("0123456789abcdefghij")
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	d := digestOf(body, []int64{15, 0, 5, 15, 20, 99, -3})
	if d.Size != 20 || d.SHA256 != sum(body) || len(d.Prefixes) != 3 ||
		d.Prefixes[0] != sum(nil) || d.Prefixes[5] != sum(body[:5]) || d.Prefixes[15] != sum(body[:15]) {
		t.Errorf("digest %+v", d)
	}
	if d := digestOf(nil, nil); d.Size != 0 || d.SHA256 != sum(nil) || d.Prefixes != nil {
		t.Errorf("empty body: %+v", d)
	}
}

// BenchmarkDigestOf is the hashing verify adds per object: a 1 MiB
// object, alone and with a file's 24 prefixes.
func BenchmarkDigestOf(b *testing.B) {
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	var prefixes []int64
	for i := range int64(24) {
		prefixes = append(prefixes, i<<15)
	}
	for _, p := range [][]int64{nil, prefixes} {
		b.Run(fmt.Sprintf("prefixes=%d", len(p)), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				digestOf(body, p)
			}
		})
	}
}

// BenchmarkCoverageLine is what verify's coverage adds to each line read:
// placing it in its shard's covered ranges (a listed object's line, the
// common case), as Coverage's OnLine does.
func BenchmarkCoverageLine(b *testing.B) {
	const arn = "arn:aws:dynamodb:us-east-1:000000000000:table/T/stream/2026-03-04T00:00:00.000"
	var stored []manifest.Stored
	prev, from := "", ""
	for i := range 100 { // 100 ranges of 1000 records
		to := fmt.Sprintf("1%020d", (i+1)*1000-1)
		r := manifest.Range{StreamARN: arn, Region: "us-east-1", Table: "T", ShardID: "s1", From: from, To: to}
		m := manifest.New(r, []manifest.Object{{Key: fmt.Sprintf("obj-%d", i), SHA256: strings.Repeat("ab", 32)}}, prev, "w", time.Time{})
		enc := manifest.Encode(m)
		stored = append(stored, manifest.Stored{Key: manifest.Key(m), Digest: manifest.Digest(enc), M: m})
		prev, from = manifest.Digest(enc), to
	}
	c := NewCoverage(Selection{})
	c.load(ManifestSet{Stored: stored}, nil, "")
	lines := make([]Line, 100_000)
	objs := make([]Object, 100)
	for i := range objs {
		objs[i].Key = fmt.Sprintf("obj-%d", i)
	}
	for i := range lines {
		lines[i].Line = i%1000 + 1
		lines[i].Event = event.Event{Kind: event.Expired, StreamARN: arn, ShardID: "s1", SequenceNumber: fmt.Sprintf("1%020d", i)}
	}
	b.ResetTimer()
	n := 0
	for b.Loop() {
		c.line(&objs[n/1000%100], &lines[n%len(lines)])
		n++
	}
	for _, f := range c.Finish().Findings { // the objects, never read here, are missing
		if f.Kind != FindMissing {
			b.Fatalf("finding %+v", f)
		}
	}
}
