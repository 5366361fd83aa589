package natssink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// The defaults of the stream create-stream makes.
//
// DefaultDuplicateWindow covers every re-publication of one message by
// the archiver: a batch that keeps failing at NATS is published again
// for up to --retry-for (15 min by default) before it is dead-lettered,
// and after a crash the unacknowledged tail is published again once a
// new task took the shard (the 20 s lease, or an ECS restart of a minute
// or two). JetStream keeps every message ID of the window in memory
// (about 100 bytes each), so the window is not longer than that.
//
// DefaultStreamMaxAge keeps a week of expiries: a subscriber that was
// down over a long weekend still finds what it missed, and the stream's
// size follows the expiry rate, not the table's history. An archive
// older than that is replayed (`archiver replay`), which de-duplicates
// against what the stream holds, whatever the window (see
// [Sink.StreamIDs]).
const (
	DefaultDuplicateWindow = 20 * time.Minute
	DefaultStreamMaxAge    = 7 * 24 * time.Hour
)

// StreamSettings are the limits of the stream create-stream makes. A zero
// MaxAge, MaxBytes or MaxMsgs is unlimited.
type StreamSettings struct {
	// MaxAge is how long the stream keeps a message (stream-max-age,
	// default [DefaultStreamMaxAge]).
	MaxAge time.Duration
	// MaxBytes and MaxMsgs bound the stream's size (stream-max-bytes,
	// stream-max-msgs, default unlimited); beyond them JetStream drops the
	// oldest messages.
	MaxBytes, MaxMsgs int64
	// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id to drop
	// its copies (duplicate-window, default [DefaultDuplicateWindow], at
	// most MaxAge).
	DuplicateWindow time.Duration
	// Replicas is the stream's replica count (stream-replicas, 1 to 5,
	// default 1).
	Replicas int
	// Given lists the settings the URL gave. A stream that already exists
	// is changed to those only; the defaults apply to a new stream.
	Given []string
}

// streamOptions are the URL parameters of [StreamSettings], in the order
// they are parsed.
var streamOptions = []string{"stream-max-age", "stream-max-bytes", "stream-max-msgs", "duplicate-window", "stream-replicas"}

// parseStreamSettings reads the stream-* and duplicate-window parameters,
// which only create-stream takes.
func parseStreamSettings(p *sinkurl.Params, create bool) (StreamSettings, error) {
	st := StreamSettings{}
	for _, name := range streamOptions {
		if p.Given(name) {
			if !create {
				return st, p.Fail(name, "needs create-stream=NAME (it sets the limits of the stream the sink creates)")
			}
			st.Given = append(st.Given, name)
		}
	}
	var err error
	if st.MaxAge, err = p.Duration("stream-max-age", DefaultStreamMaxAge, 0, 10*365*24*time.Hour); err != nil {
		return st, err
	}
	if st.MaxAge > 0 && st.MaxAge < time.Minute {
		return st, p.Fail("stream-max-age", fmt.Sprintf("%s is below 1m (0 keeps messages without an age limit)", st.MaxAge))
	}
	if st.MaxBytes, err = p.Size("stream-max-bytes", 0, 0, 1<<50); err != nil {
		return st, err
	}
	if st.MaxMsgs, err = p.Int("stream-max-msgs", 0, 0, 1<<50); err != nil {
		return st, err
	}
	window := DefaultDuplicateWindow
	if st.MaxAge > 0 && st.MaxAge < window {
		window = st.MaxAge // JetStream refuses a window longer than the age limit
	}
	if st.DuplicateWindow, err = p.Duration("duplicate-window", window, time.Second, 7*24*time.Hour); err != nil {
		return st, err
	}
	if st.MaxAge > 0 && st.DuplicateWindow > st.MaxAge {
		return st, p.Fail("duplicate-window", fmt.Sprintf("%s is longer than stream-max-age %s", st.DuplicateWindow, st.MaxAge))
	}
	n, err := p.Int("stream-replicas", 1, 1, 5)
	st.Replicas = int(n)
	return st, err
}

// apply sets in cfg the settings named in only (streamOptions: every
// one) and returns the names of those that changed.
func (st StreamSettings) apply(cfg *jetstream.StreamConfig, only []string) []string {
	unlimited := func(n int64) int64 {
		if n == 0 {
			return -1
		}
		return n
	}
	var changed []string
	set := func(name string, dst *int64, v int64) {
		if slices.Contains(only, name) && *dst != v {
			*dst, changed = v, append(changed, name)
		}
	}
	age, window, replicas := int64(cfg.MaxAge), int64(cfg.Duplicates), int64(cfg.Replicas)
	set("stream-max-age", &age, int64(st.MaxAge))
	set("stream-max-bytes", &cfg.MaxBytes, unlimited(st.MaxBytes))
	set("stream-max-msgs", &cfg.MaxMsgs, unlimited(st.MaxMsgs))
	set("duplicate-window", &window, int64(st.DuplicateWindow))
	set("stream-replicas", &replicas, int64(st.Replicas))
	cfg.MaxAge, cfg.Duplicates, cfg.Replicas = time.Duration(age), time.Duration(window), int(replicas)
	return changed
}

// createStream makes the stream CreateStream names, capturing filter,
// with c.Stream's settings. A stream of that name that exists is changed
// to the settings the URL gave, and kept as it is otherwise (with a WARN
// naming the defaults it differs from).
func (s *Sink) createStream(ctx context.Context, filter string) error {
	js := s.cur().js
	// Looked up first: nats-server may take a create of an existing
	// stream as an update to every default.
	st, err := js.Stream(ctx, s.c.CreateStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		cfg := jetstream.StreamConfig{Name: s.c.CreateStream, Subjects: []string{filter}, Storage: jetstream.FileStorage}
		s.c.Stream.apply(&cfg, streamOptions)
		s.allowMsgTTL(&cfg, false)
		if _, err = js.CreateStream(ctx, cfg); !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return err
		}
		st, err = js.Stream(ctx, s.c.CreateStream) // another process made it meanwhile
	}
	if err != nil {
		return err
	}
	have := st.CachedInfo().Config
	var kept []string
	for _, name := range s.c.Stream.apply(&jetstream.StreamConfig{MaxAge: have.MaxAge, MaxBytes: have.MaxBytes,
		MaxMsgs: have.MaxMsgs, Duplicates: have.Duplicates, Replicas: have.Replicas}, streamOptions) {
		if !slices.Contains(s.c.Stream.Given, name) {
			kept = append(kept, name)
		}
	}
	if len(kept) > 0 {
		s.log.Warn("nats: the stream create-stream names exists with settings other than the defaults; they are kept (give them in the sink URL to change them)",
			zap.String("sink", s.name), zap.String("stream", s.c.CreateStream), zap.Strings("settings", kept),
			zap.Duration("max_age", have.MaxAge), zap.Duration("duplicate_window", have.Duplicates))
	}
	changed := s.c.Stream.apply(&have, s.c.Stream.Given)
	if s.allowMsgTTL(&have, true) {
		changed = append(changed, "msg-ttl")
	}
	if len(changed) == 0 {
		return nil
	}
	if _, err := js.UpdateStream(ctx, have); err != nil {
		return fmt.Errorf("updating %s of the existing stream: %w", strings.Join(changed, ", "), err)
	}
	s.log.Info("nats: stream updated", zap.String("sink", s.name), zap.String("stream", s.c.CreateStream), zap.Strings("settings", changed))
	return nil
}

// StreamIDs is what a JetStream stream held of a sink's subjects when
// [Sink.StreamIDs] read it: the Nats-Msg-Id of each message.
type StreamIDs struct {
	// Stream is the stream's name and DuplicateWindow its duplicate window.
	Stream          string
	DuplicateWindow time.Duration
	// Read counts the messages read. Complete is false when the read
	// stopped at its bound: messages published after the last one read
	// were not looked at.
	Read     int
	Complete bool
	ids      map[string]struct{}
	hasher   *event.IDHasher
	buf      []byte
}

// Holds reports whether the stream held a message with e's Nats-Msg-Id
// (its message ID: [event.IDHasher]). It is not safe for concurrent use.
func (h *StreamIDs) Holds(e *event.Event) bool {
	if h.hasher == nil {
		h.hasher = event.NewIDHasher()
	}
	h.buf = h.hasher.AppendMessageID(h.buf[:0], e)
	_, ok := h.ids[string(h.buf)]
	return ok
}

// StreamIDs reads the Nats-Msg-Id of the messages the sink's stream holds
// on the sink's subjects, oldest first, headers only, up to max IDs (the
// memory bound: about 100 bytes each), so that a replay sends only what
// the stream lacks whatever the age of its events: JetStream itself drops
// a copy only within its duplicate window. It returns nil in core mode.
func (s *Sink) StreamIDs(ctx context.Context, max int) (*StreamIDs, error) {
	if s.core != nil {
		return nil, nil
	}
	js := s.cur().js
	st, err := js.Stream(ctx, s.stream)
	if err != nil {
		return nil, fmt.Errorf("nats sink %s: stream %s: %w", s.name, s.stream, err)
	}
	h := &StreamIDs{Stream: s.stream, DuplicateWindow: st.CachedInfo().Config.Duplicates, ids: map[string]struct{}{}}
	filter := s.tmpl.filter()
	last, err := st.GetLastMsgForSubject(ctx, filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		h.Complete = true
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nats sink %s: the last message on %s in %s: %w", s.name, filter, s.stream, err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, HeadersOnly: true})
	if err != nil {
		return nil, fmt.Errorf("nats sink %s: reading %s: %w", s.name, s.stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("nats sink %s: reading %s: %w", s.name, s.stream, err)
	}
	defer it.Stop()
	for h.Read < max {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("nats sink %s: reading %s after %d messages: %w", s.name, s.stream, h.Read, err)
		}
		h.Read++
		if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
			h.ids[id] = struct{}{}
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("nats sink %s: reading %s: %w", s.name, s.stream, err)
		}
		if md.Sequence.Stream >= last.Sequence || md.NumPending == 0 {
			h.Complete = true
			break
		}
	}
	return h, nil
}
