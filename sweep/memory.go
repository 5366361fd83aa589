package sweep

import (
	"context"
	"sync"
)

// MemoryCursor is a CursorStore that keeps cursors in memory, per table:
// for demos, benchmarks and tests, where the table lives no longer than
// the process. A sweeper restarted on it starts over from Config.Lookback.
type MemoryCursor struct {
	mu sync.Mutex
	c  map[string]Cursor
}

// LoadCursor returns the table's cursor (zero when none was saved).
func (m *MemoryCursor) LoadCursor(_ context.Context, table string) (Cursor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c[table], nil
}

// SaveCursor keeps c as the table's cursor.
func (m *MemoryCursor) SaveCursor(_ context.Context, table string, c Cursor) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil {
		m.c = map[string]Cursor{}
	}
	m.c[table] = c
	return nil
}
