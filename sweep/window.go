package sweep

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// windowLayout is the recipe's time format: UTC with milliseconds.
const windowLayout = "2006-01-02T15:04:05.000Z"

// ErrBadWindow is matched (errors.Is) by every error of [ParseWindow].
var ErrBadWindow = errors.New("sweep: bad window attribute")

// Window returns the window attribute of an item whose TTL is ttl:
// "start_end" (UTC, milliseconds, as in
// "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"), where start is the
// latest multiple of window since the Unix epoch at or before ttl and
// end is start+window, so the window [start, end) holds ttl. With
// shards > 1, "#k" is appended with k uniformly random in 0..shards-1,
// spreading a hot window over several index partitions. Writers and the
// sweeper must agree on window and shards (Config.Window,
// Config.WindowShards).
//
// window must be a positive whole number of milliseconds; Window panics
// otherwise (it is a constant of the writer, not data). Times after the
// year 9999 give attributes that [ParseWindow] rejects.
func Window(ttl time.Time, window time.Duration, shards int) string {
	wms := windowMillis(window)
	shard := -1
	if shards > 1 {
		shard = rand.IntN(shards)
	}
	return windowKey(windowIndex(ttl.UnixMilli(), wms), wms, shard)
}

// WindowStart returns the start of the window of length window that holds
// t (the same alignment as [Window]). It panics, as Window does, unless
// window is a positive whole number of milliseconds.
func WindowStart(t time.Time, window time.Duration) time.Time {
	wms := windowMillis(window)
	return time.UnixMilli(windowIndex(t.UnixMilli(), wms) * wms).UTC()
}

// Span is a parsed window attribute: the window [Start, End) and the
// index partition it names.
type Span struct {
	Start, End time.Time // UTC
	Shard      int       // the "#k" suffix; -1 when there is none
}

// String renders the span as a window attribute, the inverse of
// [ParseWindow].
func (s Span) String() string {
	out := s.Start.UTC().Format(windowLayout) + "_" + s.End.UTC().Format(windowLayout)
	if s.Shard >= 0 {
		out += "#" + strconv.Itoa(s.Shard)
	}
	return out
}

// Contains reports whether t lies in [Start, End).
func (s Span) Contains(t time.Time) bool {
	return !t.Before(s.Start) && t.Before(s.End)
}

// ParseWindow parses a window attribute as [Window] writes it. It checks
// the form only (two times, the first before the second, an optional
// non-negative "#k"), not the alignment of the times. Its errors match
// [ErrBadWindow] and quote the attribute and the part that is wrong.
func ParseWindow(attr string) (Span, error) {
	bad := func(format string, args ...any) (Span, error) {
		return Span{}, fmt.Errorf("%w %q: %s", ErrBadWindow, attr, fmt.Sprintf(format, args...))
	}
	span := Span{Shard: -1}
	rest := attr
	if i := strings.IndexByte(attr, '#'); i >= 0 {
		k, err := strconv.Atoi(attr[i+1:])
		if err != nil || strings.TrimLeft(attr[i+1:], "0123456789") != "" {
			return bad("shard suffix %q is not a non-negative whole number", attr[i:])
		}
		span.Shard, rest = k, attr[:i]
	}
	startText, endText, ok := strings.Cut(rest, "_")
	if !ok {
		return bad("no '_' between the start and the end")
	}
	var err error
	if span.Start, err = time.Parse(windowLayout, startText); err != nil {
		return bad("start %q is not of the form %s", startText, windowLayout)
	}
	if span.End, err = time.Parse(windowLayout, endText); err != nil {
		return bad("end %q is not of the form %s", endText, windowLayout)
	}
	if !span.Start.Before(span.End) {
		return bad("the end is not after the start")
	}
	return span, nil
}

// windowMillis is window in milliseconds; it panics unless that is a
// positive whole number.
func windowMillis(window time.Duration) int64 {
	if window <= 0 || window%time.Millisecond != 0 {
		panic(fmt.Sprintf("sweep: window %v is not a positive whole number of milliseconds", window))
	}
	return window.Milliseconds()
}

// windowIndex is the number of the window of length wms that holds the
// epoch millisecond ms (floor division, so times before 1970 work too).
func windowIndex(ms, wms int64) int64 {
	n := ms / wms
	if ms%wms < 0 {
		n--
	}
	return n
}

// windowKey is the attribute of window n of length wms, with "#shard"
// appended unless shard is negative.
func windowKey(n, wms int64, shard int) string {
	return Span{
		Start: time.UnixMilli(n * wms).UTC(),
		End:   time.UnixMilli((n + 1) * wms).UTC(),
		Shard: shard,
	}.String()
}
