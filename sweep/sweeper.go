package sweep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/backoff"
)

// Sweeper deletes one table's expired items. Run sweeps until its context
// ends; Pass makes one pass. Passes never overlap: Pass waits for one in
// progress.
type Sweeper struct {
	cfg   Config
	log   *zap.Logger
	m     *metrics
	limit *bucket // nil: no cap
	wms   int64   // Config.Window in milliseconds
	clock *clockCheck
	// opts are every call's options: no SDK retries, the clock check.
	opts []func(*dynamodb.Options)

	// Retries of one call within a pass; tests shorten them.
	retry    backoff.Policy
	attempts int
	// windowsPerSave bounds how many windows a pass queries before it
	// waits for their deletes and saves the cursor, so that a long
	// catch-up keeps its progress.
	windowsPerSave int64

	mu     sync.Mutex // held by a pass
	table  *tableInfo // nil until described
	global bool       // the table's replicas were said (sayGlobal)
	loaded bool       // cursor and saved hold the stored cursor
	cursor int64      // window number of the cursor
	saved  int64      // window number last loaded or saved
}

// tableInfo is what the sweeper learnt about the table.
type tableInfo struct {
	ttl        string   // the TTL attribute
	keys       []string // the table's key attributes, hash first
	rangeIsTTL bool     // the index's range key is the TTL attribute
}

// PassStats says what one pass did.
type PassStats struct {
	Windows   int       // windows queried (each in all its shards)
	Closed    int       // windows the cursor moved past
	Pages     int       // Query pages read
	Deleted   int       // items deleted
	Extended  int       // due items whose conditional delete failed: TTL extended (or made no Number)
	Gone      int       // due items already deleted when the sweeper came
	NotNumber int       // items whose TTL is missing or not a Number: left to DynamoDB's TTL
	TooOld    int       // items whose TTL lies more than five years before now (0, negative): left to DynamoDB's TTL, which ignores them
	Refiled   int       // items moved to the window of their TTL
	Paused    bool      // deletes were held back: the clock disagreed with DynamoDB's (ErrClockSkew)
	Throttles int       // throttled calls (each retried)
	Errors    int       // calls that failed otherwise (retried, or left to the next pass)
	Cursor    time.Time // the cursor after the pass
}

// errNotSweepable marks errors about the table's set-up, which no retry
// fixes.
var errNotSweepable = errors.New("not sweepable")

// SetupError is a mismatch between the table's set-up and the sweeper's
// configuration that no retry fixes. Its message names no Config field;
// Setting names the one at fault (Index, WindowAttribute, TTLAttribute),
// for a command to name its own flag or key.
type SetupError struct {
	Setting string
	Msg     string
}

func (e *SetupError) Error() string { return e.Msg }

// Unwrap marks it as a set-up error that no retry fixes.
func (e *SetupError) Unwrap() error { return errNotSweepable }

func setupErrorf(setting, format string, a ...any) error {
	return &SetupError{Setting: setting, Msg: fmt.Sprintf(format, a...)}
}

// New returns a Sweeper for cfg. Its errors name the Config field that is
// wrong. New makes no calls: the table is described, and the cursor
// loaded, by the first Pass or by Run.
func New(cfg Config) (*Sweeper, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Sweeper{
		cfg:            cfg,
		log:            cfg.Logger.With(zap.String("table", cfg.Table)),
		m:              newMetrics(cfg.Registerer, cfg.Table),
		wms:            cfg.Window.Milliseconds(),
		retry:          backoff.Policy{Min: 50 * time.Millisecond, Max: 5 * time.Second},
		attempts:       8,
		windowsPerSave: 60,
	}
	if cfg.MaxDeletesPerSecond > 0 {
		s.limit = newBucket(cfg.MaxDeletesPerSecond)
	}
	s.clock = &clockCheck{now: cfg.Now, bound: cfg.MaxClockSkew, log: s.log, m: s.m}
	s.opts = []func(*dynamodb.Options){noSDKRetry, s.clock.option}
	return s, nil
}

// Run loads the cursor, then makes a pass every Config.Interval until ctx
// ends, and returns nil then. It returns an error only when it cannot
// start: the table is not set up for sweeping (no TTL, no such index),
// or describing it or loading the cursor kept failing. A pass that fails
// is logged and its work left to the next one. Run under the context a
// Locker holds: when the hold is lost, deleting stops at once.
func (s *Sweeper) Run(ctx context.Context) error {
	if err := s.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		st, err := s.Pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, ErrClockSkew) { // a pause logs itself, rate-limited
			s.log.Warn("sweep pass left work for the next pass", zap.Error(err), zap.Time("cursor", st.Cursor))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// start describes the table and loads the cursor afresh (another process
// may have moved it), retrying errors that may pass.
func (s *Sweeper) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.table, s.loaded = nil, false
	for n := 0; ; n++ {
		err := s.prepare(ctx)
		if err == nil || errors.Is(err, errNotSweepable) || n+1 >= s.attempts {
			return err
		}
		if o := classify(ctx, err); o != throttled && o != transient {
			return err
		}
		s.log.Warn("sweep: cannot start yet", zap.Error(err))
		if !backoff.Sleep(ctx, s.retry.Delay(n)) {
			return ctx.Err()
		}
	}
}

// prepare describes the table and loads the cursor unless done before.
func (s *Sweeper) prepare(ctx context.Context) error {
	if s.table == nil {
		t, err := s.describe(ctx)
		if err != nil {
			return err
		}
		s.table = t
	}
	if s.loaded {
		return nil
	}
	c, err := s.cfg.Cursor.LoadCursor(ctx, s.cfg.Table)
	if err != nil {
		return fmt.Errorf("sweep %s: loading the cursor: %w", s.cfg.Table, err)
	}
	start := c.Window
	if start.IsZero() {
		start = s.cfg.Now().Add(-s.cfg.Lookback)
	}
	s.cursor = windowIndex(start.UnixMilli(), s.wms)
	s.saved, s.loaded = s.cursor, true
	if c.Window.IsZero() {
		s.saved-- // nothing stored: the first pass saves where it starts
	}
	s.log.Info("sweep cursor loaded", zap.Time("stored", c.Window), zap.Time("window", s.windowStart(s.cursor)))
	return nil
}

// TTLAttributeMismatchError: Config.TTLAttribute names another attribute
// than the one the table's DynamoDB TTL is enabled on, and
// Config.TTLAttributeOverride is not set. Run and Check return it.
type TTLAttributeMismatchError struct {
	Table      string
	Enabled    string // the attribute DescribeTimeToLive names, enabled
	Configured string // Config.TTLAttribute
}

func (e *TTLAttributeMismatchError) Error() string {
	return fmt.Sprintf("sweep: table %s has DynamoDB's TTL enabled on %q, not on the configured TTL attribute %q: sweeping on %q would delete items DynamoDB's TTL does not consider expired (unless overridden)",
		e.Table, e.Enabled, e.Configured, e.Configured)
}

// Unwrap marks it as a set-up error that no retry fixes.
func (e *TTLAttributeMismatchError) Unwrap() error { return errNotSweepable }

// Check describes the table and checks that it can be swept (the TTL
// attribute, the index), with one attempt per call: a start-up check that
// fails fast, naming the table and the cause. Run and Pass check the same
// (with retries) when Check was not called.
func (s *Sweeper) Check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.describe(ctx)
	if err != nil {
		return err
	}
	s.table = t
	return nil
}

// describe learns the TTL attribute, the table's key and the index's key.
func (s *Sweeper) describe(ctx context.Context) (*tableInfo, error) {
	table, api := s.cfg.Table, s.cfg.Client
	ttl, err := s.ttlAttribute(ctx)
	if err != nil {
		return nil, err
	}
	t := &tableInfo{ttl: ttl}
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, s.opts...)
	if err == nil && out.Table == nil {
		err = errors.New("no table in the answer")
	}
	if err != nil {
		return nil, fmt.Errorf("sweep: DescribeTable %s: %w", table, err)
	}
	s.sayGlobal(out.Table)
	hash, rng := keyNames(out.Table.KeySchema)
	t.keys = append(t.keys, hash)
	if rng != "" {
		t.keys = append(t.keys, rng)
	}
	for _, ix := range out.Table.GlobalSecondaryIndexes {
		if aws.ToString(ix.IndexName) != s.cfg.Index {
			continue
		}
		hash, rng := keyNames(ix.KeySchema)
		if hash != s.cfg.WindowAttribute {
			return nil, setupErrorf("WindowAttribute", "sweep: index %s of table %s has the hash key %q, not the window attribute %q", s.cfg.Index, table, hash, s.cfg.WindowAttribute)
		}
		t.rangeIsTTL = rng == t.ttl
		if !t.rangeIsTTL && !projects(ix.Projection, t.ttl) {
			return nil, setupErrorf("Index", "sweep: index %s of table %s neither has the TTL attribute %q as its range key nor projects it", s.cfg.Index, table, t.ttl)
		}
		if !t.rangeIsTTL {
			s.log.Warn("sweep: the index's range key is not the TTL attribute: open windows are read whole and filtered", zap.String("index", s.cfg.Index), zap.String("range_key", rng))
		}
		return t, nil
	}
	return nil, setupErrorf("Index", "sweep: table %s has no global secondary index %q", table, s.cfg.Index)
}

// sayGlobal logs once that the table is a global table and who archives
// the sweeper's deletes there: they are made in this Region and replicated
// to every other as plain deletes, so only an archiver with --expired-when
// past-ttl archives them, and exactly one such archiver, in one Region,
// archives every Region's expiries once (docs/DESIGN.md, "Global tables").
func (s *Sweeper) sayGlobal(t *types.TableDescription) {
	if s.global || (aws.ToString(t.GlobalTableVersion) == "" && len(t.Replicas) == 0) {
		return
	}
	s.global = true
	var regions []string
	for _, r := range t.Replicas {
		regions = append(regions, aws.ToString(r.RegionName))
	}
	s.log.Info("sweep: the table is a global table: the sweeper's deletes are made in this Region and replicated to the others as plain deletes; "+
		"archive them with one archiver with --expired-when past-ttl in one Region, which archives every Region's expiries once "+
		"(archivers under --expired-when service archive none of the sweeper's deletes)",
		zap.String("table", s.cfg.Table), zap.Strings("replicas", regions))
}

// ttlAttribute is the attribute to sweep on: the one the table's TTL is
// enabled on, or Config.TTLAttribute when the table's TTL is off, equal,
// or Config.TTLAttributeOverride says so.
func (s *Sweeper) ttlAttribute(ctx context.Context) (string, error) {
	table := s.cfg.Table
	out, err := s.cfg.Client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)}, s.opts...)
	if err != nil {
		return "", fmt.Errorf("sweep: DescribeTimeToLive %s: %w", table, err)
	}
	var enabled string
	if d := out.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		enabled = aws.ToString(d.AttributeName)
	}
	switch want := s.cfg.TTLAttribute; {
	case want == "" && enabled == "":
		return "", setupErrorf("TTLAttribute", "sweep: table %s has no TTL enabled: enable it, or name the TTL attribute to sweep on", table)
	case want == "":
		return enabled, nil
	case enabled != "" && enabled != want && !s.cfg.TTLAttributeOverride:
		return "", &TTLAttributeMismatchError{Table: table, Enabled: enabled, Configured: want}
	case enabled != "" && enabled != want:
		s.log.Warn("sweep: sweeping on the configured TTL attribute, not the one the table's TTL is enabled on (overridden)",
			zap.String("ttl_attribute", want), zap.String("enabled_on", enabled))
	}
	return s.cfg.TTLAttribute, nil
}

// keyNames returns the hash and range attributes of a key schema.
func keyNames(schema []types.KeySchemaElement) (hash, rng string) {
	for _, k := range schema {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	return hash, rng
}

// projects reports whether an index projection includes the non-key
// attribute name.
func projects(p *types.Projection, name string) bool {
	if p == nil {
		return false
	}
	return p.ProjectionType == types.ProjectionTypeAll ||
		(p.ProjectionType == types.ProjectionTypeInclude && slices.Contains(p.NonKeyAttributes, name))
}

// windowStart is the start of window n.
func (s *Sweeper) windowStart(n int64) time.Time {
	return time.UnixMilli(n * s.wms).UTC()
}
