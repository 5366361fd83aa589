package natssink

import (
	"fmt"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// Config configures a NATS sink. [ParseConfig] (package sinks' Open)
// fills it from
// nats://[USER:PASSWORD@]HOST:PORT[,HOST:PORT]?subject=&jetstream=&create-stream=&stream-max-age=&stream-max-bytes=&stream-max-msgs=&duplicate-window=&stream-replicas=&creds=&creds-env=&nkey=&nkey-env=&token=&token-env=&tls-ca=&tls-cert=&tls-key=&format=&max-in-flight=&max-pending-bytes=&max-subject=&name=&msg-ttl=.
type Config struct {
	// Servers are nats:// (or tls://) URLs.
	Servers []string
	// Subject is the subject template (default "archiver.{table}.{kind}"):
	// {table}, {kind} and {ATTR} for a key attribute ATTR (its S or N value)
	// are replaced per event, each by one token (see [Sink] for the
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

// ParseConfig reads a nats:// URL's host, user information and parameters
// into a Config, in the order: servers, subject and stream,
// authentication, message format and limits.
func ParseConfig(p *sinkurl.Params) (Config, error) {
	c := Config{}
	for _, step := range []func(*sinkurl.Params, *Config) error{parseNATSServers, parseNATSSubject, parseNATSAuth, parseNATSDelivery} {
		if err := step(p, &c); err != nil {
			return c, err
		}
	}
	return c, p.Done()
}

// parseNATSServers reads the servers from the URL's host (a comma-separated
// list) and a user and password from its user information.
func parseNATSServers(p *sinkurl.Params, c *Config) error {
	if p.URL.Path != "" && p.URL.Path != "/" {
		// The path is not echoed: in nats://TOK/EN@host it is a token's tail.
		return p.Fail("path", "a nats:// URL has no path (use subject=; percent-encode a '/' in a password as %2F)")
	}
	if p.URL.Host == "" {
		return p.Fail("host", "missing: want nats://HOST:PORT[,HOST:PORT]")
	}
	for _, h := range strings.Split(p.URL.Host, ",") {
		if h == "" || strings.ContainsAny(h, "/@?#") {
			return p.Fail("host", fmt.Sprintf("%q is not HOST:PORT", h))
		}
		c.Servers = append(c.Servers, "nats://"+h)
	}
	if p.URL.User != nil {
		c.User = p.URL.User.Username()
		c.Password, _ = p.URL.User.Password()
	}
	return nil
}

// parseNATSSubject reads the subject template, its bound, JetStream and
// the stream to create (create-stream= and its limits).
func parseNATSSubject(p *sinkurl.Params, c *Config) error {
	var err error
	if c.Subject, err = p.Str("subject", "archiver.{table}.{kind}"); err != nil {
		return err
	}
	tmpl, err := parseSubject(c.Subject)
	if err != nil {
		return p.Fail("subject", err.Error())
	}
	maxSubject, err := p.Int("max-subject", DefaultMaxSubject, 1, MaxMaxSubject)
	if err != nil {
		return err
	}
	c.MaxSubject = int(maxSubject)
	if _, err := tmpl.tokenBudget(c.MaxSubject); err != nil {
		return p.Fail("max-subject", fmt.Sprintf("too small for subject %q: %v", c.Subject, err))
	}
	if c.JetStream, err = p.Bool("jetstream", true); err != nil {
		return err
	}
	if c.CreateStream, err = p.Str("create-stream", ""); err != nil {
		return err
	}
	if c.CreateStream != "" {
		if !c.JetStream {
			return p.Fail("create-stream", "needs jetstream=true")
		}
		if strings.ContainsAny(c.CreateStream, " \t\r\n.*>/\\") {
			return p.Fail("create-stream", fmt.Sprintf("%q is not a valid stream name (no spaces, dots, *, >, slashes)", c.CreateStream))
		}
	}
	if c.Stream, err = parseStreamSettings(p, c.CreateStream != ""); err != nil {
		return err
	}
	return nil
}

// parseNATSAuth reads the authentication and TLS parameters and checks
// that at most one way to authenticate is given.
func parseNATSAuth(p *sinkurl.Params, c *Config) error {
	var err error
	for _, f := range []struct {
		name string
		dst  *string
	}{{"creds", &c.Creds}, {"nkey", &c.NKey}, {"tls-ca", &c.TLSCA}, {"tls-cert", &c.TLSCert}, {"tls-key", &c.TLSKey}} {
		if *f.dst, err = p.Str(f.name, ""); err != nil {
			return err
		}
	}
	if c.Token, err = p.Str("token", ""); err != nil {
		return err
	}
	if err := parseNATSAuthEnv(p, c); err != nil {
		return err
	}
	if u, err := p.Str("user", ""); err != nil {
		return err
	} else if u != "" {
		c.User = u
	}
	if pw, err := p.Str("password", ""); err != nil {
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
		return p.Fail("creds", "give one of creds, creds-env, nkey, nkey-env, token, token-env or user/password, not several")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return p.Fail("tls-cert", "tls-cert and tls-key go together")
	}
	return nil
}

// parseNATSDelivery reads the message format, the publish limits and the
// connection's name.
func parseNATSDelivery(p *sinkurl.Params, c *Config) error {
	var err error
	if c.Format, err = p.OneOf("format", natsmsg.DefaultFormat, natsmsg.Formats...); err != nil {
		return err
	}
	n, err := p.Int("max-in-flight", 4096, 1, 1<<20)
	if err != nil {
		return err
	}
	c.MaxInFlight = int(n)
	if c.MaxPendingBytes, err = p.Size("max-pending-bytes", 64<<20, 1<<10, 16<<30); err != nil {
		return err
	}
	if c.Name, err = p.Str("name", "ttl-archiver"); err != nil {
		return err
	}
	c.MsgTTL, err = parseMsgTTL(p, c.JetStream)
	return err
}
