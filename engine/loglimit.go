package engine

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// logEvery is how often one kind of rate-limited log line (a data
// directory that stays unwritable, a guard refusing requests) is written
// again while it keeps happening.
const logEvery = time.Minute

// logLimit rate-limits one kind of log line: the first occurrence is
// logged at once, then at most one line every logEvery, each carrying how
// many occurrences it stands for, so a flood of them (a hostile page, a
// full disk under load) costs a line a minute, not a line a request.
type logLimit struct {
	mu     sync.Mutex
	logged bool      // a line was logged since the last reset
	last   time.Time // when
	n      int64     // occurrences since the last line
}

// note counts n occurrences at now and reports whether to log a line now;
// if so it returns the occurrences the line stands for (those since the
// last line, these included) and starts counting afresh.
func (l *logLimit) note(now time.Time, n int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += n
	if l.logged && now.Sub(l.last) < logEvery {
		return 0, false
	}
	c := l.n
	l.logged, l.last, l.n = true, now, 0
	return c, true
}

// reset makes the next note log at once and returns the occurrences
// counted since the last line.
func (l *logLimit) reset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.n
	l.logged, l.n = false, 0
	return c
}

// guardLog rate-limits the WARN lines of requests the guards refuse, one
// logLimit per reason: a web page can send refused requests as fast as it
// likes, and each would otherwise be a line.
type guardLog struct {
	now         func() time.Time // nil: time.Now (tests set a clock they control)
	host        logLimit         // Host header refused (checkHost)
	controlFrom logLimit         // control client not loopback nor --control-from
	controlPost logLimit         // control POST a browser could have sent (checkControlPost)
}

// logRefusal logs one refused request under l's rate limit: a WARN with msg,
// fields and "refused", the requests refused for this reason since the
// last line (this one included).
func (e *Engine) logRefusal(l *logLimit, msg string, fields ...zap.Field) {
	now := time.Now
	if e.guardLog.now != nil {
		now = e.guardLog.now
	}
	n, ok := l.note(now(), 1)
	if !ok {
		return
	}
	e.log.Warn(msg+" (logged at most once a minute; refused counts the requests refused since the last line)",
		append(fields, zap.Int64("refused", n))...)
}
