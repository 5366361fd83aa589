// Package sweep deletes expired DynamoDB items within seconds of their TTL,
// on the expiration-window index pattern, without the pattern's gaps.
//
// # The data model (unchanged from the widely copied recipe)
//
// Each item carries, besides its TTL attribute (a Number, epoch seconds),
// a window attribute naming the window its TTL falls in, e.g.
//
//	expirationWindow = "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"
//
// and the table has a global secondary index (default
// expirationWindowIndex) with the window attribute as its hash key and the
// TTL attribute as its range key. Windows are half-open, [start, end), and
// aligned to multiples of their length since the Unix epoch, so every TTL
// falls in exactly one window ([Window] computes the attribute). For hot
// windows, writers append "#k" (k in 0..shards-1) to spread one window over
// several index partitions; the sweeper queries all of them.
//
// # What the sweeper guarantees
//
//   - No gaps. A durable cursor names the oldest window that may still hold
//     an item that is or will become due. Each pass queries every window
//     from the cursor up to the current one, following LastEvaluatedKey to
//     the end, so a late or skipped pass, a window edge or a window length
//     that is not a multiple of the pass interval leaves nothing behind.
//   - A window is closed once it ended more than Config.Grace ago: a
//     closing query reads all of it (no TTL condition), deletes what is due
//     and re-files items whose window attribute does not match their TTL
//     (an extended TTL whose writer kept the old window), with a
//     conditional update, so they are swept in their own window. Only then
//     may the cursor move past it. After downtime of any length the sweeper
//     catches up, oldest windows first.
//   - Safe deletes. The sweeper deletes only what DynamoDB's TTL would:
//     every delete is a DeleteItem conditional on the TTL attribute still
//     being a Number in the past and not more than five years old (an
//     extended TTL wins; a TTL of 0, negative or older than that is one
//     DynamoDB ignores, and so does the sweeper), with ReturnValues
//     ALL_OLD. Open windows are queried for such TTLs only; a closing
//     window's other items are counted and left, holding nothing open. Throttling and errors back off
//     (internal/backoff) and retry; no item is abandoned: a window whose
//     deletes did not all complete is not closed.
//   - Its clock is DynamoDB's. Every response's Date header is compared
//     with Config.Now; while they disagree by more than
//     Config.MaxClockSkew (default 1 s) passes delete nothing and close
//     no window, and deletes resume once they agree again.
//   - Config.MaxDeletesPerSecond caps the write rate spent on sweeping.
//
// DynamoDB's own TTL stays on as the backstop: an item written with a TTL
// already further in the past than the cursor is deleted by it.
//
// # Using it
//
// [New] takes a [Config]; [Sweeper.Run] describes the table (the TTL
// attribute from DescribeTimeToLive unless Config.TTLAttribute names it,
// the table's key and the index's), loads the cursor (none: now minus
// Config.Lookback) and makes a [Sweeper.Pass] every Config.Interval. The
// index must have the window attribute as its hash key and either the TTL
// attribute as its range key (open windows are then queried for due items
// only) or project it (they are read whole and filtered). Every call is
// made with the client's own retries off: the sweeper retries it itself,
// up to a few times a pass, and leaves a window open for the next pass
// rather than give up on an item.
// Config.MaxDeletesPerSecond counts every write attempt, re-files
// included.
//
// Metrics, each labelled by table: archiver_sweep_deleted_total,
// archiver_sweep_skipped_total{reason} (ttl_extended, gone,
// ttl_not_number, ttl_too_old), archiver_sweep_refiled_total,
// archiver_sweep_windows_behind, archiver_sweep_cursor_age_seconds,
// archiver_sweep_lag_seconds (deletion time minus TTL),
// archiver_sweep_throttles_total, archiver_sweep_errors_total,
// archiver_sweep_passes_total, archiver_sweep_clock_skew_seconds
// (DynamoDB's clock minus the sweeper's) and
// archiver_sweep_clock_paused_total.
package sweep

import (
	"context"
	"time"
)

// DefaultIndex and DefaultWindowAttribute are the recipe's names.
const (
	DefaultIndex           = "expirationWindowIndex"
	DefaultWindowAttribute = "expirationWindow"
)

// Cursor is where the sweeper stands, kept durably between runs.
type Cursor struct {
	// Window is the start of the oldest window that may still hold an
	// item that is or will become due. Zero: no cursor yet (the sweeper
	// starts at the window of now minus Config.Lookback).
	Window time.Time
}

// CursorStore keeps one table's cursor. Save is called only while the
// sweeper holds the table (see Locker), with a cursor never older than
// the last one saved.
type CursorStore interface {
	LoadCursor(ctx context.Context, table string) (Cursor, error)
	SaveCursor(ctx context.Context, table string, c Cursor) error
}

// Locker makes sure one sweeper at a time sweeps a table, when several
// tasks run. Acquire blocks until this process holds the table or ctx
// ends. The returned context is cancelled when the hold is lost (the
// sweeper then stops deleting at once); release gives the hold up (on
// SIGTERM, within the shutdown timeout) so another task takes over.
type Locker interface {
	Acquire(ctx context.Context, table string) (held context.Context, release func(context.Context) error, err error)
}
