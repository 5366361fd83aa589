package sinks

import (
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ttl-archiver/archiver/natsmsg"
)

// S3Config configures an S3 sink. Open fills it from
// s3://BUCKET/PREFIX?region=&endpoint=&path-style=&sse=&kms-key-id=&storage-class=&flush-bytes=&flush-interval=&compression=&max-attempts=&max-buffer-bytes=&manifests=&manifest-objects=&manifest-interval=.
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
	// Compression is "gzip" (default), "zstd" or "none".
	Compression string
	// MaxAttempts bounds the attempts of one upload before its batches are
	// acknowledged with an error (the consumer retries them later); default 8.
	MaxAttempts int
	// RetryBase is the first retry delay (default 200ms), doubled up to 20s.
	RetryBase time.Duration
	// MaxBufferBytes bounds what the sink holds, buffered and uploading
	// (default 4 × FlushBytes, at least 64 MiB); Write blocks beyond it.
	MaxBufferBytes int64
	// Manifests is how the sink records coverage manifests (see
	// [S3Sink.Record]); the zero value records with the defaults.
	Manifests ManifestConfig
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

func parseS3(p *params) (S3Config, error) {
	c := S3Config{Bucket: p.u.Host, Prefix: strings.Trim(p.u.Path, "/")}
	var err error
	if p.u.User != nil {
		return c, p.fail("", "credentials do not belong in an s3:// URL (they come from the AWS credential chain)")
	}
	if c.Bucket == "" {
		return c, p.fail("bucket", "missing: want s3://BUCKET/PREFIX")
	}
	if !bucketName.MatchString(c.Bucket) {
		return c, p.fail("bucket", fmt.Sprintf("%q is not a valid bucket name (3-63 lower-case letters, digits, dots and hyphens)", c.Bucket))
	}
	if strings.Contains(c.Prefix, "//") {
		return c, p.fail("prefix", fmt.Sprintf("%q contains an empty path segment", c.Prefix))
	}
	if c.Region, err = p.str("region", ""); err != nil {
		return c, err
	}
	if c.Endpoint, err = p.str("endpoint", ""); err != nil {
		return c, err
	}
	if c.Endpoint != "" {
		eu, perr := url.Parse(c.Endpoint)
		if perr != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return c, p.fail("endpoint", fmt.Sprintf("%q is not an http:// or https:// URL", redactURL(c.Endpoint)))
		}
	}
	if c.PathStyle, err = p.boolean("path-style", false); err != nil {
		return c, err
	}
	if c.SSE, err = p.oneOf("sse", "", "AES256", "aws:kms"); err != nil {
		return c, err
	}
	if c.KMSKeyID, err = p.str("kms-key-id", ""); err != nil {
		return c, err
	}
	if c.KMSKeyID != "" && c.SSE != "aws:kms" {
		return c, p.fail("kms-key-id", "needs sse=aws:kms")
	}
	if c.StorageClass, err = p.str("storage-class", ""); err != nil {
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
			return c, p.fail("storage-class", fmt.Sprintf("%q is not one of %s", c.StorageClass, strings.Join(names, ", ")))
		}
	}
	if c.FlushBytes, err = p.size("flush-bytes", 8<<20, 1, 5<<30); err != nil {
		return c, err
	}
	if c.FlushInterval, err = p.duration("flush-interval", 60*time.Second, time.Millisecond, 24*time.Hour); err != nil {
		return c, err
	}
	if c.Compression, err = p.oneOf("compression", "gzip", "gzip", "zstd", "none"); err != nil {
		return c, err
	}
	n, err := p.integer("max-attempts", 8, 1, 1000)
	if err != nil {
		return c, err
	}
	c.MaxAttempts = int(n)
	if c.MaxBufferBytes, err = p.size("max-buffer-bytes", 0, 1, 64<<30); err != nil {
		return c, err
	}
	if c.Manifests, err = parseManifests(p); err != nil {
		return c, err
	}
	return c, p.done()
}

// NATSConfig configures a NATS sink. Open fills it from
// nats://[USER:PASSWORD@]HOST:PORT[,HOST:PORT]?subject=&jetstream=&create-stream=&stream-max-age=&stream-max-bytes=&stream-max-msgs=&duplicate-window=&stream-replicas=&creds=&creds-env=&nkey=&nkey-env=&token=&token-env=&tls-ca=&tls-cert=&tls-key=&format=&max-in-flight=&max-pending-bytes=&max-subject=&name=&msg-ttl=.
type NATSConfig struct {
	// Servers are nats:// (or tls://) URLs.
	Servers []string
	// Subject is the subject template (default "archiver.{table}.{kind}"):
	// {table}, {kind} and {ATTR} for a key attribute ATTR (its S or N value)
	// are replaced per event, each by one token (see [NATSSink] for the
	// escaping).
	Subject string
	// MaxSubject caps a rendered subject's length in bytes (default
	// [DefaultMaxSubject], at most [MaxMaxSubject]): placeholder values too
	// long for their share of it become digest tokens. It must stay below
	// the server's max_control_line less about 200 bytes.
	MaxSubject int
	// JetStream (default true) publishes with acknowledgements into existing
	// streams (at-least-once). False publishes on core NATS: at-most-once,
	// a batch is acknowledged once the server has received it (a flush
	// round-trip), with no guarantee that any subscriber got it.
	JetStream bool
	// CreateStream, when set, creates a JetStream stream of this name
	// capturing the subject template's subjects, with Stream's limits; a
	// stream of that name that exists is changed to the limits the URL
	// gave (Stream.Given) and otherwise kept as it is.
	CreateStream string
	// Stream holds the limits of the stream CreateStream makes
	// (stream-max-age=, stream-max-bytes=, stream-max-msgs=,
	// duplicate-window=, stream-replicas=; only with create-stream).
	Stream StreamSettings
	// Creds is a credentials file (JWT + nkey seed).
	Creds string
	// NKey is an nkey seed file.
	NKey string
	// Token, User and Password authenticate by token or user name.
	Token, User, Password string
	// CredsEnv, NKeyEnv and TokenEnv name environment variables holding a
	// .creds file's content, an nkey seed or a token (creds-env=,
	// nkey-env=, token-env=): what an ECS task's secrets block sets, for
	// a container with no writable file system. Read when the sink opens.
	CredsEnv, NKeyEnv, TokenEnv string
	// TLSCA, TLSCert and TLSKey are PEM files: the CA to trust, and a client
	// certificate and key.
	TLSCA, TLSCert, TLSKey string
	// Format is "cloudevents" (the default: the archive line, see
	// [event.AppendLine], with the CloudEvents attributes as ce- headers in
	// the binary content mode), "envelope" (the same without the ce-
	// headers) or "item" (the item as plain JSON). docs/MESSAGES.md
	// describes each.
	Format string
	// MaxInFlight bounds unacknowledged JetStream publishes (default 4096).
	MaxInFlight int
	// MaxPendingBytes bounds the bytes held while NATS is unreachable
	// (default 64 MiB); Write blocks beyond it.
	MaxPendingBytes int64
	// Name is the NATS client connection name (default "ttl-archiver").
	Name string
	// MsgTTL (msg-ttl=, JetStream only) sets a Nats-TTL header on every
	// message: JetStream removes it that long after storing it. Whole
	// seconds, 1s to [MaxMsgTTL], or [MsgTTLNever]; 0 sets none. The
	// stream must allow per-message TTLs (create-stream turns that on).
	MsgTTL time.Duration
	// msgTTLValue is the Nats-TTL value of MsgTTL (checkMsgTTL).
	msgTTLValue []string
}

// parseNATS reads a nats:// URL's host, user information and parameters
// into a NATSConfig, in the order: servers, subject and stream,
// authentication, message format and limits.
func parseNATS(p *params) (NATSConfig, error) {
	c := NATSConfig{}
	for _, step := range []func(*params, *NATSConfig) error{parseNATSServers, parseNATSSubject, parseNATSAuth, parseNATSDelivery} {
		if err := step(p, &c); err != nil {
			return c, err
		}
	}
	return c, p.done()
}

// parseNATSServers reads the servers from the URL's host (a comma-separated
// list) and a user and password from its user information.
func parseNATSServers(p *params, c *NATSConfig) error {
	if p.u.Path != "" && p.u.Path != "/" {
		// The path is not echoed: in nats://TOK/EN@host it is a token's tail.
		return p.fail("path", "a nats:// URL has no path (use subject=; percent-encode a '/' in a password as %2F)")
	}
	if p.u.Host == "" {
		return p.fail("host", "missing: want nats://HOST:PORT[,HOST:PORT]")
	}
	for _, h := range strings.Split(p.u.Host, ",") {
		if h == "" || strings.ContainsAny(h, "/@?#") {
			return p.fail("host", fmt.Sprintf("%q is not HOST:PORT", h))
		}
		c.Servers = append(c.Servers, "nats://"+h)
	}
	if p.u.User != nil {
		c.User = p.u.User.Username()
		c.Password, _ = p.u.User.Password()
	}
	return nil
}

// parseNATSSubject reads the subject template, its bound, JetStream and
// the stream to create (create-stream= and its limits).
func parseNATSSubject(p *params, c *NATSConfig) error {
	var err error
	if c.Subject, err = p.str("subject", "archiver.{table}.{kind}"); err != nil {
		return err
	}
	tmpl, err := parseSubject(c.Subject)
	if err != nil {
		return p.fail("subject", err.Error())
	}
	maxSubject, err := p.integer("max-subject", DefaultMaxSubject, 1, MaxMaxSubject)
	if err != nil {
		return err
	}
	c.MaxSubject = int(maxSubject)
	if _, err := tmpl.tokenBudget(c.MaxSubject); err != nil {
		return p.fail("max-subject", fmt.Sprintf("too small for subject %q: %v", c.Subject, err))
	}
	if c.JetStream, err = p.boolean("jetstream", true); err != nil {
		return err
	}
	if c.CreateStream, err = p.str("create-stream", ""); err != nil {
		return err
	}
	if c.CreateStream != "" {
		if !c.JetStream {
			return p.fail("create-stream", "needs jetstream=true")
		}
		if strings.ContainsAny(c.CreateStream, " \t\r\n.*>/\\") {
			return p.fail("create-stream", fmt.Sprintf("%q is not a valid stream name (no spaces, dots, *, >, slashes)", c.CreateStream))
		}
	}
	if c.Stream, err = parseStreamSettings(p, c.CreateStream != ""); err != nil {
		return err
	}
	return nil
}

// parseNATSAuth reads the authentication and TLS parameters and checks
// that at most one way to authenticate is given.
func parseNATSAuth(p *params, c *NATSConfig) error {
	var err error
	for _, f := range []struct {
		name string
		dst  *string
	}{{"creds", &c.Creds}, {"nkey", &c.NKey}, {"tls-ca", &c.TLSCA}, {"tls-cert", &c.TLSCert}, {"tls-key", &c.TLSKey}} {
		if *f.dst, err = p.str(f.name, ""); err != nil {
			return err
		}
	}
	if c.Token, err = p.str("token", ""); err != nil {
		return err
	}
	if err := parseNATSAuthEnv(p, c); err != nil {
		return err
	}
	if u, err := p.str("user", ""); err != nil {
		return err
	} else if u != "" {
		c.User = u
	}
	if pw, err := p.str("password", ""); err != nil {
		return err
	} else if pw != "" {
		c.Password = pw
	}
	methods := 0
	for _, s := range []string{c.Creds, c.CredsEnv, c.NKey, c.NKeyEnv, c.Token, c.TokenEnv, c.User} {
		if s != "" {
			methods++
		}
	}
	if methods > 1 {
		return p.fail("creds", "give one of creds, creds-env, nkey, nkey-env, token, token-env or user/password, not several")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return p.fail("tls-cert", "tls-cert and tls-key go together")
	}
	return nil
}

// parseNATSDelivery reads the message format, the publish limits and the
// connection's name.
func parseNATSDelivery(p *params, c *NATSConfig) error {
	var err error
	if c.Format, err = p.oneOf("format", natsmsg.DefaultFormat, natsmsg.Formats...); err != nil {
		return err
	}
	n, err := p.integer("max-in-flight", 4096, 1, 1<<20)
	if err != nil {
		return err
	}
	c.MaxInFlight = int(n)
	if c.MaxPendingBytes, err = p.size("max-pending-bytes", 64<<20, 1<<10, 16<<30); err != nil {
		return err
	}
	if c.Name, err = p.str("name", "ttl-archiver"); err != nil {
		return err
	}
	c.MsgTTL, err = parseMsgTTL(p, c.JetStream)
	return err
}

// FileConfig configures a file sink. Open fills it from
// file://DIR?file-mode=&dir-mode=&manifests=&manifest-objects=&manifest-interval=.
type FileConfig struct {
	// Dir is the directory the sink owns, created when missing. It may be
	// a symbolic link; nothing below it may (see [FileSink]).
	Dir string
	// FileMode is the permission bits of the files the sink creates
	// (default 0640), DirMode those of its folders (default 0750), set
	// exactly (the umask does not narrow them). Files keep the owner's
	// read and write, folders its read, write and search: the sink
	// reopens what it made.
	FileMode, DirMode fs.FileMode
	// Manifests is how the sink records coverage manifests (see
	// [FileSink.Record]); the zero value records with the defaults.
	Manifests ManifestConfig
}

// The file sink's default modes: the owner writes, its group reads, no
// one else looks.
const (
	DefaultFileMode fs.FileMode = 0o640
	DefaultDirMode  fs.FileMode = 0o750
)

// withDefaults fills the zero modes and checks both.
func (c FileConfig) withDefaults() (FileConfig, error) {
	if c.Dir == "" {
		return c, fmt.Errorf("file sink: Dir is empty")
	}
	if c.FileMode == 0 {
		c.FileMode = DefaultFileMode
	}
	if c.DirMode == 0 {
		c.DirMode = DefaultDirMode
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

func parseFile(p *params) (FileConfig, error) {
	c := FileConfig{}
	if p.u.User != nil || p.u.Port() != "" {
		return c, p.fail("", "want file://DIR (a directory path)")
	}
	var err error
	if c.Dir, err = FilePath(p.u); err != nil {
		return c, p.fail("path", err.Error())
	}
	if c.FileMode, err = p.mode("file-mode", DefaultFileMode, 0o600); err != nil {
		return c, err
	}
	if c.DirMode, err = p.mode("dir-mode", DefaultDirMode, 0o700); err != nil {
		return c, err
	}
	if c.Manifests, err = parseManifests(p); err != nil {
		return c, err
	}
	return c, p.done()
}

// mode reads permission bits in octal (0640, 640 or 0o640) that keep the
// owner bits in need.
func (p *params) mode(name string, def fs.FileMode, need uint64) (fs.FileMode, error) {
	v, ok, err := p.get(name)
	if err != nil || !ok {
		return def, err
	}
	n, perr := strconv.ParseUint(strings.TrimPrefix(v, "0o"), 8, 32)
	if perr != nil || v == "" {
		return 0, p.fail(name, fmt.Sprintf("%q is not an octal mode like %#o", v, def))
	}
	if problem := checkMode(n, need); problem != "" {
		return 0, p.fail(name, problem)
	}
	return fs.FileMode(n), nil
}
