// Package progress shows how far a long job (restore, replay, verify) has
// come: on a terminal a single line redrawn a few times a second, off a
// terminal a JSON log line at intervals, and at the end a summary table.
//
// A Reporter is safe for concurrent use: workers add what they finished,
// one goroutine (Start) renders. Nothing here is global; tests pass their
// own writer and clock.
package progress

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Options configures a Reporter.
type Options struct {
	// Label names the job on the bar and in the logs ("restore").
	Label string
	// Out receives the live bar (standard error). Used only when TTY.
	Out io.Writer
	// TTY selects the live bar (the caller asks logging.IsTerminal of
	// Out); otherwise progress goes to Logger.
	TTY bool
	// Logger receives a progress line every Interval when not TTY
	// (nil: no logging).
	Logger *zap.Logger
	// Interval between two redraws (default 250ms on a terminal) or log
	// lines (default 10s).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Objects, when set, is asked for the objects done and their total
	// whenever progress is shown (a reader that counts them itself, such
	// as archive.Archive.Progress); AddObjects and SetTotals' objects are
	// then ignored.
	Objects func() (done, total int64)
}

// Counts is a job's progress. A total of 0 is unknown.
type Counts struct {
	ObjectsDone, ObjectsTotal int64
	ItemsDone, ItemsTotal     int64
}

// Reporter tracks and shows one job's progress.
type Reporter struct {
	o     Options
	start time.Time

	mu sync.Mutex
	c  Counts
	// drawn is whether a bar line is on screen (to be cleared).
	drawn bool
}

// New returns a Reporter whose clock starts now.
func New(o Options) *Reporter {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
		if o.TTY {
			o.Interval = 250 * time.Millisecond
		}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return &Reporter{o: o, start: o.Now()}
}

// SetTotals sets the totals (0: unknown).
func (r *Reporter) SetTotals(objects, items int64) {
	r.mu.Lock()
	r.c.ObjectsTotal, r.c.ItemsTotal = objects, items
	r.mu.Unlock()
}

// AddObjects counts n more objects done.
func (r *Reporter) AddObjects(n int64) {
	r.mu.Lock()
	r.c.ObjectsDone += n
	r.mu.Unlock()
}

// AddItems counts n more items done.
func (r *Reporter) AddItems(n int64) {
	r.mu.Lock()
	r.c.ItemsDone += n
	r.mu.Unlock()
}

// Counts returns the current counts.
func (r *Reporter) Counts() Counts {
	r.mu.Lock()
	c := r.c
	r.mu.Unlock()
	if r.o.Objects != nil {
		c.ObjectsDone, c.ObjectsTotal = r.o.Objects()
	}
	return c
}

// Start shows progress every Interval until ctx ends or stop is called;
// stop shows the final state once (clearing the bar's line on a terminal
// so the summary starts on a clean line) and returns when nothing more
// will be written.
func (r *Reporter) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.o.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.Tick()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			r.finish()
		})
	}
}

// Tick shows the current progress once: redraws the bar or logs a line.
func (r *Reporter) Tick() {
	c, el := r.Counts(), r.elapsed()
	if r.o.TTY {
		r.mu.Lock()
		fmt.Fprintf(r.o.Out, "\r%s\x1b[K", Bar(r.o.Label, c, el))
		r.drawn = true
		r.mu.Unlock()
		return
	}
	if r.o.Logger != nil {
		r.o.Logger.Info("progress", fields(r.o.Label, c, el)...)
	}
}

// LogWriter returns w wrapped so that, on a terminal, whatever is written
// to it (log lines) first clears the bar's line; the next redraw puts the
// bar back below. Off a terminal it returns w.
func (r *Reporter) LogWriter(w io.Writer) io.Writer {
	if !r.o.TTY {
		return w
	}
	return &guarded{r: r, w: w}
}

type guarded struct {
	r *Reporter
	w io.Writer
}

func (g *guarded) Write(p []byte) (int, error) {
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	if g.r.drawn {
		fmt.Fprint(g.r.o.Out, "\r\x1b[K")
		g.r.drawn = false
	}
	return g.w.Write(p)
}

func (r *Reporter) finish() {
	if !r.o.TTY {
		r.Tick()
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drawn {
		fmt.Fprint(r.o.Out, "\r\x1b[K")
		r.drawn = false
	}
}

func (r *Reporter) elapsed() time.Duration { return r.o.Now().Sub(r.start) }

// Rate is items per second over el.
func Rate(c Counts, el time.Duration) float64 {
	if el <= 0 {
		return 0
	}
	return float64(c.ItemsDone) / el.Seconds()
}

// Fraction is how much of the job is done, from items when their total
// is known, else from objects; ok is false when neither total is.
func Fraction(c Counts) (f float64, ok bool) {
	switch {
	case c.ItemsTotal > 0:
		f = float64(c.ItemsDone) / float64(c.ItemsTotal)
	case c.ObjectsTotal > 0:
		f = float64(c.ObjectsDone) / float64(c.ObjectsTotal)
	default:
		return 0, false
	}
	return min(max(f, 0), 1), true
}

// ETA is the time left at the pace so far; ok is false when it cannot
// be told yet.
func ETA(c Counts, el time.Duration) (time.Duration, bool) {
	f, ok := Fraction(c)
	if !ok || f <= 0 {
		return 0, false
	}
	left := time.Duration(float64(el) * (1 - f) / f)
	return left.Round(time.Second), true
}

const barWidth = 24

// Bar renders one line of progress:
//
//	restore [=========>              ]  40% objects 4/10 items 1200/? 300/s ETA 6s
func Bar(label string, c Counts, el time.Duration) string {
	var b strings.Builder
	b.WriteString(label)
	f, known := Fraction(c)
	b.WriteString(" [")
	fill := int(f * barWidth)
	for i := 0; i < barWidth; i++ {
		switch {
		case i < fill:
			b.WriteByte('=')
		case i == fill && known && fill < barWidth:
			b.WriteByte('>')
		default:
			b.WriteByte(' ')
		}
	}
	b.WriteString("]")
	if known {
		fmt.Fprintf(&b, " %3d%%", int(f*100))
	}
	fmt.Fprintf(&b, " objects %d/%s items %d/%s %s/s", c.ObjectsDone, total(c.ObjectsTotal), c.ItemsDone, total(c.ItemsTotal), Human(Rate(c, el)))
	if eta, ok := ETA(c, el); ok {
		fmt.Fprintf(&b, " ETA %s", eta)
	}
	return b.String()
}

func total(n int64) string {
	if n <= 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

// Human renders a rate: 950, 12.3k, 4.5M.
func Human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fields(label string, c Counts, el time.Duration) []zap.Field {
	fs := []zap.Field{zap.String("job", label),
		zap.Int64("objects_done", c.ObjectsDone), zap.Int64("objects_total", c.ObjectsTotal),
		zap.Int64("items_done", c.ItemsDone), zap.Int64("items_total", c.ItemsTotal),
		zap.Float64("items_per_second", Rate(c, el)), zap.Duration("elapsed", el)}
	if f, ok := Fraction(c); ok {
		fs = append(fs, zap.Float64("fraction", f))
	}
	if eta, ok := ETA(c, el); ok {
		fs = append(fs, zap.Duration("eta", eta))
	}
	return fs
}
