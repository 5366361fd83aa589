package objstore

import (
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Decompress returns a reader of body decoded by its Content-Encoding (the
// last coding named, aws-chunked aside: gzip, zstd or identity) or, when
// that names none of them, by key's extension (.gz, .zst, else none), as
// the sink reads an object back; call the returned func when done.
func Decompress(body io.Reader, encoding, key string) (io.Reader, func(), error) {
	coding := ""
	for _, c := range strings.Split(encoding, ",") {
		if c = strings.TrimSpace(c); c != "" && c != "aws-chunked" {
			coding = c
		}
	}
	if coding != "gzip" && coding != "zstd" && coding != "identity" {
		switch {
		case strings.HasSuffix(key, ".gz"):
			coding = "gzip"
		case strings.HasSuffix(key, ".zst"):
			coding = "zstd"
		}
	}
	switch coding {
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case "zstd":
		zr, err := zstd.NewReader(body, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, zr.Close, nil
	}
	return body, func() {}, nil
}
