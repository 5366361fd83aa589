package parquetline_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"testing"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/parquetline"
)

// benchLines returns n NDJSON archive lines of expiries, each of its own
// item, as the S3 sink buffers them.
func benchLines(n int) []byte {
	e := events()["expired"]
	var b []byte
	for i := range n {
		e.EventID = fmt.Sprintf("%032x", i)
		e.SequenceNumber = fmt.Sprintf("1000000000000%08d", i)
		b = event.AppendLine(b, &e)
	}
	return b
}

// BenchmarkFromLines: what format=parquet costs the S3 sink per event at
// upload (1,000 expiries of one file), beside BenchmarkGzipLines, what
// NDJSON with gzip costs; ns/event is per event.
func BenchmarkFromLines(b *testing.B) {
	lines := benchLines(1000)
	enc := parquetline.NewEncoder() // a sink's, kept from file to file
	b.SetBytes(int64(len(lines)))
	for b.Loop() {
		var out bytes.Buffer
		if err := enc.FromLines(&out, lines); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/event")
}

// BenchmarkGzipLines is BenchmarkFromLines's baseline.
func BenchmarkGzipLines(b *testing.B) {
	lines := benchLines(1000)
	b.SetBytes(int64(len(lines)))
	for b.Loop() {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		if _, err := zw.Write(lines); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/event")
}
