package sweep

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/backoff"
)

// Pass makes one pass: it queries every window from the cursor to the one
// holding now, oldest first, deletes the items that are due and re-files
// those of closing windows whose TTL lies outside them, then moves the
// cursor past the windows it closed and saves it. Every
// Sweeper.windowsPerSave windows it waits for the deletes so far and
// saves the cursor, so a long catch-up keeps its progress.
//
// Pass describes the table and loads the cursor first if no pass or Run
// did. While the clock disagrees with DynamoDB's by more than
// Config.MaxClockSkew it deletes nothing, closes no window and returns
// an error matching ErrClockSkew. It returns an error when something was
// left for the next pass
// (the first failure, wrapped), when ctx ended, or when saving the
// cursor failed; the stats count what was done in any case.
func (s *Sweeper) Pass(ctx context.Context) (PassStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.prepare(ctx); err != nil {
		return PassStats{}, err
	}
	s.m.passes.Inc()
	if !s.clockOK(ctx) {
		return PassStats{Paused: true, Cursor: s.windowStart(s.cursor)}, s.paused()
	}
	p := s.newPass()
	last := windowIndex(p.nowMs, s.wms)
	contiguous := true
	var saveErr error
	for from := s.cursor; from <= last && ctx.Err() == nil; from += s.windowsPerSave {
		wins := p.sweep(ctx, from, min(from+s.windowsPerSave, last+1))
		for i := 0; contiguous && i < len(wins); i++ {
			// A pause leaves every window open: a clock that is ahead
			// would close windows DynamoDB's clock has not ended.
			if contiguous = wins[i].closing && !wins[i].unsettled.Load() && !p.paused.Load(); contiguous {
				s.cursor = wins[i].n + 1
				p.st.closed.Add(1)
			}
		}
		s.m.behind.Set(float64(max(last-s.cursor, 0)))
		s.m.cursorAge.Set(p.now.Sub(s.windowStart(s.cursor)).Seconds())
		if saveErr = s.save(ctx); saveErr != nil {
			break
		}
	}
	st := p.st.stats(s.windowStart(s.cursor))
	if st.Paused = p.paused.Load(); st.Paused {
		pauseErr := s.paused()
		if err := p.err(ctx, saveErr); err != nil {
			return st, err
		}
		return st, pauseErr
	}
	s.clock.resumed()
	if st.Windows > catchUpWindows {
		s.log.Info("sweep: caught up", zap.Int("windows", st.Windows), zap.Int("deleted", st.Deleted), zap.Time("cursor", st.Cursor))
	} else {
		s.log.Debug("sweep pass", zap.Any("stats", st))
	}
	return st, p.err(ctx, saveErr)
}

// catchUpWindows is how many windows make a pass a catch-up worth an INFO
// log: a pass in step queries the windows from the cursor (Grace behind)
// to now, a handful.
const catchUpWindows = 10

// clockOK reports whether a pass may delete: the clock agrees with
// DynamoDB's. When the latest sample says it does not, a DescribeTable
// takes a fresh one first, so deletes resume by the first pass after the
// clocks agree again.
func (s *Sweeper) clockOK(ctx context.Context) bool {
	if s.clock.trusted() {
		return true
	}
	if _, err := s.cfg.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.cfg.Table)}, s.opts...); err != nil {
		s.log.Debug("sweep: DescribeTable to check the clock failed", zap.Error(err))
	}
	return s.clock.trusted()
}

// paused counts and logs a pass that held deletes back, and returns its
// error.
func (s *Sweeper) paused() error {
	s.clock.pausing()
	skew, have := s.clock.estimate()
	if !have {
		return fmt.Errorf("%w (%v): no usable Date header seen yet", ErrClockSkew, s.cfg.MaxClockSkew)
	}
	return fmt.Errorf("%w (%v): DynamoDB's clock minus this one is %v", ErrClockSkew, s.cfg.MaxClockSkew, skew)
}

// save stores the cursor if it moved since it was loaded or last saved,
// or if none was stored.
func (s *Sweeper) save(ctx context.Context) error {
	if s.cursor == s.saved {
		return nil
	}
	c := Cursor{Window: s.windowStart(s.cursor)}
	if err := s.cfg.Cursor.SaveCursor(ctx, s.cfg.Table, c); err != nil {
		return fmt.Errorf("sweep %s: saving the cursor %s: %w", s.cfg.Table, c.Window.Format(windowLayout), err)
	}
	s.saved = s.cursor
	return nil
}

// pass is the state of one pass.
type pass struct {
	s      *Sweeper
	now    time.Time // the pass's now: the same for every query and condition
	nowMs  int64
	nowNum string   // nowMs as a DynamoDB Number of epoch seconds
	nowRat *big.Rat // the same, exactly
	// oldest is five years before now (less tooOldMargin): an older TTL
	// is one DynamoDB's TTL ignores, and the sweeper leaves it too.
	oldestNum string
	oldestRat *big.Rat

	sem    chan struct{} // one per write task in flight
	wg     sync.WaitGroup
	st     tally
	paused atomic.Bool // a delete was held back: the clock disagreed with DynamoDB's

	mu       sync.Mutex
	failures int
	first    error
}

// window is one window in a pass.
type window struct {
	n         int64       // its number: it starts at n·Window
	closing   bool        // it ended more than Grace ago: read it whole
	unsettled atomic.Bool // something in it is left for the next pass
}

func (s *Sweeper) newPass() *pass {
	now := s.cfg.Now()
	ms := now.UnixMilli()
	oldest := oldestTTL(now).UnixMilli()
	return &pass{
		s: s, now: now, nowMs: ms,
		nowNum:    epochNumber(ms),
		nowRat:    big.NewRat(ms, 1000),
		oldestNum: epochNumber(oldest),
		oldestRat: big.NewRat(oldest, 1000),
		sem:       make(chan struct{}, s.cfg.Concurrency),
	}
}

// sweep queries windows from..to-1, in all their shards, and waits for
// the writes they started.
func (p *pass) sweep(ctx context.Context, from, to int64) []window {
	wins := make([]window, to-from)
	for i := range wins {
		w := &wins[i]
		w.n = from + int64(i)
		w.closing = p.now.Sub(p.s.windowStart(w.n+1)) > p.s.cfg.Grace
		shards := p.s.cfg.WindowShards
		if shards == 1 {
			p.query(ctx, w, -1)
		}
		for k := 0; k < shards && shards > 1; k++ {
			p.query(ctx, w, k)
		}
		p.st.windows.Add(1)
	}
	p.wg.Wait()
	return wins
}

// query reads one shard of a window to its last page and starts a write
// for every item that asks for one.
func (p *pass) query(ctx context.Context, w *window, shard int) {
	key := windowKey(w.n, p.s.wms, shard)
	in := p.s.queryInput(key, w.closing, p.nowNum, p.oldestNum)
	for ctx.Err() == nil {
		var out *dynamodb.QueryOutput
		_, err := p.do(ctx, "Query", false, func(ctx context.Context) (err error) {
			out, err = p.s.cfg.Client.Query(ctx, in, p.s.opts...)
			return err
		})
		if err != nil {
			p.fail(w, fmt.Errorf("querying window %s: %w", key, err))
			return
		}
		p.st.pages.Add(1)
		for _, item := range out.Items {
			p.item(ctx, w, key, item)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	w.unsettled.Store(true)
}

// item starts what an item read from window key asks for: a delete when
// it is due, a re-file when its window is closing and its TTL lies
// outside it, nothing otherwise. An item whose TTL DynamoDB's TTL ignores
// (not a Number, or more than five years old) is counted and left where
// it is: it never becomes due, so it holds no window open.
func (p *pass) item(ctx context.Context, w *window, key string, item map[string]types.AttributeValue) {
	ttl, ok := parseTTL(item[p.s.table.ttl])
	if !ok {
		p.skip(reasonNotNumber)
		p.s.log.Debug("sweep: TTL is not a Number; left to DynamoDB's TTL", zap.String("window", key), zap.Any("ttl", item[p.s.table.ttl]))
		return
	}
	if ttl.rat.Cmp(p.oldestRat) < 0 {
		p.skip(reasonTooOld)
		p.s.log.Debug("sweep: TTL more than five years old; left to DynamoDB's TTL, which ignores it", zap.String("window", key), zap.Any("ttl", item[p.s.table.ttl]))
		return
	}
	k, err := p.s.keyOf(item)
	switch {
	case err != nil:
		p.fail(w, fmt.Errorf("window %s: %w", key, err))
	case ttl.rat.Cmp(p.nowRat) < 0:
		p.spawn(ctx, w, func(ctx context.Context) { p.delete(ctx, w, k) })
	case w.closing && windowIndex(ttl.ms, p.s.wms) != w.n:
		p.spawn(ctx, w, func(ctx context.Context) { p.refile(ctx, w, key, k, ttl) })
	}
}

// spawn runs task in a goroutine once fewer than Config.Concurrency run.
func (p *pass) spawn(ctx context.Context, w *window, task func(context.Context)) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		w.unsettled.Store(true)
		return
	}
	p.wg.Add(1)
	go func() {
		defer func() { <-p.sem; p.wg.Done() }()
		task(ctx)
	}()
}

// delete deletes a due item, on condition that its TTL is still a Number
// below the pass's now and not more than five years before the delete is
// sent (less tooOldMargin): what DynamoDB's TTL would delete.
func (p *pass) delete(ctx context.Context, w *window, key map[string]types.AttributeValue) {
	s := p.s
	if !s.clock.trusted() { // a response of this pass showed skew
		p.paused.Store(true)
		w.unsettled.Store(true)
		return
	}
	oldest := oldestTTL(s.cfg.Now())
	in := &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.cfg.Table),
		Key:                      key,
		ConditionExpression:      aws.String("attribute_type(#t, :n) AND #t < :now AND #t >= :oldest"),
		ExpressionAttributeNames: map[string]string{"#t": s.table.ttl},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":n":      &types.AttributeValueMemberS{Value: string(types.ScalarAttributeTypeN)},
			":now":    &types.AttributeValueMemberN{Value: p.nowNum},
			":oldest": &types.AttributeValueMemberN{Value: epochNumber(oldest.UnixMilli())},
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	var out *dynamodb.DeleteItemOutput
	o, err := p.do(ctx, "DeleteItem", true, func(ctx context.Context) (err error) {
		out, err = s.cfg.Client.DeleteItem(ctx, in, s.opts...)
		return err
	})
	switch {
	case o == done:
		p.st.deleted.Add(1)
		s.m.deleted.Inc()
		if ttl, ok := parseTTL(out.Attributes[s.table.ttl]); ok {
			s.m.lag.Observe(float64(s.cfg.Now().UnixMilli()-ttl.ms) / 1000)
		}
	case o == condFailed && conditionItem(err) == nil:
		p.skip(reasonGone)
	case o == condFailed && tooOld(conditionItem(err)[s.table.ttl], oldest):
		p.skip(reasonTooOld) // set to 0, say, since it was read
	case o == condFailed:
		p.skip(reasonExtended)
		// A writer that extended the TTL may have kept the window: a
		// closing window is read again to re-file the item.
		if w.closing {
			w.unsettled.Store(true)
		}
	default:
		p.fail(w, err)
	}
}

// refile moves an item of closing window key to the window of its TTL,
// on condition that neither its TTL nor its window changed meanwhile.
func (p *pass) refile(ctx context.Context, w *window, key string, item map[string]types.AttributeValue, ttl ttlValue) {
	s := p.s
	shard := -1
	if s.cfg.WindowShards > 1 {
		shard = rand.IntN(s.cfg.WindowShards)
	}
	to := windowKey(windowIndex(ttl.ms, s.wms), s.wms, shard)
	in := &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.cfg.Table),
		Key:                      item,
		UpdateExpression:         aws.String("SET #w = :to"),
		ConditionExpression:      aws.String("#t = :t AND #w = :w"),
		ExpressionAttributeNames: map[string]string{"#t": s.table.ttl, "#w": s.cfg.WindowAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": ttl.av, ":w": &types.AttributeValueMemberS{Value: key}, ":to": &types.AttributeValueMemberS{Value: to},
		},
	}
	o, err := p.do(ctx, "UpdateItem", true, func(ctx context.Context) error {
		_, err := s.cfg.Client.UpdateItem(ctx, in, s.opts...)
		return err
	})
	switch o {
	case done:
		p.st.refiled.Add(1)
		s.m.refiled.Inc()
		s.log.Debug("sweep: re-filed", zap.String("from", key), zap.String("to", to))
	case condFailed:
		w.unsettled.Store(true) // it changed: read the window again
	default:
		p.fail(w, err)
	}
}

// do makes one call, retrying throttling and transient errors with
// backoff up to Sweeper.attempts times. Writes take a token of the delete
// budget for every attempt. It returns done or condFailed with the
// call's error, or another outcome with an error saying why it gave up.
func (p *pass) do(ctx context.Context, op string, write bool, call func(context.Context) error) (outcome, error) {
	s := p.s
	for n := 0; ; n++ {
		if write && s.limit != nil {
			if err := s.limit.wait(ctx); err != nil {
				return stopped, fmt.Errorf("%s: %w", op, err)
			}
		}
		err := call(ctx)
		o := classify(ctx, err)
		switch o {
		case done, condFailed:
			return o, err
		case stopped:
			return o, fmt.Errorf("%s: %w", op, err)
		case throttled:
			p.st.throttles.Add(1)
			s.m.throttles.Inc()
		default:
			p.st.errors.Add(1)
			s.m.errors.Inc()
		}
		if o == permanent {
			return o, fmt.Errorf("%s: %w", op, err)
		}
		if n+1 >= s.attempts {
			return o, fmt.Errorf("%s: gave up for this pass after %d attempts: %w", op, n+1, err)
		}
		if !backoff.Sleep(ctx, s.retry.Delay(n)) {
			return stopped, fmt.Errorf("%s: %w (%w)", op, ctx.Err(), err)
		}
	}
}

// fail records that something in w is left for the next pass.
func (p *pass) fail(w *window, err error) {
	w.unsettled.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures++
	if p.first == nil {
		p.first = err
	}
	p.s.log.Debug("sweep: left for the next pass", zap.Error(err))
}

// skip counts an item that was not deleted.
func (p *pass) skip(reason string) {
	p.s.m.skipped.WithLabelValues(reason).Inc()
	switch reason {
	case reasonExtended:
		p.st.extended.Add(1)
	case reasonGone:
		p.st.gone.Add(1)
	case reasonNotNumber:
		p.st.notNumber.Add(1)
	case reasonTooOld:
		p.st.tooOld.Add(1)
	}
}

// err is the pass's error: ctx's, saving's, or the first failure's.
func (p *pass) err(ctx context.Context, saveErr error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	table := p.s.cfg.Table
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("sweep %s: pass cut short: %w", table, ctx.Err())
	case saveErr != nil:
		return saveErr
	case p.first != nil:
		return fmt.Errorf("sweep %s: %d items or pages left for the next pass; the first: %w", table, p.failures, p.first)
	}
	return nil
}
