package s3sink

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// uploadLogLimit is how many objects an S3 sink logs one line each for in
// a window of uploadLogWindow; the objects beyond it are counted in one
// summary line at the window's end instead, so a busy sink logs at most
// uploadLogLimit+1 lines a minute and still accounts for every object.
const (
	uploadLogLimit  = 10
	uploadLogWindow = time.Minute
)

// uploadLog reports an S3 sink's uploads at Info: one line per object
// ("s3 object uploaded": key, events, bytes, took) up to uploadLogLimit in
// a window, then one summary line for the window ("s3 objects uploaded":
// objects, events, bytes, listed, window) once the window is over. tick
// and close end a window that is over (close: whatever its age), so the
// summary comes even when uploads stop.
type uploadLog struct {
	log   *zap.Logger
	now   func() time.Time
	limit int
	every time.Duration

	mu      sync.Mutex
	start   time.Time // the window's start; zero before the first upload
	listed  int       // objects logged one line each in the window
	objects int       // all the window's objects, listed or not
	events  int
	bytes   int64
}

func newUploadLog(log *zap.Logger, now func() time.Time) *uploadLog {
	return &uploadLog{log: log, now: now, limit: uploadLogLimit, every: uploadLogWindow}
}

// uploaded reports one object S3 confirmed: its key, the events it holds,
// its size as stored and how long the upload took (retries included).
func (u *uploadLog) uploaded(key string, events int, bytes int, took time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	u.endWindowLocked(now, false)
	if u.start.IsZero() {
		u.start = now
	}
	u.objects++
	u.events += events
	u.bytes += int64(bytes)
	if u.listed < u.limit {
		u.listed++
		u.log.Info("s3 object uploaded", zap.String("key", key), zap.Int("events", events),
			zap.Int("bytes", bytes), zap.Duration("took", took))
		if u.listed == u.limit {
			u.log.Info("s3 uploads: further objects this minute are counted in one summary line at its end",
				zap.Int("listed", u.limit), zap.Duration("window", u.every))
		}
	}
}

// tick ends the window when it is over.
func (u *uploadLog) tick() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.endWindowLocked(u.now(), false)
}

// close ends the window now (the sink is closing).
func (u *uploadLog) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.endWindowLocked(u.now(), true)
}

// endWindowLocked logs the window's summary when objects went unlisted
// and starts a new window, when the window is over (or force). u.mu is
// held.
func (u *uploadLog) endWindowLocked(now time.Time, force bool) {
	if u.start.IsZero() || (!force && now.Sub(u.start) < u.every) {
		return
	}
	if u.objects > u.listed {
		u.log.Info("s3 objects uploaded", zap.Int("objects", u.objects), zap.Int("events", u.events),
			zap.Int64("bytes", u.bytes), zap.Int("listed", u.listed), zap.Duration("window", now.Sub(u.start)))
	}
	u.start, u.listed, u.objects, u.events, u.bytes = time.Time{}, 0, 0, 0, 0
}
