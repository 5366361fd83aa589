package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
)

// What arrives at the sinks of an `archiver run`: the events' latencies,
// the sweeps that deleted them, and the objects in versitygw's folder.

// plWaitArrivals waits until done reports true, scanning the archive
// folder every tick; it fails when the archiver exits (with the tail of
// its logs), when ctx ends, or after ten minutes (saying what arrived).
func plWaitArrivals(ctx context.Context, exited <-chan struct{}, logs *bytes.Buffer, scan *plS3Scanner, tick time.Duration, done func() bool, arrived func() string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for !done() {
		select {
		case <-exited:
			return fmt.Errorf("archiver exited early\n%s", benchkit.Tail(logs.String(), 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(tick):
		}
		if err := scan.scan(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out: %s", arrived())
		}
	}
	return nil
}

// plLatencies collects one latency per distinct event.
type plLatencies struct {
	mu   sync.Mutex
	skip map[string]bool
	seen map[string]bool
	d    []time.Duration
	at   time.Time
}

// plNewLatencies returns a collector that ignores the IDs in skip (events
// of an earlier phase delivered again).
func plNewLatencies(skip map[string]bool) *plLatencies {
	return &plLatencies{seen: map[string]bool{}, skip: skip}
}

// add records event id's latency d, arrived at at, unless it was seen;
// it reports whether it was new.
func (l *plLatencies) add(id string, d time.Duration, at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[id] || l.skip[id] {
		return false
	}
	l.seen[id] = true
	l.d = append(l.d, d)
	if at.After(l.at) {
		l.at = at
	}
	return true
}

func (l *plLatencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

func (l *plLatencies) last() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at
}

func (l *plLatencies) quantiles() (p50, p99 time.Duration) {
	l.mu.Lock()
	s := append([]time.Duration(nil), l.d...)
	l.mu.Unlock()
	return plQuantiles(s)
}

func plQuantiles(s []time.Duration) (p50, p99 time.Duration) {
	if len(s) == 0 {
		return 0, 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) time.Duration { return s[max(0, int(math.Ceil(p*float64(len(s))))-1)] }
	return q(0.5), q(0.99)
}

// plSweeps records when each latency-phase sweep started, so that an
// event's deletion can be timed from the sweep that deleted it (the first
// to start after its TTL) instead of from its creation time, which the
// stream gives in whole seconds: with sweeps every 100 ms that second
// starts up to 100 ms before the deletion, and counting it charged the
// bench's sweep cadence to the archiver.
type plSweeps struct {
	mu     sync.Mutex
	starts []time.Time
	ttls   []int64
	shards []string
	ats    []time.Time
}

func (s *plSweeps) started(t time.Time) {
	s.mu.Lock()
	s.starts = append(s.starts, t)
	s.mu.Unlock()
}

// arrived records an event of shard with TTL ttl (epoch seconds) arriving
// at at.
func (s *plSweeps) arrived(ttl int64, shard string, at time.Time) {
	s.mu.Lock()
	s.ttls, s.shards, s.ats = append(s.ttls, ttl), append(s.shards, shard), append(s.ats, at)
	s.mu.Unlock()
}

// slowest describes the n (burst, shard) groups whose last event arrived
// latest after its sweep started: where a tail comes from.
func (s *plSweeps) slowest(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	type group struct {
		ttl         int64
		shard       string
		sweep       time.Time
		first, last time.Duration
		events      int
	}
	groups := map[string]*group{}
	for i, ttl := range s.ttls {
		due := time.Unix(ttl, 0)
		k := sort.Search(len(s.starts), func(k int) bool { return s.starts[k].After(due) })
		if k == len(s.starts) {
			continue
		}
		d := s.ats[i].Sub(s.starts[k])
		key := strconv.FormatInt(ttl, 10) + "/" + s.shards[i]
		g := groups[key]
		if g == nil {
			g = &group{ttl: ttl, shard: s.shards[i], sweep: s.starts[k], first: d, last: d}
			groups[key] = g
		}
		g.first, g.last = min(g.first, d), max(g.last, d)
		g.events++
	}
	all := make([]*group, 0, len(groups))
	for _, g := range groups {
		all = append(all, g)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].last > all[j].last })
	var b strings.Builder
	for _, g := range all[:min(n, len(all))] {
		fmt.Fprintf(&b, "      burst ttl=%d (sweep %s) shard %s: %d events, first %s last %s after the sweep\n",
			g.ttl, g.sweep.Format("15:04:05.000"), g.shard, g.events, g.first.Round(time.Millisecond), g.last.Round(time.Millisecond))
	}
	return b.String()
}

// quantiles of arrival minus the start of the first sweep after the TTL
// (an item is due once its TTL has passed; that sweep deleted it).
func (s *plSweeps) quantiles() (p50, p99 time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d []time.Duration
	for i, ttl := range s.ttls {
		due := time.Unix(ttl, 0)
		k := sort.Search(len(s.starts), func(k int) bool { return s.starts[k].After(due) })
		if k < len(s.starts) {
			d = append(d, s.ats[i].Sub(s.starts[k]))
		}
	}
	return plQuantiles(d)
}

// plLineTTL reads an archive line's TTL value (epoch seconds; 0 when it
// has none) and shard.
func plLineTTL(b []byte) (int64, string) {
	var line struct {
		Metadata struct {
			TTL   string `json:"ttlValue"`
			Shard string `json:"shardId"`
		}
	}
	if json.Unmarshal(b, &line) != nil {
		return 0, ""
	}
	n, _ := strconv.ParseInt(line.Metadata.TTL, 10, 64)
	return n, line.Metadata.Shard
}

// plLineTimes reads the event ID and deletion time of an archive line.
func plLineTimes(b []byte) (id string, created time.Time, ok bool) {
	var line struct {
		Metadata struct {
			EventID string    `json:"eventID"`
			Created time.Time `json:"approximateCreationDateTime"`
		}
	}
	if json.Unmarshal(b, &line) != nil || line.Metadata.EventID == "" {
		return "", time.Time{}, false
	}
	return line.Metadata.EventID, line.Metadata.Created, true
}

// plS3Scanner reads new archive objects from versitygw's posix folder; an
// object's modification time is when S3 acknowledged it.
type plS3Scanner struct {
	dir         string
	seen        map[string]bool
	lat         *plLatencies
	objects     int
	objectBytes int64
	events      int
}

func (s *plS3Scanner) scan() error {
	return filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != s.dir {
				return filepath.SkipDir // versitygw's temporary uploads
			}
			return nil
		}
		if s.seen[path] || !strings.HasSuffix(path, ".jsonl.gz") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("object %s: %w", path, err)
		}
		sc := bufio.NewScanner(zr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			if id, created, ok := plLineTimes(sc.Bytes()); ok {
				s.lat.add(id, info.ModTime().Sub(created), info.ModTime())
				n++
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("object %s: %w", path, err)
		}
		s.seen[path] = true
		s.objects++
		s.objectBytes += info.Size()
		s.events += n
		return nil
	})
}

func (s *plS3Scanner) avgObject() (bytes int, events float64) {
	if s.objects == 0 {
		return 1 << 20, 1
	}
	return int(s.objectBytes / int64(s.objects)), float64(s.events) / float64(s.objects)
}
