package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// controlFile keeps the control API's state in the data directory, so a
// test harness that sets a fault or moves the clock and then restarts the
// engine to test recovery finds them as it left them: a ManualClock that
// went back to the wall clock would move time backwards (items set to
// expire would not, record times would run back), a throttle that
// vanished would let the test pass without meeting the fault it asked
// for, and iterators expired before the restart would be valid again.
const controlFile = "control.json"

// controlState is what controlFile holds, and what GET /_engine/state
// answers.
type controlState struct {
	// Clock is the time the control API last moved the ManualClock to
	// (absent when it never did). Only that time is kept: a Go test moves
	// its own ManualClock, and a restart must not undo that.
	Clock *time.Time `json:"clock,omitempty"`
	// Throttle is, per operation, the calls still to throttle.
	Throttle throttleState `json:"throttle"`
	// Omit lists the shards DescribeStream still leaves out.
	Omit []stream.Omission `json:"omit,omitempty"`
	// IteratorEpoch counts the POSTs to /_engine/iterators/expire: an
	// iterator issued in another epoch is expired.
	IteratorEpoch uint32 `json:"iteratorEpoch"`
	// ReplicationDelay (a Go duration), Paused (the destination Regions
	// held back) and TTLIndependent are the global tables' switches.
	ReplicationDelay string   `json:"replicationDelay,omitempty"`
	Paused           []string `json:"paused,omitempty"`
	TTLIndependent   bool     `json:"ttlIndependent,omitempty"`
}

type throttleState struct {
	GetRecords     int `json:"GetRecords"`
	BatchWriteItem int `json:"BatchWriteItem"`
	BatchGetItem   int `json:"BatchGetItem"`
}

// stateView is what GET /_engine/state answers: the control state, and
// the Regions that hold a table.
type stateView struct {
	controlState
	Regions []string `json:"regions"`
	// Queued is, per destination Region, the replicated writes waiting.
	Queued map[string]int `json:"queued"`
}

func (e *Engine) stateView() stateView {
	return stateView{controlState: e.controlState(), Regions: e.Regions(), Queued: e.Replication().Queued}
}

// controlState returns the state the control API set.
func (e *Engine) controlState() controlState {
	s := controlState{
		Throttle: throttleState{
			GetRecords:     e.streams.GetRecordsThrottled(),
			BatchWriteItem: int(e.throttleBatchWrites.Load()),
			BatchGetItem:   int(e.throttleBatchGets.Load()),
		},
		Omit:          e.streams.Omissions(),
		IteratorEpoch: e.streams.IteratorEpoch(),
	}
	if t := e.clockSet.Load(); t != nil {
		c := t.UTC()
		s.Clock = &c
	}
	rs := e.Replication()
	if rs.Delay != 0 {
		s.ReplicationDelay = rs.Delay.String()
	}
	s.Paused, s.TTLIndependent = rs.Paused, e.ttlIndependent.Load()
	return s
}

// saveControl writes the control state to the data directory (nothing
// without one). The control API calls it after every change it makes,
// before answering, and Close once more for the throttles used since.
func (e *Engine) saveControl() error {
	if e.p == nil {
		return nil
	}
	e.p.controlMu.Lock()
	defer e.p.controlMu.Unlock()
	b, err := json.Marshal(e.controlState())
	if err != nil {
		return fmt.Errorf("engine: encoding %s: %w", controlFile, err)
	}
	if err := writeAtomic(e.p.dir, controlFile, append(b, '\n')); err != nil {
		return fmt.Errorf("engine: keeping the control state in %s: %w", filepath.Join(e.p.dir, controlFile), err)
	}
	return nil
}

// loadControl restores the control state kept in the data directory, if
// any, once the tables and streams are loaded. A file that does not parse, or holds a negative count, is a
// start-up error naming the file and the field. A kept clock moves a
// ManualClock; an engine on real time ignores it, and says so.
func (p *persister) loadControl() error {
	path := filepath.Join(p.dir, controlFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	var s controlState
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return fmt.Errorf("engine: %s is not the control state this engine writes (%w); delete it to start without the faults and clock it kept", path, err)
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"GetRecords", s.Throttle.GetRecords}, {"BatchWriteItem", s.Throttle.BatchWriteItem}, {"BatchGetItem", s.Throttle.BatchGetItem}} {
		if c.n < 0 {
			return fmt.Errorf("engine: %s: throttle.%s is %d, want a count of 0 or more", path, c.name, c.n)
		}
	}
	for i, o := range s.Omit {
		if o.Stream == "" || o.Shard == "" || o.Times < 0 {
			return fmt.Errorf("engine: %s: omit[%d] is %+v, want a stream ARN, a shard ID and times of 0 or more", path, i, o)
		}
	}
	e := p.e
	for _, o := range s.Omit {
		if err := e.streams.OmitFromDescribe(o.Stream, o.Shard, o.Times); err != nil { // gone while down: nothing to leave out
			e.log.Info("engine: a kept DescribeStream omission is dropped: its shard is gone", zap.String("file", path), zap.Error(err))
		}
	}
	e.streams.ThrottleGetRecords(s.Throttle.GetRecords)
	e.ThrottleBatchWrites(s.Throttle.BatchWriteItem)
	e.ThrottleBatchGets(s.Throttle.BatchGetItem)
	e.streams.SetIteratorEpoch(s.IteratorEpoch)
	if s.ReplicationDelay != "" {
		d, err := time.ParseDuration(s.ReplicationDelay)
		if err != nil || d < 0 {
			return fmt.Errorf("engine: %s: replicationDelay is %q, want a duration of 0 or more", path, s.ReplicationDelay)
		}
		e.SetReplicationDelay(d)
	}
	for _, r := range s.Paused {
		if !validRegion(r) {
			return fmt.Errorf("engine: %s: paused holds %q, not a Region name", path, r)
		}
		e.PauseReplication(r)
	}
	e.SetTTLIndependent(s.TTLIndependent)
	if s.Clock != nil {
		if mc, ok := e.clock.(*ManualClock); ok {
			mc.Set(*s.Clock)
			e.clockSet.Store(s.Clock)
		} else {
			e.log.Info("engine: the manual clock kept in the data directory is ignored, and dropped from it: this engine runs on real time (start it with --manual-clock to resume that clock)",
				zap.String("file", path), zap.Time("clock", *s.Clock))
		}
	}
	return nil
}
