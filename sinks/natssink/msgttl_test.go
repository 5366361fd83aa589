package natssink

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// msgTTLContractQuery is what TestMessagesContract adds to the sink URL
// of format f so that some message carries every header MESSAGES.md
// names, Nats-TTL included: the envelope format's sink sets msg-ttl, and
// its create-stream turns per-message TTLs on in the stream the test made.
func msgTTLContractQuery(f string) string {
	if f != natsmsg.FormatEnvelope {
		return ""
	}
	return "&msg-ttl=24h&create-stream=CONTRACT_" + f
}

// TestMsgTTLFromURL: msg-ttl's values, and each bad one refused naming
// msg-ttl (and jetstream for core NATS).
func TestMsgTTLFromURL(t *testing.T) {
	const base = "nats://127.0.0.1:4222?"
	good := []struct {
		query string
		want  time.Duration
		value string
	}{
		{"", 0, ""},
		{"msg-ttl=1s", time.Second, "1"},
		{"msg-ttl=1h", time.Hour, "3600"},
		{"msg-ttl=90m", 90 * time.Minute, "5400"},
		{"msg-ttl=1m30s&create-stream=S", 90 * time.Second, "90"},
		{"msg-ttl=never", MsgTTLNever, "never"},
		{"msg-ttl=87600h", MaxMsgTTL, "315360000"},
	}
	for _, tc := range good {
		t.Run(tc.query, func(t *testing.T) {
			p, err := sinkurl.Parse(base + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseConfig(p)
			if err != nil {
				t.Fatal(err)
			}
			if c.MsgTTL != tc.want {
				t.Errorf("MsgTTL %s, want %s", c.MsgTTL, tc.want)
			}
			if err := checkMsgTTL(&c, "nats://x"); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.msgTTLValue, ","); got != tc.value {
				t.Errorf("Nats-TTL %q, want %q", got, tc.value)
			}
		})
	}
	bad := []struct{ query, want string }{
		{"msg-ttl=1h&jetstream=false", "msg-ttl: needs jetstream=true"},
		{"msg-ttl=", `msg-ttl: "" is not a duration`},
		{"msg-ttl=day", `msg-ttl: "day" is not a duration like 1h or 30m, nor never`},
		{"msg-ttl=Never", `msg-ttl: "Never" is not a duration`},
		{"msg-ttl=0", "msg-ttl: 0s is out of range [1s, 87600h0m0s]"},
		{"msg-ttl=500ms", "msg-ttl: 500ms is out of range"},
		{"msg-ttl=-1h", "msg-ttl: -1h0m0s is out of range"},
		{"msg-ttl=87601h", "msg-ttl: 87601h0m0s is out of range"},
		{"msg-ttl=1.5s", "msg-ttl: 1.5s is not a whole number of seconds"},
		{"msg-ttl=1h&msg-ttl=2h", "msg-ttl: given more than once"},
		{"msg-tll=1h", "did you mean msg-ttl?"},
	}
	for _, tc := range bad {
		t.Run(tc.query, func(t *testing.T) {
			err := validateURL(base + tc.query)
			var ce *sinkurl.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validateURL: %v, want a *sinkurl.ConfigError containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckMsgTTLConfig: New refuses a hand-built MsgTTL that the
// URL would have refused.
func TestCheckMsgTTLConfig(t *testing.T) {
	tests := []struct {
		c    Config
		want string
	}{
		{Config{JetStream: true, MsgTTL: 1500 * time.Millisecond}, "not a whole number of seconds"},
		{Config{JetStream: true, MsgTTL: -2}, "out of range"},
		{Config{MsgTTL: time.Hour}, "needs jetstream=true"},
	}
	for _, tc := range tests {
		err := checkMsgTTL(&tc.c, "nats://x")
		var ce *sinkurl.ConfigError
		if !errors.As(err, &ce) || ce.Param != "msg-ttl" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a msg-ttl *sinkurl.ConfigError containing %q", tc.c.MsgTTL, err, tc.want)
		}
	}
}

// TestServerHonoursMsgTTL: nats-server 2.11 and later honour Nats-TTL;
// older ones and versions that cannot be read do not.
func TestServerHonoursMsgTTL(t *testing.T) {
	tests := []struct {
		version string
		want    bool
	}{
		{"2.11.0", true},
		{"2.11.0-RC.1", true},
		{"2.12.3", true},
		{"2.15.2", true},
		{"v2.11.4", true},
		{"3.0.0", true},
		{"2.10.29", false},
		{"2.9.0", false},
		{"1.99.0", false},
		{"", false},
		{"2.11", false},
		{"two.eleven.zero", false},
	}
	for _, tc := range tests {
		if got := serverHonoursMsgTTL(tc.version); got != tc.want {
			t.Errorf("serverHonoursMsgTTL(%q) = %v, want %v", tc.version, got, tc.want)
		}
	}
}

// TestMsgTTLHeaderCountAndSize: with msg-ttl a message has the Nats-TTL
// header headerCount counted, in the size nats.go counts.
func TestMsgTTLHeaderCountAndSize(t *testing.T) {
	tmpl, err := parseSubject("archiver.{table}.{kind}")
	if err != nil {
		t.Fatal(err)
	}
	evs := contractEvents()
	for _, f := range natsmsg.Formats {
		c := Config{Format: f, JetStream: true, MsgTTL: 36 * time.Hour}
		if err := checkMsgTTL(&c, "nats://x"); err != nil {
			t.Fatal(err)
		}
		s := &Sink{tmpl: tmpl, c: c}
		r := s.newRender(evs)
		for i := range evs {
			m, size := r.message(&evs[i])
			if got := m.Header.Get(jetstream.MsgTTLHeader); got != "129600" {
				t.Fatalf("format %s, event %d: Nats-TTL %q, want 129600", f, i, got)
			}
			if n := s.headerCount(&evs[i], m.Header.Get(natsmsg.HeaderMsgID), m.Header.Get(HeaderKeys)); len(m.Header) != n {
				t.Errorf("format %s, event %d: %d headers, headerCount %d", f, i, len(m.Header), n)
			}
			if int64(m.Size()) != size {
				t.Errorf("format %s, event %d: size %d, nats.go says %d", f, i, size, m.Size())
			}
		}
	}
}

// TestNATSMsgTTLExpires: create-stream with msg-ttl makes a stream that
// allows per-message TTLs; every message carries Nats-TTL, and JetStream
// removes them once it has passed.
func TestNATSMsgTTLExpires(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	nc, js := ns.Client(t)
	sub, err := nc.SubscribeSync("ttl.>")
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=ttl.{table}&create-stream=SHORT&msg-ttl=1s", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("t1", "s", 1, 3)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get(jetstream.MsgTTLHeader); got != "1" {
			t.Errorf("message %d: Nats-TTL %q, want 1", i, got)
		}
	}
	st, err := js.Stream(ctx, "SHORT")
	if err != nil {
		t.Fatal(err)
	}
	if !st.CachedInfo().Config.AllowMsgTTL {
		t.Fatal("create-stream with msg-ttl made a stream without allow_msg_ttl")
	}
	eventually.True(t, 30*time.Second, "the messages to expire", func() bool { return testkit.StreamCount(t, st) == 0 })
}

// TestNATSMsgTTLOnEveryMessage: on an existing stream that create-stream
// names, msg-ttl turns per-message TTLs on, and every message carries
// Nats-TTL.
func TestNATSMsgTTLOnEveryMessage(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	st := testkit.CreateStream(t, js, "KEEP", "keep.>")
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=keep.{table}.{kind}&create-stream=KEEP&msg-ttl=1h&events=all", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: contractEvents()[:7]}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Config.AllowMsgTTL {
		t.Fatal("msg-ttl with create-stream left the existing stream without allow_msg_ttl")
	}
	msgs := testkit.StreamMsgs(t, st)
	if len(msgs) != 7 {
		t.Fatalf("%d messages, want 7", len(msgs))
	}
	for _, m := range msgs {
		if got := m.Headers().Get(jetstream.MsgTTLHeader); got != "3600" {
			t.Errorf("%s: Nats-TTL %q, want 3600", m.Subject(), got)
		}
	}
}

// TestNATSMsgTTLStreamRefused: without create-stream, a stream that does
// not allow per-message TTLs, or whose max age is shorter than msg-ttl,
// is refused at start-up naming the stream and msg-ttl; one that loses
// the setting later (deleted and made again) fails the preflight's
// CheckMsgTTL.
func TestNATSMsgTTLStreamRefused(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	testkit.CreateStream(t, js, "PLAIN", "plain.>")
	_, _, err := open(ctx, "nats://"+ns.URL+"?subject=plain.{table}&msg-ttl=1h", sinkapi.Options{})
	if err == nil || !strings.Contains(err.Error(), "msg-ttl: stream PLAIN does not allow per-message TTLs") {
		t.Fatalf("Open: %v, want a refusal naming msg-ttl and stream PLAIN", err)
	}
	young := jetstream.StreamConfig{Name: "YOUNG", Subjects: []string{"young.>"}, AllowMsgTTL: true, MaxAge: time.Minute}
	if _, err := js.CreateStream(ctx, young); err != nil {
		t.Fatal(err)
	}
	_, _, err = open(ctx, "nats://"+ns.URL+"?subject=young.{table}&msg-ttl=1h", sinkapi.Options{})
	if err == nil || !strings.Contains(err.Error(), "msg-ttl: 1h0m0s is longer than stream YOUNG's max age 1m0s") {
		t.Fatalf("Open: %v, want a refusal naming msg-ttl and YOUNG's max age", err)
	}
	s, _, err := open(ctx, "nats://"+ns.URL+"?subject=young.{table}&msg-ttl=1m", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := js.DeleteStream(ctx, "YOUNG"); err != nil {
		t.Fatal(err)
	}
	testkit.CreateStream(t, js, "YOUNG", "young.>")
	err = s.(*Sink).Preflight(ctx)
	var pe *sinkapi.PreflightError
	if !errors.As(err, &pe) || pe.Check != CheckMsgTTL || !strings.Contains(err.Error(), "stream YOUNG") {
		t.Fatalf("Preflight: %v, want check %q naming stream YOUNG", err, CheckMsgTTL)
	}
}

// validateURL parses a nats:// URL as sinks.Open does: its parameters,
// then the check that none is unknown.
func validateURL(raw string) error {
	p, err := sinkurl.Parse(raw)
	if err != nil {
		return err
	}
	if _, err := ParseConfig(p); err != nil {
		return err
	}
	return p.Done()
}
