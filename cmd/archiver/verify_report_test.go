package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
)

// TestVerifyBytesLabel: verify calls the bytes it read compressed only when
// they were. A file archive (plain NDJSON) reads "bytes"; once one of its
// hour files is gzipped, the report counts that file's bytes as compressed
// and the table says some are.
func TestVerifyBytesLabel(t *testing.T) {
	dir := t.TempDir()
	archiveWith(t, "file://"+dir, verifyEvents("Sessions", "s1", 0, 90)) // two hour files
	row := regexp.MustCompile(`(?m)^\s*(bytes[^0-9]*?)\s+[0-9]+\s*$`)
	label := func() string {
		code, out, stderr := runVerifyCmd(t, "--from", "file://"+dir)
		m := row.FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("exit %d, no bytes row in\n%s\n%s", code, out, stderr)
		}
		return m[1]
	}
	if got := label(); got != "bytes" {
		t.Errorf("plain archive: row %q, want \"bytes\"", got)
	}

	plain := filepath.Join(dir, "Sessions", "2026-03-05", "00.jsonl")
	body, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain+".gz", gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(plain); err != nil {
		t.Fatal(err)
	}
	if got := label(); got != "bytes (as stored, some compressed)" {
		t.Errorf("one gzipped hour: row %q, want \"bytes (as stored, some compressed)\"", got)
	}
	_, out, _ := runVerifyCmd(t, "--from", "file://"+dir, "--json")
	if r := decodeReport(t, out); r.CompressedBytes != int64(gz.Len()) || r.Bytes <= r.CompressedBytes {
		t.Errorf("bytes %d, compressed %d; want the gzipped file's %d of more", r.Bytes, r.CompressedBytes, gz.Len())
	}
}

func TestBytesLabel(t *testing.T) {
	cases := []struct {
		total, compressed int64
		want              string
	}{
		{0, 0, "bytes"},
		{100, 0, "bytes"},
		{100, 100, "bytes (compressed)"},
		{100, 40, "bytes (as stored, some compressed)"},
	}
	for _, c := range cases {
		if got := bytesLabel(c.total, c.compressed); got != c.want {
			t.Errorf("bytesLabel(%d, %d) = %q, want %q", c.total, c.compressed, got, c.want)
		}
	}
}

// TestRemoveTableKeys: the table of stream records the archive lacks
// leads with each item's keys as name=value pairs; hostile keys (control
// characters, a newline forging a row, spaces, '=') are quoted, so one
// record is one line.
func TestRemoveTableKeys(t *testing.T) {
	keys := func(item event.Item) json.RawMessage { return event.AppendItem(nil, item) }
	cases := []struct {
		name string
		keys json.RawMessage
		want string
	}{
		{"string and number", keys(event.Item{"UserId": &ddbtypes.AttributeValueMemberS{Value: "user1"},
			"N": &ddbtypes.AttributeValueMemberN{Value: "42"}}), "N=42 UserId=user1"},
		{"binary", keys(event.Item{"pk": &ddbtypes.AttributeValueMemberB{Value: []byte{0, 1, 2}}}), "pk=AAEC"},
		{"escape and newline", keys(event.Item{"pk": &ddbtypes.AttributeValueMemberS{Value: "a\x1b[2J\nforged  row"}}),
			`pk="a\x1b[2J\nforged  row"`},
		{"hostile name", keys(event.Item{"p k=\u202e": &ddbtypes.AttributeValueMemberS{Value: "x"}}), `"p k=\u202e"=x`},
		{"no keys", nil, "-"},
		{"not DynamoDB JSON", json.RawMessage(`{"pk":"\u001b"}`), `"{\"pk\":\"\\u001b\"}"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tbl := removeTable("missing from the archive", []archive.StreamRemove{{EventID: "ev\n12345", Shard: "shardId-1",
				Created: time.Date(2026, 3, 4, 23, 0, 0, 0, time.UTC), Keys: tc.keys}})
			var b bytes.Buffer
			if err := tbl.Print(&b); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(lines) != 4 || strings.ContainsAny(b.String(), "\x1b\r\u202e") {
				t.Fatalf("table is not a title, header, rule and one row of plain text:\n%q", b.String())
			}
			if !strings.HasPrefix(lines[1], "  keys ") {
				t.Errorf("header %q does not lead with keys", lines[1])
			}
			want := "  " + tc.want + strings.Repeat(" ", max(0, len("keys")-len(tc.want))) + `  "ev\n12345"  2026-03-04T23:00:00Z  shardId-1`
			if lines[3] != want {
				t.Errorf("row\n%q, want\n%q", lines[3], want)
			}
		})
	}
}
