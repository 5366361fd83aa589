// Package objstore is the archive's object store as the S3 sink and the
// archive reader share it: the s3:// URL ([ParseS3URL], [S3Config]), the
// S3 client built from it ([NewClient]) and the decoding of a stored
// object's bytes ([Decompress]: gzip, zstd or none). It imports sinkurl
// for the URL grammar and nothing under sinks/, so the archive reader
// needs no sink to read an archive.
package objstore

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// S3Config configures an S3 sink (sinks.S3Sink) and says where its archive
// is. The sinks' Open fills it from
// s3://BUCKET/PREFIX?region=&endpoint=&path-style=&sse=&kms-key-id=&storage-class=&flush-bytes=&flush-interval=&compression=&format=&max-attempts=&max-buffer-bytes=&manifests=&manifest-objects=&manifest-interval=.
type S3Config struct {
	Bucket string
	// Prefix is the key prefix, without leading or trailing slash ("" for
	// none).
	Prefix string
	// Region defaults to the AWS configuration's region, or us-east-1 when
	// an Endpoint is set and the configuration has none.
	Region string
	// Endpoint is an S3-compatible server's base URL (http or https).
	Endpoint string
	// PathStyle addresses the bucket in the path instead of the host name.
	PathStyle bool
	// SSE is "" (bucket default), "AES256" or "aws:kms".
	SSE string
	// KMSKeyID is the KMS key for SSE "aws:kms" ("" for the AWS managed key).
	KMSKeyID string
	// StorageClass is an S3 storage class such as STANDARD_IA ("" for the
	// bucket default).
	StorageClass string
	// FlushBytes is the uncompressed size at which a shard's buffer is
	// written as an object (default 8 MiB).
	FlushBytes int64
	// FlushInterval is the longest an event waits in a buffer (default 60s).
	FlushInterval time.Duration
	// Compression is "gzip" (default), "zstd" or "none" for NDJSON
	// objects, and "" with Format parquet (a Parquet file compresses
	// inside).
	Compression string
	// Format is the objects' form: sinkurl.FormatNDJSON ("" or "ndjson",
	// lines) or sinkurl.FormatParquet (one Parquet file per object,
	// package parquetline).
	Format string
	// MaxAttempts bounds the attempts of one upload before its batches are
	// acknowledged with an error (the consumer retries them later); default 8.
	MaxAttempts int
	// RetryBase is the first retry delay (default 200ms), doubled up to 20s.
	RetryBase time.Duration
	// MaxBufferBytes bounds what the sink holds, buffered and uploading
	// (default 4 × FlushBytes, at least 64 MiB); Write blocks beyond it.
	MaxBufferBytes int64
	// Manifests is how the sink records coverage manifests (see
	// sinks.S3Sink.Record); the zero value records with the defaults.
	Manifests sinkurl.ManifestConfig
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ParseS3 reads an s3:// URL's bucket, prefix and parameters, and rejects any
// other parameter.
func ParseS3(p *sinkurl.Params) (S3Config, error) {
	c := S3Config{Bucket: p.URL.Host, Prefix: strings.Trim(p.URL.Path, "/")}
	var err error
	if p.URL.User != nil {
		return c, p.Fail("", "credentials do not belong in an s3:// URL (they come from the AWS credential chain)")
	}
	if c.Bucket == "" {
		return c, p.Fail("bucket", "missing: want s3://BUCKET/PREFIX")
	}
	if !bucketName.MatchString(c.Bucket) {
		return c, p.Fail("bucket", fmt.Sprintf("%q is not a valid bucket name (3-63 lower-case letters, digits, dots and hyphens)", c.Bucket))
	}
	if strings.Contains(c.Prefix, "//") {
		return c, p.Fail("prefix", fmt.Sprintf("%q contains an empty path segment", c.Prefix))
	}
	if c.Region, err = p.Str("region", ""); err != nil {
		return c, err
	}
	if c.Region != "" && !event.ValidRegion(c.Region) {
		// The SDK would put it in the endpoint's host name, and refuse
		// it only at the first request.
		return c, p.Fail("region", fmt.Sprintf("%q is not a region name like eu-west-1", c.Region))
	}
	if c.Endpoint, err = p.Str("endpoint", ""); err != nil {
		return c, err
	}
	if c.Endpoint != "" {
		eu, perr := url.Parse(c.Endpoint)
		if perr != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return c, p.Fail("endpoint", fmt.Sprintf("%q is not an http:// or https:// URL", redact.URL(c.Endpoint)))
		}
	}
	if c.PathStyle, err = p.Bool("path-style", false); err != nil {
		return c, err
	}
	if c.SSE, err = p.OneOf("sse", "", "AES256", "aws:kms"); err != nil {
		return c, err
	}
	if c.KMSKeyID, err = p.Str("kms-key-id", ""); err != nil {
		return c, err
	}
	if c.KMSKeyID != "" && c.SSE != "aws:kms" {
		return c, p.Fail("kms-key-id", "needs sse=aws:kms")
	}
	if c.StorageClass, err = p.Str("storage-class", ""); err != nil {
		return c, err
	}
	if c.StorageClass != "" {
		ok := false
		var names []string
		for _, v := range s3types.StorageClass("").Values() {
			names = append(names, string(v))
			ok = ok || string(v) == c.StorageClass
		}
		if !ok {
			return c, p.Fail("storage-class", fmt.Sprintf("%q is not one of %s", c.StorageClass, strings.Join(names, ", ")))
		}
	}
	if c.FlushBytes, err = p.Size("flush-bytes", 8<<20, 1, 5<<30); err != nil {
		return c, err
	}
	if c.FlushInterval, err = p.Duration("flush-interval", 60*time.Second, time.Millisecond, 24*time.Hour); err != nil {
		return c, err
	}
	if c.Compression, c.Format, err = parseForm(p); err != nil {
		return c, err
	}
	n, err := p.Int("max-attempts", 8, 1, 1000)
	if err != nil {
		return c, err
	}
	c.MaxAttempts = int(n)
	if c.MaxBufferBytes, err = p.Size("max-buffer-bytes", 0, 1, 64<<30); err != nil {
		return c, err
	}
	if c.Manifests, err = sinkurl.ParseManifests(p); err != nil {
		return c, err
	}
	return c, p.Done()
}

// parseForm reads compression= and format=: compression is "" with
// format=parquet, which refuses compression= given with it.
func parseForm(p *sinkurl.Params) (compression, format string, err error) {
	if compression, err = p.OneOf("compression", "gzip", "gzip", "zstd", "none"); err != nil {
		return "", "", err
	}
	if format, err = sinkurl.ParseFormat(p); err != nil || format != sinkurl.FormatParquet {
		return compression, format, err
	}
	if p.Given("compression") {
		return "", "", p.Fail("compression", "not with format=parquet: a Parquet file is compressed inside (zstd); give one of compression= and format=parquet")
	}
	return "", format, nil
}

// ParseS3URL parses an s3:// sink URL as the sinks' Open does (every
// parameter of [S3Config], and events=) without opening anything: the
// archive reader takes the URL of the sink that wrote an archive. Bad URLs
// give a *sinkurl.ConfigError.
func ParseS3URL(rawURL string) (S3Config, error) {
	p, err := sinkurl.Parse(rawURL)
	if err != nil {
		return S3Config{}, err
	}
	if p.URL.Scheme != "s3" {
		return S3Config{}, p.Fail("", fmt.Sprintf("scheme %q: want s3://BUCKET/PREFIX", p.URL.Scheme))
	}
	if _, err := p.Kinds(); err != nil {
		return S3Config{}, err
	}
	return ParseS3(p)
}
