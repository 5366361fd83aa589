package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/internal/logging"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/subscribe"
)

// tailConfig is the effective configuration of `archiver tail`.
type tailConfig struct {
	NATS        string
	Stream      string
	Since       string // a time or a duration before now, read by parseTimeFlag when tail starts
	Subject     string
	JSON        bool
	Headers     bool
	ConfigFile  string
	PrintConfig bool
	source      map[string]string
}

// tailCommand is `archiver tail`'s configuration.
var tailCommand = command[tailConfig]{name: "tail", options: tailOptions, validate: validateTailOption, check: func(*tailConfig, *cli.Problems) {}}

var tailOptions = []option[tailConfig]{
	{name: "nats", typ: "url", secret: true, usage: "the NATS server(s): nats://[USER:PASSWORD@]HOST:PORT[,HOST:PORT] or tls:// (required)",
		get: func(c *tailConfig) any { return c.NATS }, set: func(c *tailConfig, s string, _ []string, _ time.Duration) { c.NATS = s }},
	{name: "stream", usage: "the JetStream stream the archiver's nats:// sink publishes into (required)",
		get: func(c *tailConfig) any { return c.Stream }, set: func(c *tailConfig, s string, _ []string, _ time.Duration) { c.Stream = s }},
	{name: "since", typ: "time", usage: "also print the messages the stream stored at or after: " + timeFlagUsage + " (default: only new ones)",
		get: func(c *tailConfig) any { return c.Since }, set: func(c *tailConfig, s string, _ []string, _ time.Duration) { c.Since = s }},
	{name: "subject", usage: "only messages on this subject (wildcards * and > allowed), such as archiver.orders.expired (default: all the stream's)",
		get: func(c *tailConfig) any { return c.Subject }, set: func(c *tailConfig, s string, _ []string, _ time.Duration) { c.Subject = s }},
	{name: "json", boolean: true, def: "false", usage: "print one JSON object per message (the default when stdout is not a terminal)",
		get: func(c *tailConfig) any { return c.JSON }, set: func(c *tailConfig, s string, _ []string, _ time.Duration) { c.JSON = s == "true" }},
	{name: "headers", boolean: true, def: "false", usage: "also print every header of each message (Nats-Msg-Id, the Archiver- and ce- headers): indented under its line on a terminal, a \"headers\" object in JSON",
		get: func(c *tailConfig) any { return c.Headers }, set: func(c *tailConfig, s string, _ []string, _ time.Duration) { c.Headers = s == "true" }},
	{name: "config", typ: "file", noFile: true, usage: "YAML configuration file (keys are the flag names)",
		get: func(c *tailConfig) any { return c.ConfigFile }, set: func(c *tailConfig, s string, _ []string, _ time.Duration) { c.ConfigFile = s }},
	{name: "print-config", noFile: true, boolean: true, usage: "print the effective configuration (secrets masked) and exit",
		get: func(c *tailConfig) any { return c.PrintConfig }, set: func(c *tailConfig, s string, _ []string, _ time.Duration) { c.PrintConfig = s == "true" }},
}

// streamNameRE is what JetStream takes as a stream name.
var streamNameRE = regexp.MustCompile(`^[^\s.*>/\\]{1,255}$`)

// validateTailOption checks one option's value.
func validateTailOption(c *tailConfig, o option[tailConfig], from string, p *cli.Problems) {
	switch o.name {
	case "nats":
		if c.NATS == "" {
			p.Add("%s: required: the NATS server, nats://HOST:PORT", from)
			return
		}
		// nats.go reads a comma-separated list; entries after the first
		// may leave out the scheme (nats://h1:4222,h2:4222).
		for i, u := range strings.Split(c.NATS, ",") {
			scheme, _, ok := strings.Cut(u, "://")
			if (ok || i == 0) && scheme != "nats" && scheme != "tls" {
				p.Add("%s: %q: want nats://HOST:PORT or tls://HOST:PORT", from, redact.URL(u))
			}
		}
	case "stream":
		if !streamNameRE.MatchString(c.Stream) {
			p.Add("%s: %q: want the name of a JetStream stream (required; no spaces, dots, *, >, slashes)", from, c.Stream)
		}
	case "since":
		if _, err := parseTimeFlag(c.Since, time.Now()); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "subject":
		if c.Subject != "" && !validSubject(c.Subject) {
			p.Add("%s: %q is not a NATS subject (dot-separated tokens, no spaces; * and > as whole tokens)", from, c.Subject)
		}
	}
}

// validSubject reports whether s is a subject or a filter: non-empty
// tokens without whitespace, wildcards as whole tokens, > last.
func validSubject(s string) bool {
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "", strings.ContainsAny(t, " \t\r\n"):
			return false
		case t == ">" && i != len(toks)-1:
			return false
		case t != "*" && t != ">" && strings.ContainsAny(t, "*>"):
			return false
		}
	}
	return true
}

// tailCmd prints the expiries of a JetStream stream as they arrive, or
// from --since back, through an ordered consumer (ephemeral, in memory,
// deleted when tail ends). It returns nil when ctx ends (SIGINT, SIGTERM).
func tailCmd(ctx context.Context, args []string, e env) error {
	cfg := &tailConfig{}
	src, err := loadConfig(tailCommand, cfg, args, e.getenv, e.stdout)
	if err != nil {
		return err
	}
	cfg.source = src
	if cfg.PrintConfig {
		return printOptions(e.stdout, tailCommand, cfg, cfg.source)
	}
	tty := false
	if f, ok := e.stdout.(*os.File); ok && !cfg.JSON {
		tty = logging.IsTerminal(f)
	}
	return tail(ctx, cfg, &tailPrinter{out: e.stdout, errs: e.stderr, tty: tty, headers: cfg.Headers, now: time.Now})
}

// tail reads the stream until ctx ends.
func tail(ctx context.Context, cfg *tailConfig, p *tailPrinter) error {
	name := redact.URL(cfg.NATS)
	nc, err := nats.Connect(cfg.NATS, nats.Name("archiver tail"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("--nats %s: %w", name, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("--nats %s: jetstream: %w", name, err)
	}
	oc := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy, InactiveThreshold: time.Minute}
	start, err := parseTimeFlag(cfg.Since, p.now())
	if err != nil {
		return fmt.Errorf("--since: %w", err)
	}
	if !start.IsZero() {
		oc.DeliverPolicy, oc.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	if cfg.Subject != "" {
		oc.FilterSubjects = []string{cfg.Subject}
	}
	cons, err := js.OrderedConsumer(ctx, cfg.Stream, oc)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("--stream %s: %w", cfg.Stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("--stream %s: %w", cfg.Stream, err)
	}
	stopped := context.AfterFunc(ctx, it.Stop)
	defer stopped()
	defer deleteConsumer(js, cfg.Stream, cons)
	for {
		m, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil // ctx ended
		}
		if err != nil {
			return fmt.Errorf("--stream %s: %w", cfg.Stream, err)
		}
		if err := p.print(m); err != nil {
			it.Stop()
			return err
		}
	}
}

// deleteConsumer removes the ordered consumer from the server at once
// rather than after its inactivity threshold.
func deleteConsumer(js jetstream.JetStream, stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, stream, info.Name) // gone already, or it goes after InactiveThreshold
}

// tailPrinter prints one message per line: readable on a terminal, a
// JSON object otherwise. A message it cannot decode is reported on errs
// with its subject and stream sequence, and tail goes on.
type tailPrinter struct {
	out, errs io.Writer
	tty       bool
	headers   bool // --headers
	now       func() time.Time
}

// tailLine is the JSON form of a message.
type tailLine struct {
	Time          *time.Time      `json:"time,omitempty"` // deletion time of a REMOVE, the record's time otherwise
	Table         string          `json:"table"`
	Kind          string          `json:"kind"`
	EventID       string          `json:"eventID"`   // the stream record's; the message ID in the item format, which has no other
	MessageID     string          `json:"messageID"` // Nats-Msg-Id: an expiry's is the same in every Region
	Keys          json.RawMessage `json:"keys"`      // DynamoDB JSON
	TTLAttribute  string          `json:"ttlAttribute,omitempty"`
	TTLValue      string          `json:"ttlValue,omitempty"`
	TTLTime       *time.Time      `json:"ttlTime,omitempty"`
	TTLLagSeconds *float64        `json:"ttlLagSeconds,omitempty"`
	DeletedBy     string          `json:"deletedBy,omitempty"`
	Subject       string          `json:"subject"`
	Region        string          `json:"region,omitempty"`
	Shard         string          `json:"shard,omitempty"`
	Sequence      string          `json:"sequence,omitempty"`
	Format        string          `json:"format"`
	Published     time.Time       `json:"published"`         // when JetStream stored the message
	Headers       nats.Header     `json:"headers,omitempty"` // with --headers: every header, as sent
}

func (p *tailPrinter) print(m jetstream.Msg) error {
	var published time.Time
	var seq uint64
	if md, err := m.Metadata(); err == nil {
		published, seq = md.Timestamp, md.Sequence.Stream
	}
	ev, err := subscribe.DecodeJetStream(m)
	if err != nil {
		_, werr := fmt.Fprintf(p.errs, "archiver tail: message %d on %s: %v\n", seq, m.Subject(), err)
		return werr
	}
	if p.tty {
		if err := p.line(ev, published); err != nil || !p.headers {
			return err
		}
		return p.headerLines(m.Headers())
	}
	l := tailLine{Table: ev.Table, Kind: string(ev.Kind), EventID: cmp.Or(ev.EventID, ev.ID), MessageID: ev.ID, Keys: json.RawMessage(m.Headers().Get(natsmsg.HeaderKeys)),
		TTLAttribute: ev.TTLAttribute, TTLValue: ev.TTLValue, DeletedBy: ev.DeletedBy, Subject: ev.Subject,
		Region: ev.Region, Shard: ev.Shard, Sequence: ev.Sequence, Format: ev.Format, Published: published.UTC()}
	if p.headers {
		l.Headers = m.Headers()
	}
	if !ev.Time.IsZero() {
		t := ev.Time.UTC()
		l.Time = &t
	}
	if !ev.TTLTime.IsZero() {
		t, lag := ev.TTLTime.UTC(), ev.TTLLag.Seconds()
		l.TTLTime, l.TTLLagSeconds = &t, &lag
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = p.out.Write(append(b, '\n'))
	return err
}

// line prints ev as one readable line: time, kind, table, key, TTL, lag
// and who deleted it ("-" for what the message does not carry).
func (p *tailPrinter) line(ev subscribe.Event, published time.Time) error {
	when := ev.Time
	if when.IsZero() {
		when = published // the item format carries no time
	}
	ttl, lag := "-", "-"
	if !ev.TTLTime.IsZero() {
		ttl, lag = ev.TTLTime.UTC().Format(time.RFC3339), ev.TTLLag.String()
	}
	by := ev.DeletedBy
	if by == "" {
		by = "-"
	}
	_, err := fmt.Fprintf(p.out, "%s  %-8s %s  %s  ttl %s  lag %s  by %s\n",
		when.UTC().Format("2006-01-02T15:04:05.000Z"), ev.Kind, ev.Table, keyText(ev.Keys), ttl, lag, by)
	return err
}

// headerLines prints a message's headers under its line, one per line in
// name order, each value quoted when it holds spaces or characters that
// are not printable, so a hostile header cannot forge a line.
func (p *tailPrinter) headerLines(h nats.Header) error {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		for _, v := range h[k] {
			fmt.Fprintf(&b, "    %s: %s\n", quoteIfNeeded(k), quoteIfNeeded(v))
		}
	}
	_, err := io.WriteString(p.out, b.String())
	return err
}

// keyText renders key attributes as name=value pairs in name order
// (binary as base64; a name or string with spaces, '=' or characters that
// are not printable quoted, so a hostile key cannot break the line).
func keyText(keys map[string]ddb.AttributeValue) string {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteIfNeeded(k))
		b.WriteByte('=')
		switch v := keys[k].(type) {
		case *ddb.AttributeValueMemberS:
			b.WriteString(quoteIfNeeded(v.Value))
		case *ddb.AttributeValueMemberN:
			b.WriteString(v.Value)
		case *ddb.AttributeValueMemberB:
			b.WriteString(base64.StdEncoding.EncodeToString(v.Value))
		default:
			b.WriteString("?")
		}
	}
	return b.String()
}

// quoteIfNeeded is s, or s quoted in Go syntax when it is empty or holds
// a space, '=', '"' or a character that is not printable.
func quoteIfNeeded(s string) string {
	if s == "" || strings.IndexFunc(s, func(r rune) bool { return r == ' ' || r == '=' || r == '"' || !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
