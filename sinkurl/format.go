package sinkurl

// The archive forms the S3 and file sinks write (format=).
const (
	// FormatNDJSON is newline-delimited archive lines (the default).
	FormatNDJSON = "ndjson"
	// FormatParquet is one Parquet file per object (package parquetline),
	// compressed inside with zstd.
	FormatParquet = "parquet"
)

// ParseFormat reads format= (ndjson, the default, or parquet).
func ParseFormat(p *Params) (string, error) {
	return p.OneOf("format", FormatNDJSON, FormatNDJSON, FormatParquet)
}
