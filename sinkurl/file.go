package sinkurl

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// TornDir is where, below a file sink's directory, the sink keeps the torn
// tails it cut off its files (a writer killed mid-append: bytes never
// acknowledged, whose records were delivered again), as
// TornDir+TABLE/DAY/HH.jsonl.OFFSET. Archive readers skip _archiver/;
// verify lists what is there.
const TornDir = "_archiver/torn/"

// FileConfig configures a file sink (sinks.FileSink). The sinks' Open
// fills it from
// file://DIR?file-mode=&dir-mode=&format=&manifests=&manifest-objects=&manifest-interval=.
type FileConfig struct {
	// Dir is the directory the sink owns, created when missing. It may be
	// a symbolic link; nothing below it may (see sinks.FileSink).
	Dir string
	// FileMode is the permission bits of the files the sink creates
	// (default 0640), DirMode those of its folders (default 0750), set
	// exactly (the umask does not narrow them). Files keep the owner's
	// read and write, folders its read, write and search: the sink
	// reopens what it made.
	FileMode, DirMode fs.FileMode
	// Format is the archive's form: [FormatNDJSON] ("" or "ndjson": lines
	// appended to one file per table and hour) or [FormatParquet] (a
	// Parquet file per batch and partition, in the S3 layout).
	Format string
	// Manifests is how the sink records coverage manifests (see
	// sinks.FileSink.Record); the zero value records with the defaults.
	Manifests ManifestConfig
}

// The file sink's default modes: the owner writes, its group reads, no
// one else looks.
const (
	DefaultFileMode fs.FileMode = 0o640
	DefaultDirMode  fs.FileMode = 0o750
)

// WithDefaults fills the zero modes and checks both.
func (c FileConfig) WithDefaults() (FileConfig, error) {
	if c.Dir == "" {
		return c, fmt.Errorf("file sink: Dir is empty")
	}
	if c.FileMode == 0 {
		c.FileMode = DefaultFileMode
	}
	if c.DirMode == 0 {
		c.DirMode = DefaultDirMode
	}
	if c.Format != "" && c.Format != FormatNDJSON && c.Format != FormatParquet {
		return c, fmt.Errorf("file sink: Format %q: must be %s or %s", c.Format, FormatNDJSON, FormatParquet)
	}
	if problem := checkMode(uint64(c.FileMode), 0o600); problem != "" {
		return c, fmt.Errorf("file sink: FileMode: %s", problem)
	}
	if problem := checkMode(uint64(c.DirMode), 0o700); problem != "" {
		return c, fmt.Errorf("file sink: DirMode: %s", problem)
	}
	return c, nil
}

// checkMode says what is wrong with mode m ("" for nothing): bits beyond
// 0777, or owner bits in need missing.
func checkMode(m, need uint64) string {
	if m > 0o777 {
		return fmt.Sprintf("%#o has bits beyond 0777 (only permission bits: no setuid, setgid, sticky or type bits)", m)
	}
	if m&need != need {
		return fmt.Sprintf("%#o takes from the owner what the sink needs (%#o)", m, need)
	}
	return ""
}

// ParseFile reads a file:// URL's directory, modes and manifest
// parameters, and rejects any other parameter ([Params.Done]).
func ParseFile(p *Params) (FileConfig, error) {
	c := FileConfig{}
	if p.URL.User != nil || p.URL.Port() != "" {
		return c, p.Fail("", "want file://DIR (a directory path)")
	}
	var err error
	if c.Dir, err = FilePath(p.URL); err != nil {
		return c, p.Fail("path", err.Error())
	}
	if c.FileMode, err = p.Mode("file-mode", DefaultFileMode, 0o600); err != nil {
		return c, err
	}
	if c.DirMode, err = p.Mode("dir-mode", DefaultDirMode, 0o700); err != nil {
		return c, err
	}
	if c.Format, err = ParseFormat(p); err != nil {
		return c, err
	}
	if c.Manifests, err = ParseManifests(p); err != nil {
		return c, err
	}
	return c, p.Done()
}

// Mode reads permission bits in octal (0640, 640 or 0o640) that keep the
// owner bits in need.
func (p *Params) Mode(name string, def fs.FileMode, need uint64) (fs.FileMode, error) {
	v, ok, err := p.Get(name)
	if err != nil || !ok {
		return def, err
	}
	n, perr := strconv.ParseUint(strings.TrimPrefix(v, "0o"), 8, 32)
	if perr != nil || v == "" {
		return 0, p.Fail(name, fmt.Sprintf("%q is not an octal mode like %#o", v, def))
	}
	if problem := checkMode(n, need); problem != "" {
		return 0, p.Fail(name, problem)
	}
	return fs.FileMode(n), nil
}

// ParseFileURL parses a file:// sink URL as the sinks' Open does
// (events=, file-mode=, dir-mode=, format= and the manifest parameters are
// accepted) and returns its directory. Bad URLs give a *ConfigError.
func ParseFileURL(rawURL string) (string, error) {
	p, err := Parse(rawURL)
	if err != nil {
		return "", err
	}
	if p.URL.Scheme != "file" {
		return "", p.Fail("", fmt.Sprintf("scheme %q: want file://DIR", p.URL.Scheme))
	}
	if _, err := p.Kinds(); err != nil {
		return "", err
	}
	c, err := ParseFile(p)
	return c.Dir, err
}
