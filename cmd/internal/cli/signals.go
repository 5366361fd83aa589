package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// SameStopWindow is how close two signals must come to be one request to
// stop: GNU timeout (and a process manager signalling a group) sends
// SIGTERM to the process and then to its whole group, so the process
// gets it twice within microseconds. A second signal later than this is
// a person asking to stop at once.
const SameStopWindow = time.Second

// lastWordsWait bounds how long a forced stop waits for the command's
// last words (its report of what was not flushed) before exiting.
const lastWordsWait = 2 * time.Second

// Stopping says what a process does on SIGINT and SIGTERM, in the lines
// its Stopper writes on stderr.
type Stopping struct {
	// Prog starts each line: "archiver".
	Prog string
	// Graceful is what the first signal starts: "flushing sinks, writing
	// final checkpoints, releasing leases".
	Graceful string
	// Forced is what a second signal gives up: "the flush is abandoned".
	Forced string
}

// Stopper turns SIGINT and SIGTERM into a graceful stop (the command's
// context ends) and a second signal into an immediate one: the command
// says what it abandons (see OnForce), and the process exits 1. Every
// signal is said on stderr, so no signal ends the process without a line.
type Stopper struct {
	stderr io.Writer
	say    Stopping
	cancel context.CancelFunc

	mu        sync.Mutex
	lastWords func() // the running command's report of what it abandons
}

// WatchSignals starts the Stopper of a process: it returns the context
// the command runs under.
func WatchSignals(stderr io.Writer, say Stopping) (context.Context, *Stopper) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Stopper{stderr: stderr, say: say, cancel: cancel}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go s.watch(sigs, time.Now, func() { os.Exit(1) })
	return ctx, s
}

// watch serves the signals of sigs: the first ends the command's context,
// another one within SameStopWindow of it is the same stop, a later one
// is forced: the last words are said (at most lastWordsWait) and exit is
// called.
func (s *Stopper) watch(sigs <-chan os.Signal, now func() time.Time, exit func()) {
	first := <-sigs
	at := now()
	fmt.Fprintf(s.stderr, "%s: %s: stopping: %s (a second signal stops at once)\n", s.say.Prog, sigName(first), s.say.Graceful)
	s.cancel()
	for sig := range sigs {
		if now().Sub(at) < SameStopWindow {
			continue // the same stop, delivered twice (to the process and its group)
		}
		fmt.Fprintf(s.stderr, "%s: second signal (%s): stopping at once; %s\n", s.say.Prog, sigName(sig), s.say.Forced)
		s.sayLastWords()
		exit()
		return
	}
}

// OnForce sets what the running command says when a second signal stops
// it at once: what it had not flushed or checkpointed. A nil Stopper (a
// command run by a test) ignores it.
func (s *Stopper) OnForce(fn func()) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.lastWords = fn
	s.mu.Unlock()
}

// sayLastWords runs the command's report, waiting for it at most
// lastWordsWait.
func (s *Stopper) sayLastWords() {
	s.mu.Lock()
	fn := s.lastWords
	s.mu.Unlock()
	if fn == nil {
		fmt.Fprintf(s.stderr, "%s: the command's shutdown did not finish\n", s.say.Prog)
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
		fmt.Fprintf(s.stderr, "%s: no report of what was not flushed within %s\n", s.say.Prog, lastWordsWait)
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
