package engine

import (
	"runtime/debug"
	"testing"
)

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	m := MemoryTuning{Headroom: 0.25, Floor: 16 * mib}
	for _, c := range []struct {
		name string
		live uint64
		was  int
		want int
	}{
		{"no live heap yet: GOGC stands", 0, 100, 100},
		{"small heap: the floor is more than GOGC allows", 4 * mib, 100, 100},
		{"the floor decides", 32 * mib, 100, 50},
		{"the headroom decides", 640 * mib, 100, 25},
		{"never laxer than GOGC", 640 * mib, 20, 20},
		{"a huge heap: the headroom", 1 << 40, 100, 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := gcPercent(c.live, m, c.was); got != c.want {
				t.Errorf("gcPercent(%d MiB, was %d) = %d, want %d", c.live/mib, c.was, got, c.want)
			}
		})
	}
	if got := gcPercent(1<<40, MemoryTuning{Headroom: 0.001, Floor: 1}, 100); got != 1 {
		t.Errorf("a tiny headroom: %d, want 1", got)
	}
}

func TestTuneMemoryStopRestores(t *testing.T) {
	was := debug.SetGCPercent(137)
	defer debug.SetGCPercent(was)
	stop := TuneMemory(MemoryTuning{Headroom: 0.01, Floor: 1})
	stop()
	stop()
	if got := debug.SetGCPercent(137); got != 137 {
		t.Errorf("after stop: GOGC %d, want 137", got)
	}
	off := TuneMemory(MemoryTuning{})
	off()
	if got := debug.SetGCPercent(137); got != 137 {
		t.Errorf("with no headroom: GOGC %d, want 137", got)
	}
}
