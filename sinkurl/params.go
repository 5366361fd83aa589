// Package sinkurl is the grammar of sink URLs, the one reading of them for
// the sinks that take them and the archive reader that takes the URL of
// the sink that wrote an archive: [Params] reads a URL's query parameters
// (each checked, every unknown one refused with the nearest known name,
// internal/suggest), [ConfigError] says what is wrong with a URL, and the
// parts that the file sink and the archive share are here: file:// paths
// ([FilePath], [ParseFile], [FileConfig]) and the coverage manifest
// parameters ([ManifestConfig]). Each destination reads its own
// parameters through [Params] (the S3 ones in package objstore, NATS's in
// sinks/natssink). It imports only event and internal packages.
package sinkurl

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/internal/suggest"
)

// ConfigError reports a bad sink URL: which URL (with secrets redacted),
// which parameter, and what is wrong with it.
type ConfigError struct {
	URL     string // the sink URL, secrets replaced by REDACTED
	Param   string // the query parameter or URL part at fault ("" for the URL as a whole)
	Problem string
}

func (e *ConfigError) Error() string {
	msg := fmt.Sprintf("sink %q: %s: %s", e.URL, e.Param, e.Problem)
	if e.Param == "" {
		msg = fmt.Sprintf("sink %q: %s", e.URL, e.Problem)
	}
	// Values echoed in the problem text never carry a secret either.
	return redact.Text(msg)
}

// Params reads a sink URL's query parameters and remembers which were used,
// so unknown ones can be rejected ([Params.Done]).
type Params struct {
	// URL is the parsed sink URL.
	URL *url.URL
	// Redacted is the sink URL as errors, logs and sink names show it.
	Redacted string
	q        url.Values
	used     map[string]bool
}

// Parse parses a sink URL (any scheme) for its parameters to be read.
// Bad URLs give a *ConfigError.
func Parse(raw string) (*Params, error) {
	red := redact.URL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &ConfigError{URL: red, Problem: "not a URL: " + redact.ParseError(err)}
	}
	if u.Scheme == "" {
		return nil, &ConfigError{URL: red, Problem: "no scheme (want s3://, nats://, file:// or stdout://)"}
	}
	if u.Opaque != "" {
		return nil, &ConfigError{URL: red, Problem: fmt.Sprintf("want %s://..., got %s:%s", u.Scheme, u.Scheme, "...")}
	}
	if u.Fragment != "" {
		return nil, &ConfigError{URL: red, Param: "fragment", Problem: "a sink URL has no #fragment"}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, &ConfigError{URL: red, Param: "query", Problem: redact.ParseError(err)}
	}
	return &Params{URL: u, Redacted: red, q: q, used: map[string]bool{}}, nil
}

// Fail is the *ConfigError of this URL for param ("" for the URL as a
// whole) with problem.
func (p *Params) Fail(param, problem string) error {
	return &ConfigError{URL: p.Redacted, Param: param, Problem: problem}
}

// Given reports whether the URL gives the parameter, without reading it.
func (p *Params) Given(name string) bool {
	_, ok := p.q[name]
	return ok
}

// Get returns the parameter's value and whether it was given.
func (p *Params) Get(name string) (string, bool, error) {
	p.used[name] = true
	vs, ok := p.q[name]
	if !ok {
		return "", false, nil
	}
	if len(vs) > 1 {
		return "", false, p.Fail(name, "given more than once")
	}
	return vs[0], true, nil
}

// Str reads a string parameter (def when not given).
func (p *Params) Str(name, def string) (string, error) {
	v, ok, err := p.Get(name)
	if err != nil || !ok {
		return def, err
	}
	return v, nil
}

// OneOf reads a parameter that must be one of allowed (def when not
// given).
func (p *Params) OneOf(name, def string, allowed ...string) (string, error) {
	v, ok, err := p.Get(name)
	if err != nil || !ok {
		return def, err
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", p.Fail(name, "must be "+OrList(allowed))
}

// OrList writes s as "a, b or c".
func OrList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Bool reads true/1/yes/on (or an empty value) and false/0/no/off (def
// when not given).
func (p *Params) Bool(name string, def bool) (bool, error) {
	v, ok, err := p.Get(name)
	if err != nil || !ok {
		return def, err
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on", "":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, p.Fail(name, fmt.Sprintf("%q is not true or false", v))
}

// Duration reads a duration like 30s in [min, max] (def when not given).
func (p *Params) Duration(name string, def, min, max time.Duration) (time.Duration, error) {
	v, ok, err := p.Get(name)
	if err != nil || !ok {
		return def, err
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, p.Fail(name, fmt.Sprintf("%q is not a duration like 30s or 5m", v))
	}
	if d < min || d > max {
		return 0, p.Fail(name, fmt.Sprintf("%s is out of range [%s, %s]", d, min, max))
	}
	return d, nil
}

// Int reads a decimal integer in [min, max] (def when not given).
func (p *Params) Int(name string, def, min, max int64) (int64, error) {
	v, ok, err := p.Get(name)
	if err != nil || !ok {
		return def, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, p.Fail(name, fmt.Sprintf("%q is not an integer", v))
	}
	if n < min || n > max {
		return 0, p.Fail(name, fmt.Sprintf("%d is out of range [%d, %d]", n, min, max))
	}
	return n, nil
}

// Size reads a byte size ([ParseSize]) in [min, max] (def when not
// given).
func (p *Params) Size(name string, def, min, max int64) (int64, error) {
	v, ok, err := p.Get(name)
	if err != nil || !ok {
		return def, err
	}
	n, ok := ParseSize(v)
	if !ok {
		return 0, p.Fail(name, fmt.Sprintf("%q is not a size like 8MiB or 1000000", v))
	}
	if n < min || n > max {
		return 0, p.Fail(name, fmt.Sprintf("%d bytes is out of range [%d, %d]", n, min, max))
	}
	return n, nil
}

// ParseSize reads a byte size as sink URLs write it: a plain number of
// bytes, or a number with one of the suffixes B, KB, MB, GB (powers of
// 1000) or KiB, MiB, GiB (powers of 1024).
func ParseSize(s string) (int64, bool) {
	units := []struct {
		suffix string
		mul    int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mul = strings.TrimSuffix(s, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, false
	}
	return n * mul, true
}

// Kinds parses events= (default expired).
func (p *Params) Kinds() ([]event.Kind, error) {
	v, ok, err := p.Get("events")
	if err != nil {
		return nil, err
	}
	if !ok {
		return []event.Kind{event.Expired}, nil
	}
	if v == "all" {
		return append([]event.Kind(nil), event.Kinds...), nil
	}
	var out []event.Kind
	seen := map[event.Kind]bool{}
	for _, s := range strings.Split(v, ",") {
		k := event.Kind(strings.TrimSpace(s))
		if !k.Valid() {
			return nil, p.Fail("events", fmt.Sprintf("%q is not a kind (want expired, deleted, inserted, modified or all)", s))
		}
		if seen[k] {
			return nil, p.Fail("events", fmt.Sprintf("%q listed twice", k))
		}
		seen[k] = true
		out = append(out, k)
	}
	return out, nil
}

// Done rejects every parameter no parser asked for.
func (p *Params) Done() error {
	var unknown []string
	for k := range p.q {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	allowed := make([]string, 0, len(p.used))
	for k := range p.used {
		allowed = append(allowed, k)
	}
	sort.Strings(allowed)
	problem := "unknown parameter for " + p.URL.Scheme + "://"
	if s := suggest.Nearest(unknown[0], allowed); s != "" {
		problem += "; did you mean " + s + "?"
	}
	return p.Fail(unknown[0], fmt.Sprintf("%s (known: %s)", problem, strings.Join(allowed, ", ")))
}
