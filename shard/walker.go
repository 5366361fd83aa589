package shard

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/backoff"
)

// Walker reads streams shard by shard in lineage order. Create it with New
// and call Run once.
type Walker struct {
	o       Options
	log     *zap.Logger
	m       *metrics
	started atomic.Bool
	fails   failBook // shards whose readers keep failing (Failing)
	co      Coverage // the Processor as a Coverage; nil when it is none
}

// New checks o, fills in defaults and returns a Walker. It registers the
// walker's metrics with o.Registerer.
func New(o Options) (*Walker, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	co, _ := o.Processor.(Coverage)
	return &Walker{o: o, log: o.Logger.Named("shard"), m: newMetrics(o.Registerer), co: co}, nil
}

// Run discovers the streams and reads them until ctx ends. Then it stops
// every reader, calls Processor.ShardStopped for each (with a fresh context
// bounded by Options.StopTimeout, so they can flush) and Assigner.Release,
// and returns nil. Run returns an error only when it is called twice.
func (w *Walker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("shard: Walker.Run called twice")
	}
	wk := &walk{
		w:       w,
		o:       &w.o,
		ctx:     ctx,
		streams: map[string]*streamState{},
		readers: map[string]*reader{},
		results: make(chan result),
		wake:    make(chan struct{}, 1),
		regrant: map[string]Assignment{},

		tableList: make(chan []string),
	}
	wk.tables = tableStates(&w.o)
	for _, arn := range w.o.StreamARNs {
		if wk.streams[arn] == nil {
			st := wk.newStream(arn, TableFromStreamARN(arn), nil, true)
			wk.explicit = append(wk.explicit, st)
		}
	}
	return wk.loop()
}

// tableState is one table given by name, in one Region, and its
// streams, oldest first.
type tableState struct {
	name         string
	region       string     // "" without Options.Regions
	tables       TableAPI   // the Region's DynamoDB client
	client       StreamsAPI // the Region's Streams client
	latest       string
	streams      []*streamState
	listRejected bool
	discovered   bool
	// Tables of Options.TableSource: sourced is set on them; late, when
	// the source listed it after the walker's first look (its streams are
	// then read from TRIM_HORIZON); leaving, once the source stopped
	// listing it; deleted, once DescribeTable said it no longer exists.
	sourced, late, leaving, deleted bool
}

// streamState is what the walker knows about one stream.
type streamState struct {
	arn    string
	client StreamsAPI // the Streams client of the stream's Region
	table  string     // table name, for labels and batches
	tbl    *tableState
	label  string
	shards map[string]*shardState
	// positions are the last stored positions loaded.
	positions      map[string]Position
	positionsOK    bool
	described      bool
	fresh          bool // Start is Latest and this stream was there at the first discovery
	freshApplied   bool // the Latest start was decided (at the first positions load)
	gone           bool // ResourceNotFound: stream deleted or trimmed away entirely
	done           bool // a replaced stream read to its end: no more reading
	filterRejected bool // DescribeStream ShardFilter not supported by the endpoint
	needRefresh    bool
	// unlisted counts, for each shard outside the graph whose stored
	// position is unfinished, the descriptions in a row that left it out.
	unlisted map[string]int
}

// goneAfterMisses is how many stream descriptions in a row must leave a
// known shard out before it may be taken for trimmed away.
const goneAfterMisses = 3

// shardState is one shard of a stream. A shard taken for gone from the
// stream (trimmed away) is removed from the graph.
type shardState struct {
	Shard
	pos         Position
	hasPos      bool
	finished    bool // stored Finished, ended here, inferred from descendants, or skipped (Latest)
	running     bool
	startLatest bool // start at LATEST the first time (fresh start with Latest)
	// latestFrom is the first record a reader started at LATEST read: a
	// restart with no stored position starts there, not at TRIM_HORIZON
	// (which would re-read what the LATEST start skipped).
	latestFrom string
	started    bool
	fails      int
	retryAfter time.Time
	yieldedAt  time.Time // when its reader last gave its slot up
	missed     int       // full descriptions in a row that left this shard out
	openSeen   time.Time // when a description last listed it open (zero: never)
	closedSeen time.Time // when a description first listed it closed (zero: never)
}

// sighted books a description that listed the shard at now.
func (ss *shardState) sighted(now time.Time) {
	ss.missed = 0
	switch {
	case !ss.Closed():
		ss.openSeen = now
	case ss.closedSeen.IsZero():
		ss.closedSeen = now
	}
}

// trimmableAt is the earliest time the shard may be taken for trimmed away:
// retention after the walker first saw it closed (its records are all older
// than that), or, when it never saw it closed, after it last saw it open (it
// closed later). Before then records of the shard may still be in the
// stream, so a description that leaves it out is not to be believed.
func (ss *shardState) trimmableAt(retention time.Duration) time.Time {
	seen := ss.closedSeen
	if seen.IsZero() {
		seen = ss.openSeen
	}
	return seen.Add(retention)
}

// walk is the state of one Walker.Run; only the loop goroutine touches it.
type walk struct {
	w        *Walker
	o        *Options
	ctx      context.Context
	tables   []*tableState
	explicit []*streamState
	streams  map[string]*streamState
	readers  map[string]*reader
	results  chan result
	wake     chan struct{}
	wg       sync.WaitGroup
	// yieldCheck is set while a timer to re-check idle readers is pending.
	yieldCheck atomic.Bool
	// regrant holds assignments made for shards whose reader was still
	// releasing them; they are taken up once that reader is booked.
	regrant map[string]Assignment
	// tableList carries the TableSource's answers to the loop; tableAsk
	// is set while one is being asked for.
	tableList chan []string
	tableAsk  atomic.Bool
}

func readerKey(arn, id string) string { return arn + "|" + id }

// newStream adds a stream; fresh says it was found at the walker's first
// look at its table (or given explicitly), where a Latest start applies.
func (wk *walk) newStream(arn, table string, t *tableState, fresh bool) *streamState {
	if table == "" {
		table = arn
	}
	st := &streamState{arn: arn, table: table, tbl: t, shards: map[string]*shardState{}, label: streamLabel(arn), client: wk.o.streamsFor(arn)}
	st.fresh = wk.o.Start == Latest && fresh
	wk.streams[arn] = st
	return st
}

func streamLabel(arn string) string {
	if i := strings.LastIndex(arn, "/stream/"); i >= 0 {
		return arn[i+len("/stream/"):]
	}
	return arn
}

func (wk *walk) loop() error {
	tablesC, stopTables := wk.tableTicks()
	defer stopTables()
	if tablesC != nil {
		wk.firstTables()
	}
	wk.discoverAll()
	wk.schedule()
	tick := time.NewTicker(wk.o.DiscoveryInterval)
	defer tick.Stop()
	// With an Assigner, leases change hands between discoveries (another
	// worker stopped or handed one off): ask again often, from the shards
	// already known, so they are picked up within about AssignInterval.
	var assignC <-chan time.Time
	if wk.o.Assigner != nil && wk.o.AssignInterval < wk.o.DiscoveryInterval {
		assignTick := time.NewTicker(wk.o.AssignInterval)
		defer assignTick.Stop()
		assignC = assignTick.C
	}
	for {
		select {
		case <-wk.ctx.Done():
			wk.shutdown()
			return nil
		case <-tick.C:
			wk.discoverAll()
			wk.schedule()
		case <-assignC:
			wk.schedule()
		case <-tablesC:
			wk.fetchTables()
		case names := <-wk.tableList:
			wk.applyTables(names, true)
			wk.schedule()
		case res := <-wk.results:
			wk.handle(res)
			// Book every other reader that is done too, then schedule
			// once (Assign may be a remote call).
		more:
			for {
				select {
				case res := <-wk.results:
					wk.handle(res)
				default:
					break more
				}
			}
			wk.refreshPending()
			wk.schedule()
		case <-wk.wake:
			wk.refreshPending()
			wk.schedule()
		}
	}
}

// shutdown waits for every reader (their contexts derive from wk.ctx, which
// ended): each calls ShardStopped and Release before it reports.
func (wk *walk) shutdown() {
	wk.w.log.Info("stopping readers", zap.Int("readers", len(wk.readers)))
	for _, rd := range wk.readers {
		rd.cancel()
	}
	for len(wk.readers) > 0 {
		res := <-wk.results
		wk.forget(res.rd)
	}
	wk.wg.Wait()
	for key, a := range wk.regrant {
		if st := wk.streams[strings.TrimSuffix(key, "|"+a.ShardID)]; st != nil {
			wk.release(st, a.ShardID, false)
		}
	}
	wk.w.log.Info("stopped")
}

// poke asks the loop for a refresh-and-schedule pass after d.
func (wk *walk) poke(d time.Duration) {
	time.AfterFunc(d, func() {
		select {
		case wk.wake <- struct{}{}:
		default:
		}
	})
}

// discoverAll finds the tables' streams and refreshes every stream.
func (wk *walk) discoverAll() {
	for _, t := range wk.tables {
		if wk.ctx.Err() != nil {
			return
		}
		wk.discoverTable(t)
	}
	for _, st := range wk.allStreams() {
		if wk.ctx.Err() != nil {
			return
		}
		if !st.gone && !st.done {
			wk.refresh(st)
		}
	}
}

// allStreams lists the streams in scheduling order: explicit ones, then
// each table's streams oldest first.
func (wk *walk) allStreams() []*streamState {
	out := append([]*streamState(nil), wk.explicit...)
	for _, t := range wk.tables {
		for _, st := range t.streams {
			if st.tbl == t {
				out = append(out, st)
			}
		}
	}
	return out
}

// discoverTable reads the table's LatestStreamArn and lists its older
// streams (ListStreams, paged), oldest first.
func (wk *walk) discoverTable(t *tableState) {
	log := wk.w.log.With(zap.String("table", t.name))
	if t.region != "" {
		log = log.With(zap.String("region", t.region))
	}
	out, err := t.tables.DescribeTable(wk.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.name)})
	if err != nil {
		switch k := classify(wk.ctx, err); {
		case k == errNotFound && t.sourced:
			// Its known streams are read on; the next table refresh
			// decides whether it is let go.
			t.deleted = true
		case k != errCanceled:
			log.Warn("describe table failed", zap.Error(err))
		}
		return
	}
	t.deleted = false
	latest := ""
	if out.Table != nil {
		latest = aws.ToString(out.Table.LatestStreamArn)
	}
	var arns []foundStream
	if !t.listRejected {
		arns = wk.listStreams(t, log)
	}
	if latest == "" && len(arns) == 0 {
		if !t.discovered {
			log.Warn("table has no stream (enable DynamoDB Streams on it)")
		}
		t.discovered = true
		return
	}
	if latest != "" {
		arns = append(arns, foundStream{latest, streamLabel(latest)})
	}
	first := !t.discovered && !t.late
	t.discovered = true
	for _, f := range arns {
		if st := wk.streams[f.arn]; st != nil {
			continue
		}
		st := wk.newStream(f.arn, t.name, t, first)
		st.label = f.label
		if wk.o.Start == Latest && f.arn != latest && (first || olderThanKnown(t, f.label)) {
			// A fresh start at LATEST ignores streams the table replaced
			// before the walker first saw it (also ones a failed
			// ListStreams hid then).
			st.done = true
		}
		t.streams = append(t.streams, st)
		log.Info("stream found", zap.String("stream", f.arn))
	}
	if latest != "" && latest != t.latest && t.latest != "" {
		log.Info("table's stream replaced; the old one is read to its end first",
			zap.String("stream", latest), zap.String("old_stream", t.latest))
	}
	if latest != "" {
		t.latest = latest
	}
	sort.SliceStable(t.streams, func(i, j int) bool {
		a, b := t.streams[i], t.streams[j]
		if (a.arn == t.latest) != (b.arn == t.latest) {
			return b.arn == t.latest
		}
		return a.label < b.label
	})
}

// foundStream is a stream of a table that discovery found: its ARN and
// label.
type foundStream struct{ arn, label string }

// listStreams lists the table's streams (ListStreams, paged to its end) in
// the order ListStreams gives them. When a call fails it returns none, so
// discovery uses the table's latest stream only; a rejected call is not
// tried again for the table.
func (wk *walk) listStreams(t *tableState, log *zap.Logger) []foundStream {
	var arns []foundStream
	var start *string
	for {
		lo, err := t.client.ListStreams(wk.ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(t.name), ExclusiveStartStreamArn: start})
		if err != nil {
			k := classify(wk.ctx, err)
			if k == errRejected {
				t.listRejected = true
			}
			if k != errCanceled {
				log.Info("list streams failed, using the table's latest stream only", zap.Error(err))
			}
			return nil
		}
		for _, s := range lo.Streams {
			if aws.ToString(s.TableName) != t.name || aws.ToString(s.StreamArn) == "" {
				continue
			}
			label := aws.ToString(s.StreamLabel)
			if label == "" {
				label = streamLabel(aws.ToString(s.StreamArn))
			}
			arns = append(arns, foundStream{aws.ToString(s.StreamArn), label})
		}
		next := aws.ToString(lo.LastEvaluatedStreamArn)
		if next == "" || (start != nil && next == *start) {
			return arns
		}
		start = aws.String(next)
	}
}

// olderThanKnown reports whether a stream label sorts before a stream of
// the table the walker already knows.
func olderThanKnown(t *tableState, label string) bool {
	for _, st := range t.streams {
		if label < st.label {
			return true
		}
	}
	return false
}

// refreshPending refreshes the streams that asked for it.
func (wk *walk) refreshPending() {
	for _, st := range wk.allStreams() {
		if st.needRefresh && !st.gone && wk.ctx.Err() == nil {
			wk.refresh(st)
		}
	}
}

// refresh describes the stream to its end, loads its stored positions and
// updates the lineage graph.
func (wk *walk) refresh(st *streamState) {
	st.needRefresh = false
	shards, err := wk.describe(st, nil)
	if err != nil {
		wk.describeFailed(st, err)
		return
	}
	wk.w.m.discoveries.WithLabelValues(st.table).Inc()
	now := wk.o.Now()
	seen := make(map[string]bool, len(shards))
	for _, s := range shards {
		seen[s.ID] = true
		wk.addShard(st, s, now)
	}
	wk.markMissing(st, seen, now)
	st.described = true
	if !wk.loadPositions(st) {
		return
	}
	wk.countUnlisted(st)
	if st.fresh && !st.freshApplied {
		st.freshApplied = true
	} else {
		wk.updateDone(st)
		return
	}
	if len(st.positions) == 0 {
		// Fresh start at LATEST: what the stream already holds is skipped.
		for _, ss := range st.shards {
			if ss.Closed() {
				ss.finished = true
			} else {
				ss.startLatest = true
			}
		}
	}
	wk.updateDone(st)
}

// markMissing books the known shards a full description left out. Such a
// shard is taken for gone (trimmed away) and forgotten only when it is not
// being read, goneAfterMisses descriptions in a row left it out and, unless
// it is finished, its records could have aged out of the stream
// (trimmableAt). Until then it stays in the graph unfinished, so its
// children wait: DescribeStream may leave a live shard out now and then,
// and a child started before its parent's end skips the parent's tail for
// good (the child's checkpoint then marks the parent finished). A parent
// never listed in this run holds its children back only when its stored
// position says unfinished, and only briefly (countUnlisted).
func (wk *walk) markMissing(st *streamState, seen map[string]bool, now time.Time) {
	for id, ss := range st.shards {
		if seen[id] {
			continue
		}
		ss.missed++
		// Every miss up to the threshold, then ever more rarely.
		if !ss.finished && (ss.missed <= goneAfterMisses || ss.missed&(ss.missed-1) == 0) {
			wk.w.log.Warn("stream description omits a known unfinished shard; its children wait",
				zap.String("table", st.table), zap.String("stream", st.arn), zap.String("shard", id),
				zap.Int("missed", ss.missed), zap.Bool("closed", ss.Closed()), zap.Bool("reading", ss.running),
				zap.Time("trimmable_at", ss.trimmableAt(wk.o.StreamRetention)))
		}
		if ss.running || ss.missed < goneAfterMisses || (!ss.finished && now.Before(ss.trimmableAt(wk.o.StreamRetention))) {
			continue
		}
		if !ss.finished {
			wk.w.log.Info("shard gone from the stream (trimmed away)", zap.String("table", st.table), zap.String("stream", st.arn),
				zap.String("shard", id), zap.Int("missed", ss.missed))
		}
		delete(st.shards, id)
		if st.unlisted == nil {
			st.unlisted = map[string]int{}
		}
		st.unlisted[id] = ss.missed
	}
}

// countUnlisted counts a description that left out shards the graph does
// not hold although their stored positions say unfinished: shards this run
// never saw listed (a description right after a restart may leave one out)
// or already took for gone. Such a parent holds back its children that have
// no position of their own until goneAfterMisses descriptions in a row left
// it out (heldByUnlisted). Its age is unknown, so the retention rule cannot
// apply: it may have been trimmed long ago.
func (wk *walk) countUnlisted(st *streamState) {
	for id, n := range st.unlisted {
		if p, ok := st.positions[id]; !ok || p.Finished || st.shards[id] != nil {
			delete(st.unlisted, id)
		} else {
			st.unlisted[id] = n + 1
		}
	}
	for id, p := range st.positions {
		if _, counted := st.unlisted[id]; !counted && !p.Finished && st.shards[id] == nil {
			if st.unlisted == nil {
				st.unlisted = map[string]int{}
			}
			st.unlisted[id] = 1
		}
	}
}

// heldByUnlisted reports whether parent id, outside the graph, holds a
// shard without a position back (see countUnlisted).
func (st *streamState) heldByUnlisted(id string) bool {
	p, ok := st.positions[id]
	return ok && !p.Finished && st.unlisted[id] < goneAfterMisses
}

func (wk *walk) describeFailed(st *streamState, err error) {
	switch classify(wk.ctx, err) {
	case errCanceled:
	case errNotFound:
		wk.streamGone(st, err)
	default:
		st.needRefresh = true
		wk.poke(wk.o.MaxBackoff)
		wk.w.log.Warn("describe stream failed", zap.String("table", st.table), zap.String("stream", st.arn), zap.Error(err))
	}
}

// addShard adds a shard a description listed at now to the graph, or
// updates it.
func (wk *walk) addShard(st *streamState, s Shard, now time.Time) *shardState {
	ss := st.shards[s.ID]
	if ss == nil {
		ss = &shardState{Shard: s}
		ss.sighted(now)
		st.shards[s.ID] = ss
		if p, ok := st.positions[s.ID]; ok {
			ss.pos, ss.hasPos, ss.finished = p, true, p.Finished
		}
		wk.inferParents(st, ss)
		return ss
	}
	if s.EndingSequence != "" {
		ss.EndingSequence = s.EndingSequence
	}
	ss.sighted(now)
	return ss
}

// loadPositions loads the stream's stored positions and applies them.
func (wk *walk) loadPositions(st *streamState) bool {
	if wk.o.Positions == nil {
		st.positions, st.positionsOK = map[string]Position{}, true
		return true
	}
	pos, err := wk.o.Positions.Positions(wk.ctx, st.arn)
	if err != nil {
		if wk.ctx.Err() == nil {
			wk.w.log.Warn("loading positions failed", zap.String("table", st.table), zap.String("stream", st.arn), zap.Error(err))
			st.needRefresh = true
			wk.poke(wk.o.MaxBackoff)
		}
		return false
	}
	st.positions, st.positionsOK = pos, true
	for id, p := range pos {
		ss := st.shards[id]
		if ss == nil {
			continue
		}
		ss.pos, ss.hasPos = p, true
		if p.Finished {
			ss.finished = true
		}
	}
	for id := range pos {
		if ss := st.shards[id]; ss != nil {
			wk.inferParents(st, ss)
		}
	}
	return true
}

// inferParents marks every known ancestor of a shard with a stored position
// finished: a shard is only started after its parents were finished.
func (wk *walk) inferParents(st *streamState, ss *shardState) {
	if !ss.hasPos {
		return
	}
	seen := map[string]bool{}
	stack := append([]string(nil), ss.Parents...)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		p := st.shards[id]
		if p == nil {
			continue
		}
		if !p.finished && !p.running {
			p.finished = true
			wk.w.log.Debug("parent inferred finished from a child's position", zap.String("stream", st.arn), zap.String("shard", id), zap.String("child", ss.ID))
		}
		stack = append(stack, p.Parents...)
	}
}

// describe pages DescribeStream to its end (with filter, only the shards
// the filter selects). Throttling and transient errors are retried a few
// times with backoff.
func (wk *walk) describe(st *streamState, filter *types.ShardFilter) ([]Shard, error) {
	var out []Shard
	var start *string
	for {
		in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(st.arn), ExclusiveStartShardId: start, Limit: aws.Int32(100), ShardFilter: filter}
		var resp *dynamodbstreams.DescribeStreamOutput
		var err error
		for attempt := 0; ; attempt++ {
			resp, err = st.client.DescribeStream(wk.ctx, in)
			if err == nil {
				break
			}
			k := classify(wk.ctx, err)
			wk.w.m.errs.WithLabelValues(st.table, "DescribeStream", k.String()).Inc()
			if (k != errThrottle && k != errOther) || attempt >= 4 {
				return nil, err
			}
			if k == errThrottle {
				wk.w.m.throttles.WithLabelValues(st.table).Inc()
			}
			if !backoff.Sleep(wk.ctx, wk.o.retry().Delay(attempt)) {
				return nil, wk.ctx.Err()
			}
		}
		d := resp.StreamDescription
		if d == nil {
			return nil, fmt.Errorf("describe stream %s: response has no StreamDescription", st.arn)
		}
		for _, s := range d.Shards {
			id := aws.ToString(s.ShardId)
			if id == "" {
				continue
			}
			sh := Shard{ID: id}
			if p := aws.ToString(s.ParentShardId); p != "" {
				sh.Parents = []string{p}
			}
			if rg := s.SequenceNumberRange; rg != nil {
				sh.StartingSequence = aws.ToString(rg.StartingSequenceNumber)
				sh.EndingSequence = aws.ToString(rg.EndingSequenceNumber)
			}
			out = append(out, sh)
		}
		next := aws.ToString(d.LastEvaluatedShardId)
		if next == "" {
			return out, nil
		}
		if start != nil && next == *start {
			return nil, fmt.Errorf("describe stream %s: paging did not advance past shard %s", st.arn, next)
		}
		start = aws.String(next)
	}
}

// children finds a finished shard's children: with ShardFilter
// CHILD_SHARDS when the endpoint supports it, else by a full refresh.
func (wk *walk) children(st *streamState, id string) {
	if !st.filterRejected {
		kids, err := wk.describe(st, &types.ShardFilter{Type: types.ShardFilterTypeChildShards, ShardId: aws.String(id)})
		if err == nil {
			now := wk.o.Now()
			for _, k := range kids {
				if len(k.Parents) == 0 {
					k.Parents = []string{id}
				}
				if st.shards[k.ID] == nil {
					wk.addShard(st, k, now)
				}
			}
			if len(kids) > 0 {
				return
			}
		} else {
			switch classify(wk.ctx, err) {
			case errCanceled:
				return
			case errNotFound:
				wk.streamGone(st, err)
				return
			case errRejected:
				st.filterRejected = true
				wk.w.log.Info("endpoint rejects DescribeStream ShardFilter; finding children by full description", zap.String("stream", st.arn), zap.Error(err))
			}
		}
	}
	wk.refresh(st)
}

// streamGone stops every reader of a stream that no longer exists.
func (wk *walk) streamGone(st *streamState, err error) {
	if st.gone {
		return
	}
	st.gone, st.done = true, true
	wk.w.log.Info("stream gone, stopping its readers", zap.String("table", st.table), zap.String("stream", st.arn), zap.Error(err))
	for _, rd := range wk.readers {
		if rd.streamARN == st.arn {
			rd.cancel()
		}
	}
}

// updateDone marks a replaced stream done once every shard is finished (or
// gone, and so forgotten): the table's newer stream may then start.
func (wk *walk) updateDone(st *streamState) {
	if st.done || st.tbl == nil || st.arn == st.tbl.latest || !st.described || !st.positionsOK {
		return
	}
	for _, ss := range st.shards {
		if !ss.finished || ss.running {
			return
		}
	}
	st.done = true
	wk.w.log.Info("replaced stream read to its end", zap.String("table", st.table), zap.String("stream", st.arn))
}

// gated reports whether an older stream of the same table is still unread.
func (wk *walk) gated(st *streamState) bool {
	if st.tbl == nil {
		return false
	}
	for _, o := range st.tbl.streams {
		if o == st {
			return false
		}
		if !o.done && !o.gone {
			return true
		}
	}
	return false
}

// ready lists the stream's ready shards in lineage order: not finished,
// every known parent finished (a parent taken for gone was forgotten; one
// missing from descriptions but not yet gone holds its children back, and
// so, for a while, does an unlisted one with an unfinished stored
// position). running shards are included.
func (wk *walk) ready(st *streamState, now time.Time) []*shardState {
	if st.gone || st.done || !st.described || !st.positionsOK || wk.gated(st) || st.paused() {
		return nil
	}
	var out []*shardState
	for _, ss := range st.shards {
		if ss.finished {
			continue
		}
		if !ss.running && now.Before(ss.retryAfter) {
			continue
		}
		ok := true
		for _, p := range ss.Parents {
			ps := st.shards[p]
			if (ps != nil && !ps.finished) || (ps == nil && !ss.hasPos && st.heldByUnlisted(p)) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, ss)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		// Shards that gave their slot up go last, longest waiting first.
		if !out[i].yieldedAt.Equal(out[j].yieldedAt) {
			return out[i].yieldedAt.Before(out[j].yieldedAt)
		}
		if c := event.CompareSequence(out[i].StartingSequence, out[j].StartingSequence); c != 0 {
			return c < 0
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// schedule starts readers for ready shards, within MaxConcurrentShards and
// what the Assigner allows.
func (wk *walk) schedule() {
	if wk.ctx.Err() != nil {
		return
	}
	now := time.Now()
	waiting := 0
	defer func() {
		if waiting > 0 {
			wk.yieldIdle(waiting)
		}
	}()
	for _, st := range wk.allStreams() {
		if wk.ctx.Err() != nil {
			return
		}
		ready := wk.ready(st, now)
		if wk.o.Assigner == nil {
			waiting += wk.startReady(st, ready)
			continue
		}
		if st.gone || st.done || !st.described || !st.positionsOK || st.paused() {
			continue
		}
		waiting += wk.scheduleAssigned(st, ready, now)
	}
}

// startReady starts readers for the stream's ready shards without an
// Assigner, within MaxConcurrentShards, and returns how many ready shards
// wait for a slot.
func (wk *walk) startReady(st *streamState, ready []*shardState) (waiting int) {
	var start []*shardState
	for _, ss := range ready {
		if ss.running {
			continue
		}
		if len(wk.readers)+len(start) < wk.o.MaxConcurrentShards {
			start = append(start, ss)
		} else {
			waiting++
		}
	}
	if len(start) == 0 || !wk.reloadBeforeStart(st) {
		return waiting
	}
	for _, ss := range start {
		if !ss.finished && !ss.running {
			wk.start(st, ss, nil)
		}
	}
	return waiting
}

// scheduleAssigned asks the Assigner for the stream's ready shards and
// starts readers for what it grants and this walker may read now; it
// releases the rest and returns how many granted shards wait for a slot.
func (wk *walk) scheduleAssigned(st *streamState, ready []*shardState, now time.Time) (waiting int) {
	list := make([]Shard, len(ready))
	for i, ss := range ready {
		list[i] = ss.Shard
	}
	asg, err := wk.o.Assigner.Assign(wk.ctx, st.arn, list)
	if err != nil {
		if wk.ctx.Err() == nil {
			wk.w.log.Warn("assign failed", zap.String("table", st.table), zap.String("stream", st.arn), zap.Error(err))
		}
		asg = nil
	}
	asg = wk.withRegrants(st, asg)
	if len(asg) == 0 {
		return 0
	}
	fresh, waiting := wk.triageGrants(st, asg, wk.readyNow(st, ready, asg, now))
	if len(fresh) == 0 {
		return waiting
	}
	if !wk.reloadBeforeStart(st) {
		for _, a := range fresh {
			wk.release(st, a.ShardID, false)
		}
		return waiting
	}
	for _, a := range fresh {
		ss := st.shards[a.ShardID]
		switch {
		case ss.running:
			// Never a second reader; the first grant stands.
		case ss.finished:
			wk.release(st, a.ShardID, true)
		default:
			wk.start(st, ss, a.Ctx)
		}
	}
	return waiting
}

// withRegrants keeps one grant per shard of asg (an Assigner may repeat a
// shard, and a shard re-granted while its previous reader was releasing it
// may also come back from Assign: the newest grant wins) and adds the
// grants that arrived while the shard's previous reader was releasing it,
// now that the reader is gone.
func (wk *walk) withRegrants(st *streamState, asg []Assignment) []Assignment {
	granted := make(map[string]bool, len(asg))
	uniq := asg[:0:0]
	for _, a := range asg {
		if !granted[a.ShardID] {
			granted[a.ShardID] = true
			uniq = append(uniq, a)
		}
	}
	asg = uniq
	for key, a := range wk.regrant {
		if wk.readers[key] == nil && key == readerKey(st.arn, a.ShardID) {
			delete(wk.regrant, key)
			if !granted[a.ShardID] {
				granted[a.ShardID] = true
				asg = append(asg, a)
			}
		}
	}
	return asg
}

// readyNow returns the IDs of the stream's ready shards. The Assigner may
// know better than ready: another worker finished a parent since this
// walker last loaded positions, or a child appeared that this walker has
// not described yet. It looks again before such a shard is handed back.
func (wk *walk) readyNow(st *streamState, ready []*shardState, asg []Assignment, now time.Time) map[string]bool {
	readySet := make(map[string]bool, len(ready))
	for _, ss := range ready {
		readySet[ss.ID] = true
	}
	stale, unknown := false, false
	for _, a := range asg {
		ss := st.shards[a.ShardID]
		unknown = unknown || ss == nil
		stale = stale || (ss != nil && !ss.running && !readySet[a.ShardID])
	}
	if unknown {
		wk.refresh(st)
	} else if stale {
		wk.loadPositions(st)
	}
	if unknown || stale {
		clear(readySet)
		for _, ss := range wk.ready(st, now) {
			readySet[ss.ID] = true
		}
	}
	return readySet
}

// triageGrants sorts the grants: those of shards already being read are
// kept (or booked as a re-grant when their reader is releasing them),
// those of shards not ready and those beyond MaxConcurrentShards are
// released, and the rest are returned as fresh, with how many wait for a
// slot.
func (wk *walk) triageGrants(st *streamState, asg []Assignment, readySet map[string]bool) (fresh []Assignment, waiting int) {
	for _, a := range asg {
		ss := st.shards[a.ShardID]
		switch {
		case ss != nil && ss.running:
			// Already reading it under an earlier assignment, unless
			// that reader is letting it go right now: then this is a
			// new grant, taken up once the reader is booked.
			key := readerKey(st.arn, a.ShardID)
			if rd := wk.readers[key]; rd != nil && rd.releasing.Load() {
				wk.regrant[key] = a
				wk.poke(0)
			}
		case ss == nil || !readySet[a.ShardID]:
			wk.release(st, a.ShardID, ss != nil && ss.finished)
		case len(wk.readers)+len(fresh) >= wk.o.MaxConcurrentShards:
			waiting++
			wk.release(st, a.ShardID, false)
		default:
			fresh = append(fresh, a)
		}
	}
	return fresh, waiting
}

// yieldIdle stops up to n readers that have been caught up for IdleYield,
// longest idle first, so that shards waiting for a slot get read.
func (wk *walk) yieldIdle(n int) {
	if wk.o.IdleYield < 0 {
		return
	}
	now := time.Now()
	var cands []*reader
	for _, rd := range wk.readers {
		if rd.yielded.Load() {
			n--
			continue
		}
		if s := rd.idleSince.Load(); s != 0 && now.Sub(time.Unix(0, s)) >= wk.o.IdleYield {
			cands = append(cands, rd)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].idleSince.Load() < cands[j].idleSince.Load() })
	for i := 0; i < n && i < len(cands); i++ {
		cands[i].yielded.Store(true)
		cands[i].log.Debug("idle reader gives its slot to a waiting shard")
		cands[i].cancel()
	}
	if n > len(cands) && wk.yieldCheck.CompareAndSwap(false, true) {
		time.AfterFunc(wk.o.IdleYield/2, func() {
			wk.yieldCheck.Store(false)
			select {
			case wk.wake <- struct{}{}:
			default:
			}
		})
	}
}

// reloadBeforeStart loads the freshest positions before readers start, so a
// shard another reader (or worker) just checkpointed resumes after its
// latest checkpoint.
func (wk *walk) reloadBeforeStart(st *streamState) bool {
	if wk.o.Positions == nil {
		return true
	}
	return wk.loadPositions(st)
}

func (wk *walk) release(st *streamState, id string, finished bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(wk.ctx), wk.o.StopTimeout)
	defer cancel()
	if err := wk.o.Assigner.Release(ctx, st.arn, id, finished); err != nil {
		wk.w.log.Warn("release failed", zap.String("stream", st.arn), zap.String("shard", id), zap.Error(err))
	}
}

// start launches a reader for ss; actx (nil: none) is its assignment.
func (wk *walk) start(st *streamState, ss *shardState, actx context.Context) {
	key := readerKey(st.arn, ss.ID)
	if wk.readers[key] != nil {
		panic("shard: two readers for one shard") // unreachable: ss.running guards it
	}
	rctx, cancel := context.WithCancel(wk.ctx)
	stop := func() bool { return false }
	if actx != nil {
		stop = context.AfterFunc(actx, cancel)
	}
	rd := &reader{
		w: wk.w, table: st.table, streamARN: st.arn, streams: st.client, shard: ss.Shard, key: key,
		ctx: rctx, cancel: cancel, co: wk.w.co,
	}
	switch {
	case ss.hasPos && ss.pos.SequenceNumber != "":
		rd.startType, rd.startSeq = types.ShardIteratorTypeAfterSequenceNumber, ss.pos.SequenceNumber
	case ss.startLatest && !ss.started:
		rd.startType, rd.skipStart = types.ShardIteratorTypeLatest, SkipLatest
	case ss.startLatest && ss.latestFrom != "":
		rd.startType, rd.startSeq, rd.skipStart = types.ShardIteratorTypeAtSequenceNumber, ss.latestFrom, SkipLatest
	default:
		rd.startType, rd.probe = types.ShardIteratorTypeTrimHorizon, rd.co != nil
	}
	rd.log = wk.w.log.With(zap.String("table", st.table), zap.String("stream", st.arn), zap.String("shard", ss.ID))
	ss.running, ss.started = true, true
	wk.readers[key] = rd
	wk.w.m.active.WithLabelValues(st.table).Inc()
	rd.log.Debug("reader started", zap.String("iterator_type", string(rd.startType)), zap.String("sequence", rd.startSeq))
	wk.wg.Add(1)
	go func() {
		defer wk.wg.Done()
		res := rd.run()
		stop()
		cancel()
		wk.results <- res
	}()
}

// forget removes a stopped reader from the books.
func (wk *walk) forget(rd *reader) {
	delete(wk.readers, rd.key)
	wk.w.m.active.WithLabelValues(rd.table).Dec()
	wk.w.m.dropAge(rd.table, rd.key)
	if st := wk.streams[rd.streamARN]; st != nil {
		if ss := st.shards[rd.shard.ID]; ss != nil {
			ss.running = false
		}
	}
}

// handle books a reader's result.
func (wk *walk) handle(res result) {
	rd := res.rd
	wk.forget(rd)
	st := wk.streams[rd.streamARN]
	if st == nil {
		return
	}
	ss := st.shards[rd.shard.ID]
	if ss == nil {
		return
	}
	if rd.startType == types.ShardIteratorTypeLatest && ss.latestFrom == "" {
		ss.latestFrom = rd.firstSeq
	}
	log := rd.log
	switch res.outcome {
	case outEnded:
		ss.finished, ss.fails = true, 0
		wk.w.m.ended.WithLabelValues(st.table).Inc()
		log.Info("shard finished")
		if !st.gone && wk.ctx.Err() == nil {
			wk.children(st, ss.ID)
		}
		wk.updateDone(st)
	case outStopped:
		if rd.yielded.Load() {
			ss.yieldedAt = time.Now()
		}
		log.Debug("reader stopped", zap.Bool("yielded", rd.yielded.Load()))
	case outGone:
		log.Info("shard or stream not found, re-describing", zap.Error(res.err))
		ss.fails++
		ss.retryAfter = time.Now().Add(wk.o.retry().Delay(ss.fails - 1))
		if !st.gone && wk.ctx.Err() == nil {
			wk.refresh(st)
		}
		wk.poke(time.Until(ss.retryAfter))
	case outFailed:
		ss.fails++
		wk.w.m.failures.WithLabelValues(st.table).Inc()
		d := restartPolicy(wk.o).Delay(ss.fails - 1)
		ss.retryAfter = time.Now().Add(d)
		log.Warn("reader failed, restarting the shard later from its stored position", zap.Int("failures", ss.fails), zap.Duration("retry_in", d), zap.Error(res.err))
		st.needRefresh = true
		wk.poke(d)
	}
}
