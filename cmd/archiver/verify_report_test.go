package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"regexp"
	"testing"
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
