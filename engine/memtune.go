package engine

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// MemoryTuning bounds a process's heap to its live heap plus a headroom:
// what TuneMemory applies. Go's default collector (GOGC=100) lets the heap
// grow to twice the live heap before it collects, so a process holding
// 100 MiB of items rests near 200 MiB; with a headroom of 1/4 it rests
// near 125 MiB and collects four times as often while it writes
// (docs/DESIGN.md, the engine's memory).
type MemoryTuning struct {
	// Headroom is how far the heap may grow beyond the live heap, as a
	// fraction of it, before the collector runs: 0.25 lets a 100 MiB live
	// heap grow to 125 MiB. Zero or less turns the tuning off (GOGC
	// stands).
	Headroom float64
	// Floor is the least growth in bytes, so that a small heap collects no
	// more often than Go's default would make it. Zero means 16 MiB.
	Floor int64
}

// memTuneFloor is MemoryTuning.Floor's default.
const memTuneFloor = 16 << 20

// TuneMemory sets the collector's percentage (debug.SetGCPercent) after
// every garbage collection so that the next starts once the heap has grown
// by the larger of Headroom times the live heap and Floor, never later than
// the percentage it found (GOGC) would start it. The percentage is the
// process's, whatever else it runs: call TuneMemory once, from a program's
// main (archiver engine does), not from a library. stop ends the tuning
// and restores the percentage TuneMemory found. With GOGC=off it does
// nothing.
func TuneMemory(m MemoryTuning) (stop func()) {
	was := debug.SetGCPercent(100)
	debug.SetGCPercent(was)
	if m.Headroom <= 0 || was < 0 {
		return func() {}
	}
	if m.Floor <= 0 {
		m.Floor = memTuneFloor
	}
	t := &memTuner{m: m, was: was, live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.adjust()
	t.arm()
	return t.stop
}

// memTuner is TuneMemory's state: a finalizer on an unreachable sentinel
// runs after each collection, reads the live heap and sets the percentage.
type memTuner struct {
	m       MemoryTuning
	was     int // the percentage (GOGC) before tuning
	mu      sync.Mutex
	stopped bool
	live    []metrics.Sample
}

// arm sets a finalizer on a fresh sentinel; the next collection finds it
// unreachable and runs adjust, which arms again.
func (t *memTuner) arm() {
	s := new([16]byte) // not tiny-allocated: a finalizer needs its own object
	runtime.SetFinalizer(s, func(*[16]byte) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.stopped {
			return
		}
		t.adjustLocked()
		t.arm()
	})
}

func (t *memTuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.adjustLocked()
}

// adjustLocked sets the percentage from the live heap of the collection
// that just ended.
func (t *memTuner) adjustLocked() {
	metrics.Read(t.live)
	debug.SetGCPercent(gcPercent(t.live[0].Value.Uint64(), t.m, t.was))
}

// gcPercent is the percentage that lets a heap of live bytes grow by the
// larger of m.Headroom times live and m.Floor, at most was and at least 1.
func gcPercent(live uint64, m MemoryTuning, was int) int {
	if live == 0 {
		return was
	}
	room := max(float64(live)*m.Headroom, float64(m.Floor))
	return max(min(int(room/float64(live)*100), was), 1)
}

func (t *memTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.was)
	}
}
