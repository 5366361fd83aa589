package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// sameStopWindow is how close two signals must come to be one request to
// stop: GNU timeout (and a process manager signalling a group) sends
// SIGTERM to the process and then to its whole group, so the archiver
// gets it twice within microseconds. A second signal later than this is
// a person asking to stop at once.
const sameStopWindow = time.Second

// lastWordsWait bounds how long a forced stop waits for the command's
// last words (its report of what was not flushed) before exiting.
const lastWordsWait = 2 * time.Second

// stopper turns SIGINT and SIGTERM into a graceful stop (the command's
// context ends) and a second signal into an immediate one: the command
// says what it abandons (see onForce), and the process exits 1. Every
// signal is said on stderr, so no signal ends the process without a line.
type stopper struct {
	stderr io.Writer
	cancel context.CancelFunc

	mu        sync.Mutex
	lastWords func() // the running command's report of what it abandons
}

// watchSignals starts the stopper of a process: it returns the context
// the command runs under.
func watchSignals(stderr io.Writer) (context.Context, *stopper) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stopper{stderr: stderr, cancel: cancel}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go s.watch(sigs, time.Now, func() { os.Exit(1) })
	return ctx, s
}

// watch serves the signals of sigs: the first ends the command's context,
// another one within sameStopWindow of it is the same stop, a later one
// is forced: the last words are said (at most lastWordsWait) and exit is
// called.
func (s *stopper) watch(sigs <-chan os.Signal, now func() time.Time, exit func()) {
	first := <-sigs
	at := now()
	fmt.Fprintf(s.stderr, "archiver: %s: stopping: flushing sinks, writing final checkpoints, releasing leases (a second signal stops at once)\n", sigName(first))
	s.cancel()
	for sig := range sigs {
		if now().Sub(at) < sameStopWindow {
			continue // the same stop, delivered twice (to the process and its group)
		}
		fmt.Fprintf(s.stderr, "archiver: second signal (%s): stopping at once; the flush is abandoned\n", sigName(sig))
		s.sayLastWords()
		exit()
		return
	}
}

// onForce sets what the running command says when a second signal stops
// it at once: what it had not flushed or checkpointed. A nil stopper (a
// command run by a test) ignores it.
func (s *stopper) onForce(fn func()) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.lastWords = fn
	s.mu.Unlock()
}

// sayLastWords runs the command's report, waiting for it at most
// lastWordsWait.
func (s *stopper) sayLastWords() {
	s.mu.Lock()
	fn := s.lastWords
	s.mu.Unlock()
	if fn == nil {
		fmt.Fprintln(s.stderr, "archiver: the command's shutdown did not finish")
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(lastWordsWait):
		fmt.Fprintf(s.stderr, "archiver: no report of what was not flushed within %s\n", lastWordsWait)
	}
}

func sigName(s os.Signal) string {
	if s == os.Interrupt {
		return "SIGINT"
	}
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return s.String()
}

// abandoned says what a forced stop leaves, read from the process's
// metrics: the records read and not covered by a saved checkpoint (the
// next start reads them again from the stream, so nothing is lost while
// the stream holds them) and the bytes each sink held unflushed.
func abandoned(g prometheus.Gatherer) string {
	mfs, err := g.Gather()
	if err != nil {
		return "what was not flushed is unknown: " + err.Error()
	}
	var records float64
	shards := 0
	var held []string
	for _, mf := range mfs {
		switch mf.GetName() {
		case "archiver_checkpoint_lag_records":
			for _, m := range mf.GetMetric() {
				if v := m.GetGauge().GetValue(); v > 0 {
					records += v
					shards++
				}
			}
		case "archiver_sink_buffered_bytes":
			for _, m := range mf.GetMetric() {
				if v := m.GetGauge().GetValue(); v > 0 {
					held = append(held, fmt.Sprintf("%s %.0f bytes", labelValue(m, "sink"), v))
				}
			}
		}
	}
	out := fmt.Sprintf("not checkpointed: %.0f records in %d shards (read again from the stream on the next start)", records, shards)
	if len(held) > 0 {
		out += "; unflushed in sinks: " + strings.Join(held, ", ")
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
