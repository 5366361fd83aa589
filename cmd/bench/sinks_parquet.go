package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/parquetline"
)

// sinksBenchParquet compares the two archive formats on the S3 sink's own
// objects: each object's NDJSON lines made into a Parquet file
// (parquetline.FromLines, what format=parquet uploads) against the same
// lines gzipped (format=ndjson, compression=gzip, the default), paired
// round by round in this process. It prints the bytes per record of
// each and the CPU per record (this process's user+sys over the work),
// with their ratio as the median of the rounds' own ratios and its range.
func sinksBenchParquet(w io.Writer, sz sinksSizes, objects []sinksObject) error {
	sizes := map[bool]int{}
	encode := func(parquet bool) (float64, error) {
		start, n := benchkit.SelfCPU(), 0
		for _, o := range objects {
			out, err := encodeObject(o.lines, parquet)
			if err != nil {
				return 0, err
			}
			n += len(out)
		}
		sizes[parquet] = n
		return float64(benchkit.SelfCPU()-start) / float64(time.Microsecond) / float64(sz.s3Records), nil
	}
	pq, gz, err := benchkit.Paired(sz.rounds, false, nil, func(_ int, on bool) (float64, error) { return encode(on) })
	if err != nil {
		return err
	}
	ratios := make([]float64, len(pq))
	for i := range pq {
		ratios[i] = pq[i] / gz[i]
	}
	fmt.Fprintf(w, "  archive format, the S3 sink's objects of %d records (paired, %d rounds):\n", sz.s3Records, sz.rounds)
	fmt.Fprintf(w, "    ndjson+gzip: %.0f bytes/record, CPU %s µs/record\n", float64(sizes[false])/float64(sz.s3Records), benchkit.Spread("%.2f", gz))
	fmt.Fprintf(w, "    parquet:     %.0f bytes/record, CPU %s µs/record\n", float64(sizes[true])/float64(sz.s3Records), benchkit.Spread("%.2f", pq))
	fmt.Fprintf(w, "    parquet/ndjson+gzip: bytes %.2fx, CPU %sx\n", float64(sizes[true])/float64(max(sizes[false], 1)), benchkit.Spread("%.2f", ratios))
	return nil
}

// encodeObject is what the S3 sink uploads for lines: a Parquet file, or
// the lines gzipped.
func encodeObject(lines []byte, parquet bool) ([]byte, error) {
	var b bytes.Buffer
	if parquet {
		err := parquetline.FromLines(&b, lines)
		return b.Bytes(), err
	}
	zw, err := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(lines); err != nil {
		return nil, err
	}
	err = zw.Close()
	return b.Bytes(), err
}
