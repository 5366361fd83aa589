package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttl-archiver/archiver/internal/eventually"
)

// TestMakeRunCtrlC is what a new user does first: `make run` on a
// terminal, then Ctrl-C once expiries arrive. The terminal here is a real
// pseudo-terminal with a shell that does job control, as a user's does:
// Ctrl-C is the ^C character typed on it, which the terminal turns into
// SIGINT for its foreground job. The demo must print its summary, make
// must exit 0 (not 130), and no temporary folder may be left.
func TestMakeRunCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo")
	}
	for _, tool := range []string{"make", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	tmp := t.TempDir()
	term, err := startOnTerminal(t, moduleRoot(t), []string{"TMPDIR=" + tmp, "PS1=$ "}, "bash", "--norc", "--noprofile", "-i")
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	term.typed("make run\n")
	eventually.True(t, 5*time.Minute, "an expiry in the demo", func() bool { return strings.Contains(term.out(), "  expired  ") })
	term.typed("\x03")
	eventually.True(t, 2*time.Minute, "the summary", func() bool { return strings.Contains(term.out(), "archive folder:") })
	// The terminal echoes the typed line first, so wait for the shell's
	// answer: EXIT= followed by a digit, never the $? just typed.
	term.typed("echo EXIT=$?\n")
	exitStatus := regexp.MustCompile(`EXIT=[0-9]+`)
	eventually.True(t, time.Minute, "make's exit status", func() bool { return exitStatus.MatchString(term.out()) })
	if got := exitStatus.FindString(term.out()); got != "EXIT=0" {
		t.Errorf("make run after Ctrl-C: want exit status 0\n%s", tail(term.out(), 1500))
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "ttl-archiver-demo-*")); len(left) > 0 {
		t.Errorf("the demo left %v behind", left)
	}
	term.typed("exit\n")
}

// terminal is a process on a pseudo-terminal: what it printed, and a way
// to type.
type terminal struct {
	t      *testing.T
	master *os.File
	mu     sync.Mutex
	buf    bytes.Buffer
}

// startOnTerminal starts name args on a new pseudo-terminal as its
// controlling terminal, in dir with env added, and reads its output until
// the test ends (the process is killed then).
func startOnTerminal(t *testing.T, dir string, env []string, name string, args ...string) (*terminal, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, fmt.Errorf("unlock: %w", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("pty number: %w", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		master.Close()
		slave.Close()
		return nil, err
	}
	slave.Close()
	term := &terminal{t: t, master: master}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			term.mu.Lock()
			term.buf.Write(b[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		master.Close()
	})
	return term, nil
}

// typed writes s to the terminal as if typed.
func (term *terminal) typed(s string) {
	if _, err := term.master.WriteString(s); err != nil {
		term.t.Fatalf("typing %q: %v", s, err)
	}
}

// out is everything the terminal showed so far.
func (term *terminal) out() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.buf.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
