package natssink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// Per-message TTL (msg-ttl=): every message carries a Nats-TTL header and
// JetStream removes it that long after storing it. nats-server 2.11 added
// it, for streams with allow_msg_ttl; a stream that lacks it refuses the
// header's messages ("per-message TTL is disabled"), a server older than
// 2.11 ignores the header, so the sink refuses both at start-up.

// MsgTTLNever is Config.MsgTTL for msg-ttl=never: Nats-TTL "never",
// a message JetStream keeps past the stream's max age (only the stream's
// size and count limits remove it).
const MsgTTLNever time.Duration = -1

// MaxMsgTTL bounds msg-ttl= (as stream-max-age= is bounded).
const MaxMsgTTL = 10 * 365 * 24 * time.Hour

// CheckMsgTTL is the preflight check of msg-ttl=: the server is 2.11 or
// later and the stream that captures the subjects allows per-message TTLs.
const CheckMsgTTL = "stream allows message TTL"

// msgTTLServerMinor is the first nats-server minor version of major 2
// that honours Nats-TTL.
const msgTTLServerMinor = 11

// parseMsgTTL reads msg-ttl= (a whole number of seconds as a Go duration,
// 1s to MaxMsgTTL, or never), which only JetStream takes.
func parseMsgTTL(p *sinkurl.Params, jetStream bool) (time.Duration, error) {
	v, ok, err := p.Get("msg-ttl")
	if err != nil || !ok {
		return 0, err
	}
	if !jetStream {
		return 0, p.Fail("msg-ttl", "needs jetstream=true (core NATS keeps no messages to expire; jetstream=false was given)")
	}
	if v == "never" {
		return MsgTTLNever, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, p.Fail("msg-ttl", fmt.Sprintf("%q is not a duration like 1h or 30m, nor never", v))
	}
	if problem := msgTTLProblem(d); problem != "" {
		return 0, p.Fail("msg-ttl", problem)
	}
	return d, nil
}

// msgTTLProblem says what is wrong with a MsgTTL other than 0 and
// MsgTTLNever ("" when nothing is).
func msgTTLProblem(d time.Duration) string {
	switch {
	case d < time.Second || d > MaxMsgTTL:
		return fmt.Sprintf("%s is out of range [1s, %s]", d, MaxMsgTTL)
	case d%time.Second != 0:
		return fmt.Sprintf("%s is not a whole number of seconds (JetStream counts message TTLs in seconds)", d)
	}
	return ""
}

// checkMsgTTL checks c.MsgTTL for [New] (a Config built by hand)
// and fills in the header value the messages share.
func checkMsgTTL(c *Config, name string) error {
	if c.MsgTTL != 0 && c.MsgTTL != MsgTTLNever {
		if problem := msgTTLProblem(c.MsgTTL); problem != "" {
			return &sinkurl.ConfigError{URL: name, Param: "msg-ttl", Problem: problem}
		}
	}
	if c.MsgTTL != 0 && !c.JetStream {
		return &sinkurl.ConfigError{URL: name, Param: "msg-ttl", Problem: "needs jetstream=true"}
	}
	c.msgTTLValue = msgTTLValue(c.MsgTTL)
	return nil
}

// msgTTLValue is the Nats-TTL header's value for d: whole seconds, as
// nats-server writes it when it rewrites the header, "never" for
// MsgTTLNever, nil for no TTL. Every message shares the one-element slice
// (nothing writes into a message's header values).
func msgTTLValue(d time.Duration) []string {
	switch d {
	case 0:
		return nil
	case MsgTTLNever:
		return []string{"never"}
	}
	return []string{strconv.FormatInt(int64(d/time.Second), 10)}
}

// setMsgTTL sets the Nats-TTL header (with msg-ttl) and returns the bytes
// nats.go writes for it.
func (s *Sink) setMsgTTL(h nats.Header) int {
	if s.c.msgTTLValue == nil {
		return 0
	}
	return setHeader(h, jetstream.MsgTTLHeader, s.c.msgTTLValue[:1:1])
}

// msgTTLHeaders is how many Nats-TTL headers a message has: 1 with
// msg-ttl, 0 without.
func (s *Sink) msgTTLHeaders() int {
	if s.c.msgTTLValue == nil {
		return 0
	}
	return 1
}

// msgTTLError is a start-up refusal of msg-ttl: the server or the stream
// cannot honour it. Preflight reports it as [CheckMsgTTL].
type msgTTLError struct{ problem string }

func (e *msgTTLError) Error() string { return "msg-ttl: " + e.problem }

// streamCheck is the preflight check that an error of checkStream failed.
func streamCheck(err error) string {
	var me *msgTTLError
	if errors.As(err, &me) {
		return CheckMsgTTL
	}
	return sinkapi.CheckStreamCaptures
}

// serverHonoursMsgTTL reports whether a nats-server of this version
// ("2.11.0", "2.12.0-RC.1") honours Nats-TTL: 2.11 or later. A version
// it cannot read is not.
func serverHonoursMsgTTL(version string) bool {
	m := serverVersion.FindStringSubmatch(version)
	if m == nil {
		return false
	}
	major, err1 := strconv.Atoi(m[1])
	minor, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return false
	}
	return major > 2 || (major == 2 && minor >= msgTTLServerMinor)
}

// serverVersion reads a nats-server version's major and minor number.
var serverVersion = regexp.MustCompile(`^v?(\d+)\.(\d+)\.\d+(?:[-+].*)?$`)

// checkMsgTTLServer refuses, with msg-ttl, a server older than 2.11: it
// would take the stream's allow_msg_ttl and the header and ignore both.
func (s *Sink) checkMsgTTLServer() error {
	if s.c.MsgTTL == 0 {
		return nil
	}
	v := s.cur().nc.ConnectedServerVersion()
	if !serverHonoursMsgTTL(v) {
		return &msgTTLError{fmt.Sprintf("nats-server %q does not honour per-message TTLs (Nats-TTL): they need nats-server 2.11 or later", v)}
	}
	return nil
}

// checkMsgTTLStream refuses, with msg-ttl, a stream that does not allow
// per-message TTLs (it would refuse every message), and one whose max age
// is shorter than msg-ttl (it would remove the messages first).
func (s *Sink) checkMsgTTLStream(ctx context.Context, stream string) error {
	if s.c.MsgTTL == 0 {
		return nil
	}
	st, err := s.cur().js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("msg-ttl: looking up stream %s: %w", stream, err)
	}
	cfg := st.CachedInfo().Config
	if !cfg.AllowMsgTTL {
		return &msgTTLError{fmt.Sprintf("stream %s does not allow per-message TTLs (allow_msg_ttl): enable allow_msg_ttl on it (nats-server cannot turn it off again) or set create-stream=%s", stream, stream)}
	}
	if cfg.MaxAge > 0 && s.c.MsgTTL > cfg.MaxAge {
		return &msgTTLError{fmt.Sprintf("%s is longer than stream %s's max age %s, which removes the messages first", s.c.MsgTTL, stream, cfg.MaxAge)}
	}
	return nil
}

// allowMsgTTL turns on, with msg-ttl, per-message TTLs in the config of
// the stream create-stream names, and reports whether it changed it: a
// WARN for an existing stream, since nats-server never turns them off
// again.
func (s *Sink) allowMsgTTL(cfg *jetstream.StreamConfig, existing bool) bool {
	if s.c.MsgTTL == 0 || cfg.AllowMsgTTL {
		return false
	}
	cfg.AllowMsgTTL = true
	if existing {
		s.log.Warn("nats: msg-ttl turns on per-message TTLs (allow_msg_ttl) in the stream create-stream names; nats-server cannot turn them off again",
			zap.String("sink", s.name), zap.String("stream", s.c.CreateStream))
	}
	return true
}
