package sinks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/internal/suggest"
)

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("sink closed")

// Options carries what sinks need from their host process.
type Options struct {
	// Logger receives the sinks' logs (default zap.NewNop()).
	Logger *zap.Logger
	// Registerer receives the sinks' metrics (default: none registered).
	// Several sinks may share one Registerer.
	Registerer prometheus.Registerer
	// AWSConfig returns the AWS configuration (credentials, retryer, HTTP
	// client) the S3 sink uses for region. Production passes the default
	// credential chain (the ECS task role); nil means
	// config.LoadDefaultConfig with that region.
	AWSConfig func(ctx context.Context, region string) (aws.Config, error)
	// Stdout is where stdout:// writes (default os.Stdout).
	Stdout io.Writer
	// NoManifests opens S3 and file sinks without coverage manifests, as
	// manifests=false does: for a caller that reads no stream and so will
	// never call Record (replay, restore tests, benches); such a sink
	// would otherwise track its objects for a Record that never comes.
	NoManifests bool
}

func (o Options) logger() *zap.Logger {
	if o.Logger == nil {
		return zap.NewNop()
	}
	return o.Logger
}

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

// Open parses a sink URL and opens the sink. It returns the sink and the
// event kinds the caller should route to it (the events= parameter, default
// [event.Expired]). Bad URLs give a *ConfigError naming the parameter and
// the problem; unknown parameters are rejected, with the nearest known
// name when one is near (internal/suggest).
//
// Schemes and parameters (every one optional unless noted):
//
//	file://DIR            newline-delimited archive lines, DIR/TABLE/YYYY-MM-DD/HH.jsonl;
//	                      one sink per DIR (locked), see [FileSink] and [FileConfig]
//	    file-mode=0640, dir-mode=0750   modes of the files and folders it creates
//	    manifests=true|false, manifest-objects=100, manifest-interval=10m
//	stdout://             one line per event on standard output
//	    format=envelope|item   archive line (default) or the item as plain JSON
//	s3://BUCKET/PREFIX    see [S3Config]
//	    region=, endpoint=, path-style=true|false, sse=AES256|aws:kms,
//	    kms-key-id=, storage-class=, flush-bytes=8MiB, flush-interval=60s,
//	    compression=gzip|zstd|none, max-attempts=8, max-buffer-bytes=,
//	    manifests=true|false, manifest-objects=100, manifest-interval=10m
//	nats://HOST:PORT[,HOST:PORT]   see [NATSConfig]
//	    subject=archiver.{table}.{kind}, jetstream=true|false,
//	    create-stream=NAME, with it stream-max-age=168h (0: none),
//	    stream-max-bytes=, stream-max-msgs= (default none),
//	    duplicate-window=20m, stream-replicas=1;
//	    creds=, nkey=, token=, user=, password=, or creds-env=VAR,
//	    nkey-env=VAR, token-env=VAR (the secret in environment variable VAR),
//	    tls-ca=, tls-cert=, tls-key=, format=cloudevents|envelope|item,
//	    max-in-flight=, max-pending-bytes=, max-subject=1024, name=,
//	    msg-ttl=DURATION|never (a Nats-TTL header; JetStream only)
//
// Every scheme takes events=KIND[,KIND...] with kinds expired, deleted,
// inserted, modified (or all).
func Open(ctx context.Context, rawURL string, o Options) (Sink, []event.Kind, error) {
	pr, err := prepare(rawURL)
	if err != nil {
		return nil, nil, err
	}
	sk, err := pr.open(ctx, o)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("sink %q: %w", pr.p.redacted, err)
	}
	return sk, pr.kinds, nil
}

// Validate checks a sink URL the way Open does (scheme, every parameter and
// its value) without connecting to or creating anything, so a caller can
// report every configuration problem at once before it opens any sink.
// Problems only a live destination reveals (a JetStream subject no stream
// captures, a bucket that does not exist) surface from Open or from
// [Preflight].
func Validate(rawURL string) error {
	_, err := prepare(rawURL)
	return err
}

// ParseS3URL parses an s3:// sink URL as [Open] does (every parameter of
// [S3Config], and events=) without opening anything: the archive reader
// takes the URL of the sink that wrote an archive. Bad URLs give a
// *ConfigError.
func ParseS3URL(rawURL string) (S3Config, error) {
	p, err := parseParams(rawURL)
	if err != nil {
		return S3Config{}, err
	}
	if p.u.Scheme != "s3" {
		return S3Config{}, p.fail("", fmt.Sprintf("scheme %q: want s3://BUCKET/PREFIX", p.u.Scheme))
	}
	if _, err := p.kinds(); err != nil {
		return S3Config{}, err
	}
	return parseS3(p)
}

// ParseFileURL parses a file:// sink URL as [Open] does (events=,
// file-mode= and dir-mode= are accepted) and returns its directory. Bad
// URLs give a *ConfigError.
func ParseFileURL(rawURL string) (string, error) {
	p, err := parseParams(rawURL)
	if err != nil {
		return "", err
	}
	if p.u.Scheme != "file" {
		return "", p.fail("", fmt.Sprintf("scheme %q: want file://DIR", p.u.Scheme))
	}
	if _, err := p.kinds(); err != nil {
		return "", err
	}
	c, err := parseFile(p)
	return c.Dir, err
}

// prepared is a parsed, checked sink URL and how to open its sink.
type prepared struct {
	p     *params
	kinds []event.Kind
	open  func(ctx context.Context, o Options) (Sink, error)
}

func prepare(rawURL string) (*prepared, error) {
	p, err := parseParams(rawURL)
	if err != nil {
		return nil, err
	}
	kinds, err := p.kinds()
	if err != nil {
		return nil, err
	}
	pr := &prepared{p: p, kinds: kinds}
	switch p.u.Scheme {
	case "file":
		c, err := parseFile(p)
		if err != nil {
			return nil, err
		}
		pr.open = func(_ context.Context, o Options) (Sink, error) {
			sk, err := NewFileSinkWith(c, o)
			if err != nil {
				return nil, err
			}
			return recording(sk, c.Manifests, o), nil
		}
	case "stdout":
		item, err := stdoutItemFormat(p)
		if err != nil {
			return nil, err
		}
		pr.open = func(_ context.Context, o Options) (Sink, error) {
			return NewWriterSink("stdout://", o.Stdout, item, o), nil
		}
	case "s3":
		c, err := parseS3(p)
		if err != nil {
			return nil, err
		}
		pr.open = func(ctx context.Context, o Options) (Sink, error) {
			sk, err := NewS3(ctx, c, o)
			if err != nil {
				return nil, err
			}
			return recording(sk, c.Manifests, o), nil
		}
	case "nats":
		c, err := parseNATS(p)
		if err != nil {
			return nil, err
		}
		pr.open = func(ctx context.Context, o Options) (Sink, error) { return NewNATS(ctx, c, o) }
	default:
		return nil, p.fail("", fmt.Sprintf("unknown scheme %q (want s3, nats, file or stdout)", p.u.Scheme))
	}
	return pr, nil
}

// params reads a sink URL's query parameters and remembers which were used,
// so unknown ones can be rejected.
type params struct {
	u        *url.URL
	redacted string
	q        url.Values
	used     map[string]bool
}

// redactURL is the sink URL as errors, logs and sink names show it.
func redactURL(raw string) string { return redact.URL(raw) }

func parseParams(raw string) (*params, error) {
	red := redactURL(raw)
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
	return &params{u: u, redacted: red, q: q, used: map[string]bool{}}, nil
}

func (p *params) fail(param, problem string) error {
	return &ConfigError{URL: p.redacted, Param: param, Problem: problem}
}

// get returns the parameter's value and whether it was given.
func (p *params) get(name string) (string, bool, error) {
	p.used[name] = true
	vs, ok := p.q[name]
	if !ok {
		return "", false, nil
	}
	if len(vs) > 1 {
		return "", false, p.fail(name, "given more than once")
	}
	return vs[0], true, nil
}

func (p *params) str(name, def string) (string, error) {
	v, ok, err := p.get(name)
	if err != nil || !ok {
		return def, err
	}
	return v, nil
}

func (p *params) oneOf(name, def string, allowed ...string) (string, error) {
	v, ok, err := p.get(name)
	if err != nil || !ok {
		return def, err
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", p.fail(name, "must be "+orList(allowed))
}

func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func (p *params) boolean(name string, def bool) (bool, error) {
	v, ok, err := p.get(name)
	if err != nil || !ok {
		return def, err
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on", "":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, p.fail(name, fmt.Sprintf("%q is not true or false", v))
}

func (p *params) duration(name string, def, min, max time.Duration) (time.Duration, error) {
	v, ok, err := p.get(name)
	if err != nil || !ok {
		return def, err
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, p.fail(name, fmt.Sprintf("%q is not a duration like 30s or 5m", v))
	}
	if d < min || d > max {
		return 0, p.fail(name, fmt.Sprintf("%s is out of range [%s, %s]", d, min, max))
	}
	return d, nil
}

func (p *params) integer(name string, def, min, max int64) (int64, error) {
	v, ok, err := p.get(name)
	if err != nil || !ok {
		return def, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, p.fail(name, fmt.Sprintf("%q is not an integer", v))
	}
	if n < min || n > max {
		return 0, p.fail(name, fmt.Sprintf("%d is out of range [%d, %d]", n, min, max))
	}
	return n, nil
}

// size reads a byte size: a plain number of bytes or a number with one of
// the suffixes B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of
// 1024).
func (p *params) size(name string, def, min, max int64) (int64, error) {
	v, ok, err := p.get(name)
	if err != nil || !ok {
		return def, err
	}
	n, ok := ParseSize(v)
	if !ok {
		return 0, p.fail(name, fmt.Sprintf("%q is not a size like 8MiB or 1000000", v))
	}
	if n < min || n > max {
		return 0, p.fail(name, fmt.Sprintf("%d bytes is out of range [%d, %d]", n, min, max))
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

// kinds parses events= (default expired).
func (p *params) kinds() ([]event.Kind, error) {
	v, ok, err := p.get("events")
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
			return nil, p.fail("events", fmt.Sprintf("%q is not a kind (want expired, deleted, inserted, modified or all)", s))
		}
		if seen[k] {
			return nil, p.fail("events", fmt.Sprintf("%q listed twice", k))
		}
		seen[k] = true
		out = append(out, k)
	}
	return out, nil
}

// done rejects every parameter no parser asked for.
func (p *params) done() error {
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
	problem := "unknown parameter for " + p.u.Scheme + "://"
	if s := suggest.Nearest(unknown[0], allowed); s != "" {
		problem += "; did you mean " + s + "?"
	}
	return p.fail(unknown[0], fmt.Sprintf("%s (known: %s)", problem, strings.Join(allowed, ", ")))
}

// nameURL is the sink's public name: scheme, host and path, no query, no
// credentials (and through redactURL, no password url.Parse misread as a
// path: s3://TOK/EN@host).
func (p *params) nameURL() string {
	u := *p.u
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	return redactURL(u.String())
}

// stdoutItemFormat checks a stdout:// URL and reports whether it asks for
// the plain item format.
func stdoutItemFormat(p *params) (bool, error) {
	if p.u.Host != "" || (p.u.Path != "" && p.u.Path != "/") {
		return false, p.fail("", "want stdout:// with nothing after it but parameters")
	}
	format, err := p.oneOf("format", "envelope", "envelope", "item")
	if err != nil {
		return false, err
	}
	return format == "item", p.done()
}
