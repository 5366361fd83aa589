package shard

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"
)

// TableSource tells a walker, while it runs, which tables to read besides
// Options.TableNames (see Options.TableSource): e.g. every table carrying
// a tag. The walker asks it at start and every Options.TableRefresh.
type TableSource interface {
	// Tables lists the tables to read now. An error leaves the walker's
	// tables as they are until the next refresh.
	Tables(ctx context.Context) ([]string, error)
}

// tableView is what planTables knows of one table the walker reads.
type tableView struct {
	name string
	// static: a table of Options.TableNames, read for good.
	static bool
	// leaving: the source no longer lists it; it is being let go.
	leaving bool
	// deleted: DescribeTable says the table no longer exists; its streams
	// stay readable (DynamoDB Streams keeps them 24 h) and are read to
	// their end before it is let go.
	deleted bool
	// unread: some stream of the table still has records to read (a shard
	// not finished, or a stream not described yet).
	unread bool
	// reading: a reader of one of its shards is running.
	reading bool
}

// tablePlan is what a table refresh changes.
type tablePlan struct {
	add   []string // listed and not read yet: start reading
	leave []string // no longer listed: stop taking new shards (unless deleted)
	back  []string // leaving, and listed again: read on
	drop  []string // let go now: forgotten by the walker
}

// planTables decides, from the tables the walker reads and those the
// source lists now, which tables to add, which to start letting go, which
// come back and which to let go now. Static tables are never let go. A
// table the source stops listing is let go once no reader of it runs and,
// when the table was deleted, its streams were read to their end (a
// deleted table's last records are in its stream only); a table that still
// exists (untagged) is let go as soon as its readers stopped: its stream
// never ends, and its checkpoints stay, so tagging it again resumes it.
func planTables(known []tableView, listed []string) tablePlan {
	var p tablePlan
	in := make(map[string]bool, len(listed))
	for _, n := range listed {
		in[n] = true
	}
	have := make(map[string]bool, len(known))
	for _, t := range known {
		have[t.name] = true
		switch {
		case t.static:
		case in[t.name] && t.leaving:
			p.back = append(p.back, t.name)
		case in[t.name]:
		default:
			if !t.leaving {
				p.leave = append(p.leave, t.name)
			}
			if !t.reading && (!t.deleted || !t.unread) {
				p.drop = append(p.drop, t.name)
			}
		}
	}
	for _, n := range listed {
		if !have[n] && n != "" {
			have[n] = true
			p.add = append(p.add, n)
		}
	}
	sort.Strings(p.add)
	return p
}

// tableTicks are Options.TableSource's refresh ticks (every
// Options.TableRefresh) and their stop: a nil channel without a source.
func (wk *walk) tableTicks() (<-chan time.Time, func()) {
	if wk.o.TableSource == nil {
		return nil, func() {}
	}
	t := time.NewTicker(wk.o.TableRefresh)
	return t.C, t.Stop
}

// fetchTables asks the TableSource for its tables on a goroutine of its
// own (a source may take a while: it may call DynamoDB once per table),
// unless an earlier ask is still running; the answer reaches the loop on
// wk.tableList.
func (wk *walk) fetchTables() {
	if !wk.tableAsk.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer wk.tableAsk.Store(false)
		names, err := wk.o.TableSource.Tables(wk.ctx)
		if err != nil {
			if classify(wk.ctx, err) != errCanceled {
				wk.w.log.Warn("listing the tables to read failed; the tables read stay as they are", zap.Error(err))
			}
			return
		}
		select {
		case wk.tableList <- names:
		case <-wk.ctx.Done():
		}
	}()
}

// applyTables applies planTables to the tables the source listed: tables
// added are discovered at once (late: after the walker's first look,
// their streams are then read from TRIM_HORIZON whatever Options.Start
// says), tables let go are forgotten.
func (wk *walk) applyTables(names []string, late bool) {
	names = wk.checkUnlisted(names)
	known := make([]tableView, 0, len(wk.tables))
	for _, t := range wk.tables {
		known = append(known, wk.viewOf(t))
	}
	p := planTables(known, names)
	for _, name := range p.back {
		t := wk.tableNamed(name)
		t.leaving = false
		wk.w.log.Info("table listed again, reading on", zap.String("table", name))
	}
	for _, name := range p.leave {
		wk.leaveTable(wk.tableNamed(name))
	}
	for _, name := range p.drop {
		wk.dropTable(wk.tableNamed(name))
	}
	for _, name := range p.add {
		wk.addTable(name, late)
	}
}

// firstTables asks the source once, before the first discovery: its
// tables are there from the start (Options.Start applies to them).
func (wk *walk) firstTables() {
	names, err := wk.o.TableSource.Tables(wk.ctx)
	if err != nil {
		if classify(wk.ctx, err) != errCanceled {
			wk.w.log.Warn("listing the tables to read failed; asking again at the next refresh", zap.Error(err))
		}
		return
	}
	wk.applyTables(names, false)
}

// checkUnlisted asks DynamoDB whether each sourced table the source no
// longer lists was deleted (its stream's tail must then be read before it
// is let go), and returns names with those it could not tell added, so
// they are decided at a later refresh.
func (wk *walk) checkUnlisted(names []string) []string {
	for _, t := range wk.tables {
		if !t.sourced || t.deleted || slices.Contains(names, t.name) {
			continue
		}
		_, err := t.tables.DescribeTable(wk.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.name)})
		switch {
		case err == nil:
		case classify(wk.ctx, err) == errNotFound:
			t.deleted = true
		default:
			names = append(names, t.name)
		}
	}
	return names
}

// viewOf is t as planTables sees it.
func (wk *walk) viewOf(t *tableState) tableView {
	v := tableView{name: t.name, static: !t.sourced, leaving: t.leaving, deleted: t.deleted}
	for _, st := range t.streams {
		if st.tbl != t {
			continue
		}
		for _, rd := range wk.readers {
			v.reading = v.reading || rd.streamARN == st.arn
		}
		v.unread = v.unread || streamUnread(st)
	}
	return v
}

// streamUnread reports whether a stream may still hold records to read.
func streamUnread(st *streamState) bool {
	if st.gone || st.done {
		return false
	}
	if !st.described || !st.positionsOK {
		return true
	}
	for _, ss := range st.shards {
		if !ss.finished {
			return true
		}
	}
	return false
}

// tableNamed returns the sourced table read under name.
func (wk *walk) tableNamed(name string) *tableState {
	for _, t := range wk.tables {
		if t.name == name && t.sourced {
			return t
		}
	}
	panic("shard: no table " + name) // unreachable: planTables names known tables
}

// addTable starts reading a table the source listed; late says it was
// not there at the walker's start.
func (wk *walk) addTable(name string, late bool) {
	t := &tableState{name: name, tables: wk.o.Tables, client: wk.o.Streams, sourced: true, late: late}
	wk.tables = append(wk.tables, t)
	wk.w.log.Info("table added", zap.String("table", name), zap.Bool("from_start_of_stream", late || wk.o.Start != Latest))
	wk.discoverTable(t)
	for _, st := range t.streams {
		if !st.done && wk.ctx.Err() == nil {
			wk.refresh(st)
		}
	}
}

// leaveTable starts letting a table go: a table that still exists has its
// readers stopped (they checkpoint and release their leases); a deleted
// one is read on to the end of its streams.
func (wk *walk) leaveTable(t *tableState) {
	t.leaving = true
	if t.deleted {
		wk.w.log.Info("table deleted; reading its stream to the end before letting it go", zap.String("table", t.name))
		return
	}
	wk.w.log.Info("table no longer listed; stopping its readers", zap.String("table", t.name))
	for _, st := range t.streams {
		for _, rd := range wk.readers {
			if rd.streamARN == st.arn {
				rd.cancel()
			}
		}
	}
}

// dropTable forgets a table let go and its streams.
func (wk *walk) dropTable(t *tableState) {
	for _, st := range t.streams {
		if st.tbl == t {
			delete(wk.streams, st.arn)
		}
	}
	wk.tables = slices.DeleteFunc(wk.tables, func(o *tableState) bool { return o == t })
	wk.w.log.Info("table let go", zap.String("table", t.name), zap.Bool("deleted", t.deleted))
}

// paused reports whether a stream's table is being let go while it still
// exists: no new reader starts on it.
func (st *streamState) paused() bool {
	return st.tbl != nil && st.tbl.leaving && !st.tbl.deleted
}
