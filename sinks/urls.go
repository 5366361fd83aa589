package sinks

import (
	"io"
	"net/url"

	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// The URL grammar lives in package sinkurl, the S3 configuration in
// package objstore (both shared with the archive reader); these names keep
// the sinks' callers writing sinks.S3Config, sinks.ConfigError and the
// rest.
type (
	// ConfigError reports a bad sink URL: [sinkurl.ConfigError].
	ConfigError = sinkurl.ConfigError
	// S3Config configures an S3 sink: [objstore.S3Config].
	S3Config = objstore.S3Config
	// FileConfig configures a file sink: [sinkurl.FileConfig].
	FileConfig = sinkurl.FileConfig
	// ManifestConfig is how an S3 or file sink records coverage
	// manifests: [sinkurl.ManifestConfig].
	ManifestConfig = sinkurl.ManifestConfig
)

// The defaults of [ManifestConfig] and [FileConfig] (see sinkurl).
const (
	DefaultManifestObjects  = sinkurl.DefaultManifestObjects
	DefaultManifestInterval = sinkurl.DefaultManifestInterval
	DefaultFileMode         = sinkurl.DefaultFileMode
	DefaultDirMode          = sinkurl.DefaultDirMode
)

// ParseS3URL parses an s3:// sink URL without opening anything:
// [objstore.ParseS3URL].
func ParseS3URL(rawURL string) (S3Config, error) { return objstore.ParseS3URL(rawURL) }

// ParseFileURL parses a file:// sink URL and returns its directory:
// [sinkurl.ParseFileURL].
func ParseFileURL(rawURL string) (string, error) { return sinkurl.ParseFileURL(rawURL) }

// ParseSize reads a byte size as sink URLs write it: [sinkurl.ParseSize].
func ParseSize(s string) (int64, bool) { return sinkurl.ParseSize(s) }

// FilePath is the path a file:// URL names: [sinkurl.FilePath].
func FilePath(u *url.URL) (string, error) { return sinkurl.FilePath(u) }

// Decompress is [objstore.Decompress]: body decoded by its
// Content-Encoding or key's extension.
func Decompress(body io.Reader, encoding, key string) (io.Reader, func(), error) {
	return objstore.Decompress(body, encoding, key)
}
