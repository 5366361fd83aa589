package cli

import (
	"bytes"
	"context"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestStopperWatch: the first signal ends the context and is said; a
// second within SameStopWindow (GNU timeout signals the process, then its
// group) is the same stop; a later one says the command's last words and
// exits.
func TestStopperWatch(t *testing.T) {
	var now atomic.Int64
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	s := &Stopper{stderr: &out, say: Stopping{Prog: "archiver", Graceful: "flushing sinks", Forced: "the flush is abandoned"}, cancel: cancel}
	s.OnForce(func() { out.Write([]byte("last words\n")) })
	sigs := make(chan os.Signal, 3)
	exited := make(chan struct{})
	go s.watch(sigs, clock, func() { close(exited) })

	sigs <- syscall.SIGTERM
	<-ctx.Done()
	sigs <- syscall.SIGTERM // the group's copy, at the same moment
	time.Sleep(50 * time.Millisecond)
	select {
	case <-exited:
		t.Fatal("a signal delivered twice forced the stop")
	default:
	}
	now.Store(int64(2 * SameStopWindow))
	sigs <- os.Interrupt
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal did not force the stop")
	}
	want := "archiver: SIGTERM: stopping: flushing sinks (a second signal stops at once)\n" +
		"archiver: second signal (SIGINT): stopping at once; the flush is abandoned\nlast words\n"
	if out.String() != want {
		t.Errorf("stderr %q\nwant %q", out.String(), want)
	}
}

// lockedBuffer is a bytes.Buffer the Stopper's goroutine and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
