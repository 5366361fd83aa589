// Package natssink is the NATS sink ([Sink]): one message per event on a
// subject rendered from a template, published into JetStream streams
// with acknowledgements (at-least-once, de-duplicated by message ID) or
// on core NATS, by default as a CloudEvent in the binary content mode.
// [ParseConfig] reads a nats:// URL's parameters into a [Config]; package
// sinks opens it by URL, and its contract is package sinkapi's.
// docs/MESSAGES.md is the messages' contract.
package natssink

import (
	"context"
	"errors"
	"fmt"
	"net/textproto"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/budget"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks/internal/serial"
	"github.com/ttl-archiver/archiver/sinks/internal/sinkmetrics"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// Headers the NATS sink sets on every message besides Nats-Msg-Id (the
// message ID JetStream de-duplicates on: the stream record's event ID, or
// for an expiry with its old image the ID it has in every Region; see
// [event.IDHasher]). HeaderDeletedBy is
// set on REMOVE messages only: "dynamodb-ttl" when DynamoDB's TTL process
// deleted the item, "other" otherwise ([event.Event.DeletedBy]), so a
// subscriber tells a native expiry from a swept one without the payload;
// HeaderRegion is the Region of the stream the record was read from
// ([event.Event.Region]), on every message of an event that has one.
// They are [natsmsg]'s names, which readers import without this package;
// docs/MESSAGES.md is the contract.
const (
	HeaderTable     = natsmsg.HeaderTable
	HeaderKind      = natsmsg.HeaderKind
	HeaderKeys      = natsmsg.HeaderKeys // DynamoDB JSON of the key attributes
	HeaderShard     = natsmsg.HeaderShard
	HeaderSequence  = natsmsg.HeaderSequence
	HeaderEventName = natsmsg.HeaderEventName
	HeaderRegion    = natsmsg.HeaderRegion
	HeaderDeletedBy = natsmsg.HeaderDeletedBy
)

// Sink publishes one message per event, in the format of
// [Config.Format]; docs/MESSAGES.md describes the messages.
//
// In JetStream mode (the default) it publishes asynchronously with at most
// MaxInFlight messages awaiting acknowledgement and acknowledges a batch
// only when JetStream acknowledged every message of it (at-least-once; a
// re-published message carries the same Nats-Msg-Id, so JetStream drops the
// copy inside its duplicate window, and so does an expiry of a global
// table that another Region's archiver published: [event.IDHasher]). It publishes only into streams that
// already capture the subjects, unless CreateStream names one to create
// (with the limits of [StreamSettings]); a template no stream captures is
// an error at start-up.
//
// A message that fails (timeout, no responders while a server restarts,
// connection lost) is published again with backoff, in place, for up to
// RetryFor; only then is its batch acknowledged with the error (the
// consumer retries the batch later). While NATS is unreachable the client
// reconnects forever and messages wait in memory bounded by
// MaxPendingBytes: Write blocks beyond that (backpressure), nothing is
// dropped. Messages of one shard are published in order; a message that had
// to be re-published can land after later ones of the same shard (readers
// that need order use the Archiver-Sequence header).
//
// Subjects: each placeholder of the template becomes one token. '%', '.',
// '*', '>', whitespace, characters that are not printable and bytes that
// are not UTF-8 are percent-escaped (%XX per byte, upper-case hex); a
// missing value is "_" and the value "_" is "%5F"; binary keys are
// unpadded base64url first. The escape is injective, so two tables or keys
// never share a subject (given one placeholder per token), and plain names
// keep their subjects. A subject never exceeds MaxSubject bytes: each
// placeholder gets an equal share of what the template's literal text
// leaves, and a value whose token would be longer becomes a digest token:
// its first escaped bytes (up to 16), "%~", and the SHA-256 of the value's
// text (for binary keys, of the base64url) in unpadded base64url. The full
// key is in the Archiver-Keys header.
//
// A connection that nats-server ended with an error (a protocol line over
// its max_control_line, a repeated authorization failure) is closed for
// good by nats.go; the sink then builds a new one, with backoff, and the
// messages published meanwhile go out on it. Ready is false until then.
//
// In core mode (jetstream=false) delivery is at-most-once: a batch is
// acknowledged once the server received its messages (a flush round-trip),
// whether or not any subscriber got them.
//
// Failures are classified for the caller (see [sinkapi.ErrPermanent]). A message
// the server will never take is rejected alone: larger than the server's
// max_payload (checked against the connection's MaxPayload before it is
// published, and nats.ErrMaxPayload), larger than the stream's
// max_msg_size, or with an invalid subject or one over MaxSubject (checked
// before it is published: the server would close the connection). The rest of its batch is
// published as usual and the batch acknowledged with a [*sinkapi.RejectedError]
// listing the rejected events. A subject that no JetStream stream captures
// fails the batch with a permanent error. Timeouts, lost connections and
// servers that do not answer are never permanent.
type Sink struct {
	c      Config
	name   string
	log    *zap.Logger
	m      sinkmetrics.Sink
	tmpl   subjectTemplate
	budget *budget.Budget

	// conn is the current connection. nats.go reconnects by itself after
	// an outage, but a connection the server closed with an error (a
	// control line too long, an unknown protocol error, a repeated
	// authorization error) is closed for good: redial then builds a new
	// one and swaps it in. connMu orders the swap against Close.
	conn      atomic.Pointer[natsConn]
	opts      []nats.Option
	connMu    sync.Mutex
	connCtx   context.Context // ends when Close closes the connection
	connStop  context.CancelFunc
	redialing bool

	// JetStream mode.
	mu      sync.Mutex
	closed  bool
	writers sync.WaitGroup // Write and Flush calls in progress
	queue   chan *natsInflight
	done    chan struct{}
	// killCtx ends when Close's context ends: blocked writers and the
	// acker give up waiting.
	killCtx context.Context
	kill    context.CancelFunc
	stream  string

	// perEvent is the last batch's arena bytes per event.
	perEvent atomic.Int64

	// Core mode.
	core *serial.Queue
}

// natsConn is one NATS connection and, in JetStream mode, its JetStream
// context (publishes and their acknowledgements belong to one connection).
type natsConn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

type natsBatch struct {
	mu        sync.Mutex
	ack       sinkapi.Ack
	remaining int
	err       error
	rejected  *sinkapi.RejectedError
}

// done counts one message of the batch as finished, with err (nil:
// acknowledged by JetStream).
func (b *natsBatch) done(err error) { b.finish(-1, err) }

// reject counts message i of the batch as finished and never to be taken.
func (b *natsBatch) reject(i int, err error) { b.finish(i, err) }

func (b *natsBatch) finish(rejected int, err error) {
	b.mu.Lock()
	switch {
	case rejected >= 0:
		if b.rejected == nil {
			b.rejected = &sinkapi.RejectedError{Err: err}
		}
		b.rejected.Indexes = append(b.rejected.Indexes, rejected)
	case err != nil && b.err == nil:
		b.err = err
	}
	b.remaining--
	fire := b.remaining == 0
	ack, berr := b.ack, b.err
	if fire && berr == nil && b.rejected != nil {
		sort.Ints(b.rejected.Indexes) // the acker finishes them in order; Write may not
		berr = b.rejected
	}
	b.mu.Unlock()
	if fire {
		ack(berr)
	}
}

type natsInflight struct {
	msg   *nats.Msg
	fut   jetstream.PubAckFuture
	batch *natsBatch
	size  int64
	flush chan struct{}
	// index is the message's position in its batch; reject, when set,
	// says why it was not published and never will be.
	index  int
	reject error
}

// RetryFor is how long a NATS message is re-published before its batch
// is acknowledged with an error.
const RetryFor = 2 * time.Minute

// New connects to NATS and checks the subject template against the
// server (JetStream mode: some stream must capture it).
func New(ctx context.Context, c Config, o sinkapi.Options) (*Sink, error) {
	c, tmpl, err := checkNATSConfig(c)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		c:      c,
		name:   "nats://" + strings.Join(serverHosts(c.Servers), ","),
		log:    o.Log(),
		tmpl:   tmpl,
		budget: budget.New(c.MaxPendingBytes),
	}
	s.m = sinkmetrics.New(o.Registerer, s.name)
	if s.opts, err = s.connOptions(); err != nil {
		return nil, err
	}
	s.connCtx, s.connStop = context.WithCancel(context.Background())
	conn, err := s.connect()
	if err != nil {
		s.connStop()
		return nil, fmt.Errorf("nats sink %s: %w", s.name, err)
	}
	s.conn.Store(conn)
	if !c.JetStream {
		s.core = serial.New(64, s.writeCore, func() error { return s.drain() })
		return s, nil
	}
	if s.stream, err = s.checkStream(ctx); err != nil {
		s.drain()
		return nil, fmt.Errorf("nats sink %s: %w", s.name, err)
	}
	s.queue = make(chan *natsInflight, c.MaxInFlight)
	s.done = make(chan struct{})
	s.killCtx, s.kill = context.WithCancel(context.Background())
	go s.acker()
	return s, nil
}

// checkNATSConfig checks the subject template, the format and the subject
// bound of c, fills in the defaults of what is left zero, and returns c
// with the parsed template.
func checkNATSConfig(c Config) (Config, subjectTemplate, error) {
	name := "nats://" + strings.Join(serverHosts(c.Servers), ",")
	tmpl, err := parseSubject(c.Subject)
	if err != nil {
		return c, tmpl, &sinkurl.ConfigError{URL: name, Param: "subject", Problem: err.Error()}
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 4096
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = 64 << 20
	}
	switch c.Format {
	case "":
		c.Format = natsmsg.DefaultFormat
	case natsmsg.FormatCloudEvents, natsmsg.FormatEnvelope, natsmsg.FormatItem:
	default:
		return c, tmpl, &sinkurl.ConfigError{URL: name, Param: "format", Problem: "must be " + sinkurl.OrList(natsmsg.Formats)}
	}
	if c.Name == "" {
		c.Name = "ttl-archiver"
	}
	if c.MaxSubject <= 0 {
		c.MaxSubject = DefaultMaxSubject
	}
	if _, err := tmpl.tokenBudget(c.MaxSubject); err != nil {
		return c, tmpl, &sinkurl.ConfigError{URL: name, Param: "max-subject", Problem: err.Error()}
	}
	return c, tmpl, checkMsgTTL(&c, name)
}

// connOptions returns the NATS client's options for the sink's
// connections: reconnecting for ever with a buffer of MaxPendingBytes, the
// connection events logged, the authentication and TLS of the config.
func (s *Sink) connOptions() ([]nats.Option, error) {
	c := &s.c
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.Timeout(5 * time.Second),
		// Everything we hold is bounded by MaxPendingBytes; let the
		// client buffer that much while it reconnects.
		nats.ReconnectBufSize(int(c.MaxPendingBytes) + 1<<20),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // our own Close, not an outage
			}
			s.log.Warn("nats disconnected; events wait until it is back", zap.String("sink", s.name), zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			s.log.Info("nats reconnected", zap.String("sink", s.name), zap.String("server", nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			s.log.Warn("nats error", zap.String("sink", s.name), zap.Error(err))
		}),
		nats.ClosedHandler(s.closedByServer),
	}
	auth, err := natsAuth(*c, s.name)
	if err != nil {
		return nil, err
	}
	if auth != nil {
		opts = append(opts, auth)
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts, nil
}

// connect makes a new connection (and its JetStream context).
func (s *Sink) connect() (*natsConn, error) {
	nc, err := nats.Connect(strings.Join(s.c.Servers, ","), s.opts...)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c := &natsConn{nc: nc}
	if !s.c.JetStream {
		return c, nil
	}
	c.js, err = jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(s.c.MaxInFlight),
		jetstream.WithPublishAsyncTimeout(10*time.Second),
	)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return c, nil
}

// cur is the current connection.
func (s *Sink) cur() *natsConn { return s.conn.Load() }

// closedByServer is nats.go's ClosedHandler: when the current connection
// closed and the sink did not close it, it starts redial. nats.go closes
// for good when the server ends the connection with an error, so without
// a new connection every later publish would fail.
func (s *Sink) closedByServer(nc *nats.Conn) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.connCtx.Err() != nil || s.redialing {
		return
	}
	if c := s.cur(); c == nil || c.nc != nc {
		return // a connection already replaced, or one New gave up on
	}
	s.redialing = true
	s.log.Error("nats closed the connection for good; building a new one", zap.String("sink", s.name), zap.Error(nc.LastError()))
	go s.redial()
}

// redial builds a new connection, with backoff, until one stays open or
// Close ends connCtx, and makes it the current one. Publishes that fail
// meanwhile (connection closed) are retried and go out on the new one.
func (s *Sink) redial() {
	retry := backoff.Policy{Min: 250 * time.Millisecond, Max: 10 * time.Second}
	for n := 0; ; n++ {
		if !backoff.Sleep(s.connCtx, retry.Delay(n)) {
			return
		}
		c, err := s.connect()
		if err != nil {
			s.log.Warn("nats: building a new connection failed; trying again", zap.String("sink", s.name), zap.Error(err))
			continue
		}
		s.connMu.Lock()
		if s.connCtx.Err() != nil {
			s.connMu.Unlock()
			c.nc.Close()
			return
		}
		s.conn.Store(c)
		closed := c.nc.IsClosed() // then its ClosedHandler saw redialing and left it to us
		if !closed {
			s.redialing = false
		}
		s.connMu.Unlock()
		if !closed {
			s.log.Info("nats: new connection", zap.String("sink", s.name), zap.String("server", c.nc.ConnectedUrlRedacted()))
			return
		}
	}
}

func serverHosts(servers []string) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = strings.TrimPrefix(strings.TrimPrefix(s, "nats://"), "tls://")
	}
	return out
}

// checkStream makes sure some stream captures the template's subjects,
// creating one when CreateStream asks for it, and returns its name.
func (s *Sink) checkStream(ctx context.Context) (string, error) {
	filter := s.tmpl.filter()
	if err := s.checkMsgTTLServer(); err != nil {
		return "", err
	}
	if s.c.CreateStream != "" {
		if err := s.createStream(ctx, filter); err != nil {
			return "", fmt.Errorf("create-stream %q for subjects %q: %w", s.c.CreateStream, filter, err)
		}
	}
	name, err := s.cur().js.StreamNameBySubject(ctx, filter)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", fmt.Errorf("subject: no JetStream stream captures %q (template %q): create a stream for these subjects, set create-stream=NAME, or use jetstream=false for at-most-once core NATS", filter, s.c.Subject)
	}
	if err != nil {
		return "", fmt.Errorf("looking up the stream for %q: %w", filter, err)
	}
	return name, s.checkMsgTTLStream(ctx, name)
}

// Name is "nats://HOST:PORT[,...]" without credentials.
func (s *Sink) Name() string { return s.name }

// Stream is the JetStream stream that captures the sink's subjects ("" in
// core mode).
func (s *Sink) Stream() string { return s.stream }

// message renders one event as a NATS message.
func (s *Sink) message(e *event.Event) *nats.Msg {
	m, _ := s.newRender(nil).message(e)
	return m
}

// natsRender renders one batch's messages (Write's, writeCore's): the
// payloads, message IDs, Archiver-Keys values and encoded ce- values go
// into one arena, every header value into one backing array and the
// messages into one array, so that a batch makes a few allocations instead
// of some for every message. A message keeps pointing into them, and they
// are never written again below what was handed out, so a later message
// (even one that outgrows them and moves on to new ones) leaves it
// unchanged. They live as long as the batch's last message; the batch is
// acknowledged in order, so that is about as long as any of its messages.
type natsRender struct {
	s     *Sink
	ids   *event.IDHasher
	arena []byte
	vals  []string
	msgs  []nats.Msg
	// arn and source: the last stream ARN and its ce-source, encoded (a
	// batch holds one shard's records).
	arn    string
	source []string
	// t and time: the last ce-time and its value.
	t    time.Time
	time []string
	// ce holds the fixed ce- values (ceFixedValues), which every message's
	// header shares a slice of.
	ce [ceFixed]string
}

// newRender returns a renderer sized for evs.
func (s *Sink) newRender(evs []event.Event) *natsRender {
	n := max(len(evs), 1)
	r := &natsRender{s: s, ids: event.NewIDHasher(), arena: make([]byte, 0, s.arenaSize(evs)),
		vals: make([]string, 0, n*s.valsPerMessage()), msgs: make([]nats.Msg, 0, n)}
	if s.c.Format == natsmsg.FormatCloudEvents {
		r.ce = ceFixedValues()
	}
	return r
}

// valsPerMessage is how many header values a message of the sink's format
// usually keeps in vals: the Archiver- headers', and for cloudevents those
// ce- values that have none to share (time, subject, TTL attribute and
// value). One that keeps more takes a new chunk.
func (s *Sink) valsPerMessage() int {
	if s.c.Format == natsmsg.FormatCloudEvents {
		return len(headerNames) + 4
	}
	return len(headerNames)
}

// done records the arena's bytes per event of evs (see arenaSize).
func (r *natsRender) done(evs []event.Event) {
	if len(evs) > 0 {
		r.s.perEvent.Store(int64(len(r.arena) / len(evs)))
	}
}

// message renders one event as a NATS message and returns it with the
// bytes nats.go takes for it (subject, headers as the client encodes them,
// payload), which checkMessage and the pending budget count. An expiry's
// message ID is hashed from the bytes of the line just rendered (its Item
// and Keys); the item format renders them for it.
func (r *natsRender) message(e *event.Event) (*nats.Msg, int64) {
	s := r.s
	start := len(r.arena)
	var end, idAt int
	if s.c.Format == natsmsg.FormatItem {
		r.arena = event.AppendPlainJSON(r.arena, e.Image())
		end, idAt = len(r.arena), len(r.arena)
		r.arena = r.ids.AppendMessageID(r.arena, e)
	} else {
		r.arena, idAt = r.ids.AppendLine(r.arena, e)
		end = idAt - 1 // no newline
	}
	idEnd := len(r.arena)
	r.arena = event.AppendItem(r.arena, nonNilItem(e.Keys))
	data := r.arena[start:end:end]
	id := arenaString(r.arena[idAt:idEnd])
	keys := arenaString(r.arena[idEnd:])
	n := s.headerCount(e, id, keys)
	if cap(r.vals)-len(r.vals) < n {
		r.vals = make([]string, 0, 16*n) // more than the batch was sized for
	}
	h := make(nats.Header, n) // the exact count: a map never grows
	size := natsHeaderLine
	var own [len(headerNames)][]string
	for i, v := range [...]string{id, e.Table, string(e.Kind), keys, e.ShardID, e.SequenceNumber, e.EventName, e.Region, e.DeletedBy} {
		if i >= firstOptionalHeader && v == "" {
			continue // no Region, or not a REMOVE: no such header
		}
		own[i] = r.val(v)
		size += setHeader(h, headerNames[i], own[i])
	}
	if s.c.Format == natsmsg.FormatCloudEvents {
		size += r.appendCloudEvents(h, e, &own)
	}
	size += s.setMsgTTL(h)
	subject := s.tmpl.render(e, s.c.MaxSubject)
	if cap(r.msgs) == len(r.msgs) {
		r.msgs = make([]nats.Msg, 0, 64)
	}
	r.msgs = append(r.msgs, nats.Msg{Subject: subject, Header: h, Data: data})
	return &r.msgs[len(r.msgs)-1], int64(len(subject) + size + len(data))
}

// headerCount is how many headers the message of e, with id and keys,
// has.
func (s *Sink) headerCount(e *event.Event, id, keys string) int {
	n := firstOptionalHeader
	if e.Region != "" {
		n++
	}
	if e.DeletedBy != "" {
		n++
	}
	if s.c.Format == natsmsg.FormatCloudEvents {
		n += ceCount(e, id, keys)
	}
	return n + s.msgTTLHeaders()
}

// val is v as a one-element slice: a window on the batch's backing array,
// instead of a slice of its own.
func (r *natsRender) val(v string) []string {
	i := len(r.vals)
	r.vals = append(r.vals, v)
	return r.vals[i : i+1 : i+1]
}

// fixed is the fixed ce- value i (ceFixedValues) as a one-element slice.
func (r *natsRender) fixed(i int) []string { return r.ce[i : i+1 : i+1] }

// setHeader sets header k to vs and returns the bytes nats.go writes for
// it. The names are already in canonical form (TestHeaderNamesCanonical),
// so the value goes in directly instead of through Header.Set's
// canonicalisation and a slice of its own.
func setHeader(h nats.Header, k string, vs []string) int {
	h[k] = vs
	return len(k) + len(textproto.TrimString(vs[0])) + 4 // "K: V\r\n"
}

// natsHeaderLine is what nats.go writes around a message's headers: the
// "NATS/1.0" line and the blank line that ends them.
const natsHeaderLine = len("NATS/1.0\r\n") + len("\r\n")

// ceHeaders is how many ce- headers a message has at most.
const ceHeaders = 15

// headerNames are the headers of the messages, in the order message fills
// them; every message has those before firstOptionalHeader, and the
// others when they have a value (Archiver-Region when the event has a
// Region, Archiver-Deleted-By on REMOVEs).
var headerNames = [...]string{jetstream.MsgIDHeader, HeaderTable, HeaderKind, HeaderKeys, HeaderShard, HeaderSequence, HeaderEventName, HeaderRegion, HeaderDeletedBy}

const firstOptionalHeader = 7

func nonNilItem(i event.Item) event.Item {
	if i == nil {
		return event.Item{}
	}
	return i
}

// arenaSize is how many bytes the payloads and keys of evs likely take:
// the last batch's bytes per event, with room to spare.
func (s *Sink) arenaSize(evs []event.Event) int {
	per := s.perEvent.Load()
	if per == 0 {
		per = 1024
	}
	return len(evs) * int(per+per/8+64)
}

// Write publishes the batch's events. It blocks while MaxPendingBytes are
// held or MaxInFlight messages await acknowledgement.
func (s *Sink) Write(ctx context.Context, b sinkapi.Batch, ack sinkapi.Ack) (err error) {
	if ack == nil {
		ack = func(error) {}
	}
	if s.core != nil {
		return s.core.Write(ctx, b, ack)
	}
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	defer func() {
		if err != nil && s.killCtx.Err() != nil {
			err = fmt.Errorf("%w before the batch was taken: %v", sinkapi.ErrClosed, err)
		}
	}()
	msgs := make([]*nats.Msg, len(b.Events))
	sizes := make([]int64, len(b.Events))
	var total int64
	r := s.newRender(b.Events)
	for i := range b.Events {
		msgs[i], sizes[i] = r.message(&b.Events[i])
		total += sizes[i]
	}
	r.done(b.Events)
	if err := s.budget.Acquire(ctx, total, nil); err != nil {
		return err
	}
	s.m.Buffered.Add(float64(total))
	if len(msgs) == 0 {
		select {
		case s.queue <- &natsInflight{batch: &natsBatch{ack: ack, remaining: 1}}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	nb := &natsBatch{ack: ack, remaining: len(msgs)}
	for i, m := range msgs {
		inf := &natsInflight{msg: m, batch: nb, size: sizes[i], index: i}
		inf.fut, err = s.publish(ctx, m, sizes[i])
		if rejection(err) {
			// This message never goes; the others do. The acker reports
			// it in order with the rest of the batch.
			inf.reject, err = err, nil
		}
		if err == nil {
			select {
			case s.queue <- inf:
				continue
			case <-ctx.Done():
				err = ctx.Err()
				// fut is in flight: it completes on its own, unobserved.
			}
		}
		// Stopped part-way: the caller keeps the batch (it will write it
		// again), so the messages queued so far must not acknowledge it.
		nb.mu.Lock()
		nb.ack = func(error) {}
		nb.mu.Unlock()
		var rest int64
		for _, sz := range sizes[i:] {
			rest += sz
		}
		s.budget.Release(rest)
		s.m.Buffered.Sub(float64(rest))
		for range msgs[i:] {
			nb.done(err)
		}
		return err
	}
	return nil
}

// enter registers a Write or Flush call. The returned context also ends
// when Close gives up waiting; done must be called on return.
func (s *Sink) enter(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, sinkapi.ErrClosed
	}
	s.writers.Add(1)
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		s.writers.Done()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.killCtx, cancel)
	return ctx, func() {
		stop()
		cancel()
		s.writers.Done()
	}, nil
}

// publish starts one asynchronous publish, retrying with backoff while the
// client refuses it (stalled, reconnect buffer full). A message the server
// will never take fails at once with an error for which [rejection] holds.
func (s *Sink) publish(ctx context.Context, m *nats.Msg, size int64) (jetstream.PubAckFuture, error) {
	if err := s.checkMessage(m, size); err != nil {
		return nil, err
	}
	retry := backoff.Policy{Min: 10 * time.Millisecond, Max: time.Second}
	for n := 0; ; n++ {
		// PublishMsgAsync neither changes nor keeps m past the
		// acknowledgement. On a connection closed for good it fails with
		// nats.ErrConnectionClosed until redial swapped in a new one.
		fut, err := s.cur().js.PublishMsgAsync(m)
		if err == nil {
			return fut, nil
		}
		if rejection(err) {
			return nil, fmt.Errorf("publishing to %q: %w", m.Subject, err)
		}
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			// MaxInFlight publishes await their acks and the client
			// already waited for room: try again at once, as a backoff
			// that grows to a second would leave the window idle long
			// after the acks arrived (it halved a backlog's throughput
			// on a loaded machine).
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			s.m.Stalls.Inc()
			n = -1
			continue
		}
		s.m.Retries.Inc()
		if !backoff.Sleep(ctx, retry.Delay(n)) {
			return nil, ctx.Err()
		}
	}
}

// checkMessage refuses a message the server would not take before the
// client is given it: a subject that is not valid or longer than
// max-subject (a server that gets a PUB line over its max_control_line
// closes the connection), or a message larger than the server's
// max_payload (the client would refuse it too; a server that gets one
// closes the connection). size is the message's size as natsRender.message
// returned it: nats.go's Size would walk the headers once more.
func (s *Sink) checkMessage(m *nats.Msg, size int64) error {
	if err := validSubject(m.Subject, s.c.MaxSubject); err != nil {
		return fmt.Errorf("publishing to %.200q: %w", m.Subject, err)
	}
	max := s.cur().nc.MaxPayload()
	if n := size - int64(len(m.Subject)); max > 0 && n > max {
		return fmt.Errorf("publishing to %q: %w: %d bytes with headers, the server's max_payload is %d", m.Subject, nats.ErrMaxPayload, n, max)
	}
	return nil
}

// rejection reports whether a publish failed for a reason that concerns
// only that message and that publishing it again never fixes: larger than
// the server's max_payload or the stream's max_msg_size, or an invalid
// subject.
func rejection(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
		return true
	}
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}

// acker waits for every publish's acknowledgement in order, re-publishes
// failures, and acknowledges batches.
func (s *Sink) acker() {
	defer close(s.done)
	for inf := range s.queue {
		switch {
		case inf.flush != nil:
			close(inf.flush)
		case inf.reject != nil:
			s.budget.Release(inf.size)
			s.m.Buffered.Sub(float64(inf.size))
			inf.batch.reject(inf.index, inf.reject)
		case inf.msg == nil:
			inf.batch.done(nil)
		default:
			err := s.await(inf)
			s.budget.Release(inf.size)
			s.m.Buffered.Sub(float64(inf.size))
			if err == nil {
				s.m.Objects.Inc()
				s.m.Bytes.Add(float64(len(inf.msg.Data)))
			}
			if rejection(err) {
				inf.batch.reject(inf.index, err)
			} else {
				inf.batch.done(err)
			}
		}
	}
}

func (s *Sink) await(inf *natsInflight) error {
	start := time.Now()
	retry := backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	attempt := 0
	fut := inf.fut
	for {
		var err error
		select {
		case <-fut.Ok():
			return nil
		case err = <-fut.Err():
		case <-s.killCtx.Done():
			return fmt.Errorf("nats sink closed before JetStream acknowledged %q", inf.msg.Subject)
		}
		if rejection(err) {
			return fmt.Errorf("publishing to %q: %w", inf.msg.Subject, err)
		}
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
			if fatal := s.uncaptured(inf.msg.Subject); fatal != nil {
				return fatal
			}
		}
		if time.Since(start) > RetryFor {
			return fmt.Errorf("publishing to %q: gave up after %s: %w", inf.msg.Subject, RetryFor, err)
		}
		s.log.Debug("nats publish failed; publishing again", zap.String("subject", inf.msg.Subject), zap.Error(err))
		for {
			s.m.Retries.Inc()
			if !backoff.Sleep(s.killCtx, retry.Delay(attempt)) {
				return fmt.Errorf("nats sink closed before JetStream acknowledged %q", inf.msg.Subject)
			}
			attempt++
			var perr error
			fut, perr = s.cur().js.PublishMsgAsync(&nats.Msg{Subject: inf.msg.Subject, Header: inf.msg.Header, Data: inf.msg.Data})
			if perr == nil {
				break
			}
			if rejection(perr) || time.Since(start) > RetryFor {
				return fmt.Errorf("publishing to %q: %w", inf.msg.Subject, perr)
			}
		}
	}
}

// uncaptured returns a permanent error when JetStream answers and no
// stream captures subject (a misconfiguration rather than a restarting
// server).
func (s *Sink) uncaptured(subject string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.cur().js.StreamNameBySubject(ctx, subject); errors.Is(err, jetstream.ErrStreamNotFound) {
		return sinkapi.Permanent(fmt.Errorf("publishing to %q: no JetStream stream captures this subject: %w", subject, err))
	}
	return nil
}

// Flush returns once every batch written before it was acknowledged.
func (s *Sink) Flush(ctx context.Context) error {
	if s.core != nil {
		return s.core.Flush(ctx)
	}
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	ch := make(chan struct{})
	select {
	case s.queue <- &natsInflight{flush: ch}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops taking batches and waits for every outstanding
// acknowledgement, then closes the connection. When ctx ends first, Writes
// still blocked return an error and the batches still unacknowledged are
// acknowledged with an error (the consumer keeps them).
func (s *Sink) Close(ctx context.Context) error {
	if s.core != nil {
		return s.core.Close(ctx)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var err error
	writersDone := make(chan struct{})
	go func() {
		s.writers.Wait()
		close(writersDone)
	}()
	select {
	case <-writersDone:
	case <-ctx.Done():
		s.kill()
		<-writersDone
		err = ctx.Err()
	}
	close(s.queue)
	select {
	case <-s.done:
	case <-ctx.Done():
		s.kill()
		<-s.done
		err = ctx.Err()
	}
	s.kill()
	s.drain()
	return err
}

// writeCore publishes batches on core NATS and acknowledges them once the
// server confirmed receipt with a flush round-trip. Messages the server
// would never take are left out, and their batches acknowledged with a
// [sinkapi.RejectedError] listing them.
func (s *Sink) writeCore(reqs []serial.Req) []error {
	errs := make([]error, len(reqs))
	var n int
	var bytes int64
	var err error
	c := s.cur() // a connection closed for good fails these batches; they come again on the next
publish:
	for ri, r := range reqs {
		render := s.newRender(r.Batch.Events)
		for i := range r.Batch.Events {
			m, size := render.message(&r.Batch.Events[i])
			if err = s.checkMessage(m, size); err == nil {
				err = c.nc.PublishMsg(m)
			}
			if rejection(err) {
				errs[ri] = sinkapi.AddRejected(errs[ri], i, fmt.Errorf("nats sink %s: %w", s.name, err))
				err = nil
				continue
			}
			if err != nil {
				break publish
			}
			n++
			bytes += int64(len(m.Data))
		}
		render.done(r.Batch.Events)
	}
	if err == nil {
		err = c.nc.FlushTimeout(10 * time.Second)
	}
	if err != nil {
		err = fmt.Errorf("nats sink %s: %w", s.name, err)
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	s.m.Objects.Add(float64(n))
	s.m.Bytes.Add(float64(bytes))
	return errs
}

// drain closes the current connection and stops redial for good.
func (s *Sink) drain() error {
	s.connMu.Lock()
	s.connStop()
	c := s.cur()
	s.connMu.Unlock()
	if c != nil {
		c.nc.Close()
	}
	return nil
}

// Ready reports whether the sink is connected to NATS. While it is not,
// events wait (Write blocks once the buffer is full) and nothing is lost,
// but the archiver should say it is not delivering: /readyz uses this. A
// connection the server closed for good is unready until redial's new
// connection is up.
func (s *Sink) Ready() error {
	switch st := s.cur().nc.Status(); st {
	case nats.CONNECTED:
		return nil
	case nats.CLOSED:
		return fmt.Errorf("sink %s: nats closed the connection; building a new one", s.name)
	default:
		return fmt.Errorf("sink %s: nats is %s", s.name, strings.ToLower(st.String()))
	}
}
